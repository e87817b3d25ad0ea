"""The documentation site (mkdocs.yml): it builds in strict mode — a broken link or anchor, a page missing from
the navigation, fails — its reference pages hold every reason code, setting, command and route of the code
they are written from at build time (scripts/docs_reference.py), and every ``scriptorium`` command the
getting-started and operations pages show in a code block is one the command line takes, options included."""

from __future__ import annotations

import argparse
import contextlib
import html
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from scriptorium.cli.main import build_parser
from scriptorium.errors import ReasonCode
from scriptorium.settings import Settings
from tests.requirements import require

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUNTIMES = ("claude-code", "codex", "pi", "openclaw")
COMMAND_PAGES = [*sorted((DOCS / "getting-started").glob("*.md")), *sorted((DOCS / "operations").glob("*.md"))]
"""The pages whose code blocks a newcomer copies into a shell."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as CI builds it: ``mkdocs build --strict`` into a folder of the test's own."""
    require("mkdocs")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's banner about MkDocs 2, on every build
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_the_site_has_a_getting_started_page_per_runtime_and_the_generated_reference(site: Path) -> None:
    for runtime in RUNTIMES:
        text = _page(site, f"getting-started/{runtime}")
        for section in ("Install", "What you should see", "Check that it works", "Uninstall"):
            assert f">{section}<" in text, (runtime, section)
    for name in ("cli", "settings", "reason-codes", "rest-api"):
        assert "Generated at build time" in _page(site, f"reference/{name}")
    assert not (DOCS / "reference").exists(), "the reference pages are written at build time, never committed"


def test_the_reason_code_reference_holds_every_code_with_its_retryability(site: Path) -> None:
    text = _page(site, "reference/reason-codes")
    for code in ReasonCode:
        row = re.search(rf"<tr>\s*<td><code>{code}</code></td>\s*<td>(yes|no)</td>", text)
        assert row is not None, f"{code} is missing from the reason-code reference"
        assert row[1] == ("yes" if code.retryable else "no"), code


def test_the_settings_reference_holds_every_setting(site: Path) -> None:
    text = _page(site, "reference/settings")
    for name in Settings.model_fields:
        assert f"<td><code>SCRIPTORIUM_{name.upper()}</code></td>" in text, name


def _command_names() -> list[tuple[str, ...]]:
    """Every command and subcommand as ``scriptorium --help`` and each command's ``--help`` list them."""
    found: list[tuple[str, ...]] = []

    def listed(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    found.append((*words, choice.dest))
                    listed(action.choices[choice.dest], (*words, choice.dest))

    listed(build_parser(), ())
    return found


def test_the_cli_reference_holds_every_command_and_subcommand(site: Path) -> None:
    text = _page(site, "reference/cli")
    names = _command_names()
    assert {"memory", "ingest", "setup", "serve"} <= {words[0] for words in names}
    for words in names:
        assert f'id="{"-".join(("scriptorium", *words))}"' in text, " ".join(words)


def test_the_rest_reference_holds_every_route(site: Path, tmp_path: Path) -> None:
    from scriptorium.web.app import create_app

    text = html.unescape(_page(site, "reference/rest-api"))
    document = create_app(Settings(state=tmp_path)).openapi()
    assert document["paths"]
    for path, operations in document["paths"].items():
        for method in operations:
            assert re.search(rf"<td>{method.upper()}</td>\s*<td><code>{re.escape(path)}</code></td>", text), (
                method,
                path,
            )


def shell_commands(markdown: str) -> list[list[str]]:
    """The ``scriptorium`` command lines of the fenced code blocks of ``markdown``: each line (continued
    lines joined, a ``$`` prompt and ``#`` comments left out) split into commands at ``&&``, ``||``, ``|`` and
    ``;``, each command's words as the shell would pass them."""
    found = []
    for block in re.finditer(r"^([ \t]*)```[^\n]*\n(.*?)^\1```", markdown, re.S | re.M):
        for line in block[2].replace("\\\n", " ").splitlines():
            words = shlex.split(line.strip().removeprefix("$ "), comments=True)
            command: list[str] = []
            for word in [*words, ";"]:
                if word in ("&&", "||", "|", ";"):
                    if command[:1] == ["scriptorium"]:
                        found.append(command)
                    command = []
                else:
                    command.append(word)
    return found


def refusal(args: list[str]) -> str | None:
    """Why the command line refuses ``scriptorium ARGS``, or None: the command it names must exist (``--help``
    of its words succeeds) and the whole line must parse, options included. Nothing runs."""
    parser, words = build_parser(), []
    for arg in args:
        commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not commands or arg not in commands[0].choices:
            break
        parser, words = commands[0].choices[arg], [*words, arg]
    if not words:
        return f"{args[:1]} is no command of scriptorium"
    for argv, expected in (([*words, "--help"], 0), (args, None)):
        said = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(said):
            try:
                build_parser().parse_args(argv)
            except SystemExit as exit:
                if exit.code != expected or expected is None:
                    return said.getvalue().strip().splitlines()[-1] if said.getvalue().strip() else f"exit {exit.code}"
    return None


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=lambda page: f"{page.parent.name}/{page.name}")
def test_every_command_a_page_shows_is_one_the_command_line_takes(page: Path) -> None:
    commands = shell_commands(page.read_text(encoding="utf-8"))
    assert commands or page.parent.name != "getting-started", f"{page.name} shows no scriptorium command"
    refused = [f"{' '.join(c)}: {why}" for c in commands if (why := refusal(c[1:])) is not None]
    assert refused == [], f"{page.relative_to(ROOT)}: " + "; ".join(refused)


def test_the_getting_started_pages_install_set_up_and_uninstall_their_runtime() -> None:
    for runtime in RUNTIMES:
        commands = shell_commands((DOCS / "getting-started" / f"{runtime}.md").read_text(encoding="utf-8"))
        assert ["scriptorium", "setup", runtime] in commands, runtime
        assert ["scriptorium", "setup", runtime, "--uninstall"] in commands, runtime
        assert ["scriptorium", "memory", "status"] in commands, runtime


def test_the_command_check_refuses_what_the_command_line_does_not_take() -> None:
    text = "```sh\npip install x && scriptorium memory frobnicate\necho '{}' | scriptorium setup pi --nope # ok\n```\n"
    commands = shell_commands(text)
    assert commands == [["scriptorium", "memory", "frobnicate"], ["scriptorium", "setup", "pi", "--nope"]]
    assert all(refusal(c[1:]) is not None for c in commands)
    assert refusal(["frobnicate"]) is not None
    assert refusal(["setup", "emacs"]) is not None
    assert refusal(["setup", "codex", "--trust-hooks"]) is None
