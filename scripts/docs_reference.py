"""The documentation site's reference pages, written from the code at every build so they cannot drift.

A MkDocs hook (``hooks:`` in mkdocs.yml): ``mkdocs build`` and ``mkdocs serve`` add four pages the checkout
does not hold — every command of the command line from its argparse parsers, every setting from
:class:`scriptorium.settings.Settings`, every reason code from :class:`scriptorium.errors.ReasonCode`, and the
REST API from the app's own OpenAPI document — and the cluster runbook (``ops/README.md``), which lives beside
the deployment files rather than under ``docs/``.

The pages of ``docs/`` are written to be read on GitHub too: each opens with a line of links back to the
README, outside the site; the hook leaves that line out of the site, where the navigation does its work.
tests/test_docs_site.py builds the site strictly and checks what these pages must hold.
"""

from __future__ import annotations

import argparse
import inspect
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = {
    "reference/cli.md": "cli_page",
    "reference/settings.md": "settings_page",
    "reference/reason-codes.md": "reason_codes_page",
    "reference/rest-api.md": "rest_api_page",
}
"""Each generated page and the function that writes it."""
RUNBOOK = "operations/cluster-runbook.md"
"""Where ``ops/README.md`` shows in the site."""
OUTSIDE_LINKS = {"../ops/README.md": RUNBOOK}
"""Links of docs/ pages to files outside docs/ that the site carries under another name."""
GITHUB_ONLY = re.compile(r"^\[README\]\(\.\./README\.md\).*\n", re.M)
"""The line of links back to the README that opens each docs/ page on GitHub."""
_GENERATED = "<!-- Generated at build time by scripts/docs_reference.py; not a file of the checkout. -->\n\n"


@dataclass(frozen=True)
class Command:
    """One command of the command line: its words after ``scriptorium``, its help and its parser."""

    words: tuple[str, ...]
    help: str
    parser: argparse.ArgumentParser

    @property
    def name(self) -> str:
        return " ".join(("scriptorium", *self.words))


def commands() -> list[Command]:
    """Every command and subcommand, in the order ``--help`` lists them (each parser made as if named)."""
    from scriptorium.cli.main import build_parser

    return list(_walk(build_parser(), ()))


def _walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> Iterator[Command]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name in list(action.choices):
                sub = action.choices[name]
                yield Command((*words, name), helps.get(name, ""), sub)
                yield from _walk(sub, (*words, name))


def _subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(action, argparse._SubParsersAction) for action in parser._actions)


def _prose(text: object) -> str:
    """Plain text (a parser's help, a field's description) as Markdown that shows it as written: ``<state>``
    is no HTML tag and ``*.jsonl`` no emphasis; what it quotes in backticks stays code, as written."""
    paired = str(text).count("`") % 2 == 0
    parts = str(text).split("`") if paired else [str(text)]  # a backtick with no pair: no code span, all text
    for i in range(0, len(parts), 2):  # the text between the code spans
        value = parts[i].replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`")
        parts[i] = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).strip()


def _cell(text: object) -> str:
    """Plain text fit for one cell of a Markdown table."""
    return _prose(text).replace("|", "\\|").replace("\n", " ")


def _code(text: object) -> str:
    """``text`` as inline code in a table cell (a backtick inside gets a longer fence; a pipe inside a code
    span splits no cell in Python-Markdown's tables)."""
    value = str(text)
    fence = "``" if "`" in value else "`"
    return f"{fence}{value}{fence}" if fence == "`" else f"{fence} {value} {fence}"


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=100)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = argparse.HelpFormatter(parser.prog, width=100)
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            spelled = ", ".join(action.option_strings)
            if action.nargs != 0:
                spelled += " " + formatter._format_args(action, action.dest.upper())
        else:
            spelled = formatter._format_args(action, action.dest)
        help_text = formatter._expand_help(action) if action.help else ""
        if action.choices is not None and "{" not in spelled:
            help_text += (" " if help_text else "") + "(one of: " + ", ".join(map(str, action.choices)) + ")"
        if action.default not in (None, False, argparse.SUPPRESS, []) and "default" not in help_text:
            help_text += f" (default: {action.default})"
        rows.append(f"| {_code(spelled)} | {_cell(help_text) or '—'} |")
    return rows


def cli_page() -> str:
    from scriptorium.cli.main import build_parser

    lines = [
        "# Command line reference",
        "",
        _GENERATED.strip(),
        "",
        "Every command of `scriptorium`, written from the command line's own parsers when the site is built:",
        "what `scriptorium COMMAND --help` prints, as a page. The [command overview](../cli.md) puts them on one",
        "screen; exit codes are under [Reason codes](reason-codes.md).",
        "",
        "```text",
        _usage(build_parser()),
        "```",
        "",
    ]
    found = commands()
    lines += ["| command | what it does |", "|---|---|"]
    for command in found:
        lines.append(f"| [`{command.name}`](#{_anchor(command)}) | {_cell(command.help)} |")
    lines.append("")
    for command in found:
        heading = "#" * (len(command.words) + 1)
        lines += [f"{heading} {command.name} {{#{_anchor(command)}}}", ""]
        description = command.parser.description or command.help
        lines += [_prose(description), "", "```text", _usage(command.parser), "```", ""]
        rows = _argument_rows(command.parser)
        if rows:
            lines += ["| argument | what |", "|---|---|", *rows, ""]
        if _subcommands(command.parser):
            lines += ["Its subcommands follow.", ""]
    return "\n".join(lines)


def _anchor(command: Command) -> str:
    return "-".join(("scriptorium", *command.words))


def settings_page() -> str:
    from pydantic_core import PydanticUndefined

    from scriptorium.settings import ENV_PREFIX as prefix
    from scriptorium.settings import Settings

    lines = [
        "# Settings reference",
        "",
        _GENERATED.strip(),
        "",
        f"Every setting, read from the environment as `{prefix}NAME` (case does not matter), written from",
        "`scriptorium.settings.Settings` when the site is built. A bad value stops every command with one",
        "`INVALID_ARGUMENT` line naming the variable. [Settings](../operations/settings.md) says which to",
        "change and why.",
        "",
        "| variable | type | default | what |",
        "|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:
            made = field.default_factory
            default = repr(made()) if made in (list, dict, set, tuple) else "computed"  # type: ignore[call-arg]
        elif field.default is PydanticUndefined:
            default = "required"
        else:
            default = repr(str(field.default) if isinstance(field.default, Path) else field.default)
        kind = _type_name(field.annotation) + "".join(_bounds(field.metadata))
        described = _cell(field.description or "")
        lines.append(f"| `{prefix}{name.upper()}` | {_code(kind)} | {_code(default)} | {described or '—'} |")
    return "\n".join(lines) + "\n"


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("pathlib.", "")


def _bounds(metadata: list[Any]) -> Iterator[str]:
    for kind, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
        for item in metadata:
            if getattr(item, kind, None) is not None:
                yield f", {sign} {getattr(item, kind)}"


def reason_codes_page() -> str:
    from scriptorium import errors
    from scriptorium.errors import ReasonCode, ScriptoriumError

    status = _http_status()
    raised: dict[ReasonCode, list[str]] = {}
    for name, value in vars(errors).items():
        # The classes that name a code of their own.
        if inspect.isclass(value) and issubclass(value, ScriptoriumError) and "default_reason" in vars(value):
            if value is ScriptoriumError:
                continue
            raised.setdefault(value.default_reason, []).append(name)
    meanings = _meanings()
    lines = [
        "# Reason codes",
        "",
        _GENERATED.strip(),
        "",
        "Every reason code a failure can carry, written from `scriptorium.errors.ReasonCode` when the site is",
        "built: whether retrying the same input can help, the HTTP status the REST API answers it with, the",
        "exception that carries it by default, and what it means (from the table in",
        "[The memory workspace](../workspace.md#reason-codes)). The codes are stable: deprecated, never renamed.",
        "",
        "The command line exits 0 on success, 1 on an unexpected failure (`UNCLASSIFIED_ERROR`), 2 on bad usage,",
        "3 when rejected (a code that is not retryable), 75 when retryable, 130 when interrupted and 141 when the",
        "reader of its output went away.",
        "",
        "| code | retryable | HTTP | raised as | meaning |",
        "|---|---|---|---|---|",
    ]
    for code in ReasonCode:
        http = str(status(code)) if status is not None else "—"
        classes = ", ".join(f"`{name}`" for name in raised.get(code, [])) or "—"
        meaning = meanings.get(str(code), "not described yet in the workspace page's table")
        lines.append(f"| `{code}` | {'yes' if code.retryable else 'no'} | {http} | {classes} | {meaning} |")
    return "\n".join(lines) + "\n"


def _http_status() -> Any:
    """The REST API's status for a reason code (``http_status`` of the web package), or None without it."""
    import importlib

    for module in ("scriptorium.web.errors", "scriptorium.web.app"):
        try:
            found = getattr(importlib.import_module(module), "http_status", None)
        except ImportError:
            continue
        if found is not None:
            return found
    return None


def _meanings() -> dict[str, str]:
    """Each code's meaning from docs/workspace.md's reason-code table, its links made relative to reference/."""
    meanings = {}
    for line in (ROOT / "docs" / "workspace.md").read_text(encoding="utf-8").splitlines():
        row = re.match(r"\| `([A-Z_]+)` \| (?:yes|no) \| (.*) \|$", line)
        if row:
            meanings[row[1]] = re.sub(r"\]\((?![a-z]+:|#)([^)]+)\)", r"](../\1)", row[2])
    return meanings


def rest_api_page() -> str:
    from scriptorium.settings import Settings
    from scriptorium.web.app import create_app

    with tempfile.TemporaryDirectory() as state:  # the app makes its owner token there, and nothing else
        document = create_app(Settings(state=Path(state))).openapi()
    info = document.get("info", {})
    lines = [
        "# REST API reference",
        "",
        _GENERATED.strip(),
        "",
        f"{info.get('title', 'The API')} (version {info.get('version', '?')}), written from the OpenAPI document",
        "the server itself serves (`scriptorium serve`, at `/openapi.json`) when the site is built. Every error",
        "answer carries the reason-code body ([Reason codes](reason-codes.md)); `x-scopes` names the tokens a",
        "route takes ([Requesters](../access.md)).",
        "",
        "| method | path | what | scopes | answers |",
        "|---|---|---|---|---|",
    ]
    details = []
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            summary = operation.get("summary") or operation.get("operationId", "")
            scopes = ", ".join(operation.get("x-scopes", [])) or "—"
            answers = ", ".join(sorted(operation["responses"]))
            lines.append(f"| {method.upper()} | `{path}` | {_cell(summary)} | {scopes} | {answers} |")
            described = (operation.get("description") or "").strip()
            parameters = operation.get("parameters", [])
            if described or parameters:
                details += [f"### {method.upper()} `{path}`", "", described or _cell(summary), ""]
                if parameters:
                    details += ["| parameter | in | type | required | what |", "|---|---|---|---|---|"]
                    for parameter in parameters:
                        details.append(
                            f"| `{parameter.get('name')}` | {parameter.get('in')} | "
                            f"{_schema_name(parameter.get('schema', {}))} | "
                            f"{'yes' if parameter.get('required') else 'no'} | "
                            f"{_cell(parameter.get('description', '')) or '—'} |"
                        )
                    details.append("")
                body = operation.get("requestBody", {}).get("content", {})
                for media, content in body.items():
                    details += [f"Body ({media}): {_schema_name(content.get('schema', {}))}.", ""]
    if details:
        lines += ["", "## Routes in detail", "", *details]
    return "\n".join(lines) + "\n"


def _schema_name(schema: dict[str, Any]) -> str:
    """A parameter's or body's schema in a word: its component's name, or its JSON type."""
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in schema:
        return " or ".join(_schema_name(option) for option in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items', {}))}"
    return f"`{schema['type']}`" if "type" in schema else "any"


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages and the runbook to the build's files."""
    from mkdocs.structure.files import File

    for uri, writer in REFERENCE.items():
        files.append(File.generated(config, uri, content=globals()[writer]()))
    runbook = (ROOT / "ops" / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, RUNBOOK, content=runbook))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """A docs/ page as the site shows it: without its line of links back to the README, and with its links to
    files the site carries under another name pointed there."""
    markdown = GITHUB_ONLY.sub("", markdown, count=1)
    if "/" not in page.file.src_uri:
        for outside, inside in OUTSIDE_LINKS.items():
            markdown = markdown.replace(f"]({outside})", f"]({inside})")
    return markdown
