"""Secrets never enter memory: every text and every name is redacted where it is stored, whichever route
brought it.

:meth:`Redactor.text` is what every store calls on what it keeps: the session store (through
:class:`scriptorium.redaction_store.RedactingStore`: every node's content and metadata, every session's
metadata and, as names, every session, node, parent and provider ID), the memory workspace (every staged topic
and its path, every archived source, every commit message: ``WorkspaceConfig.redactor``), the proposals kept
for review; the transcript importers also redact every decoded string of every line before they read it, so no
importer state, cursor or title holds a secret either. A secret becomes a placeholder that keeps the text
readable::

    export AWS_ACCESS_KEY_ID=[redacted: aws-access-key #3f2a9c]

and, in a name (an ID, a path), one that is a name too: ``redacted-aws-access-key-3f2a9c``.

The tag is a keyed hash (HMAC-SHA256 with a random key kept in the state folder, ``redaction.key``, 0600):
the same secret reads the same in every message and every import, so archiving stays a pure function of the
(redacted) message and a re-import writes nothing, yet the tag says nothing of the secret.

Detection (:mod:`scriptorium.redaction_rules`) is Yelp's ``detect-secrets`` rule set (its regex detectors:
AWS, Azure storage, GitHub, GitLab, Slack, Stripe, OpenAI, JWT, npm, PyPI, SendGrid, Twilio, Discord, … and
passwords in URLs), with what it lacks added as rules of the same kind (Anthropic, Google API keys, OpenAI
project keys, whole private-key blocks, an AWS secret key standing in prose near the word or a key ID),
secret-named assignments (``PASSWORD=…``, ``api_key: "…"``, ``GITHUB_TOKEN=…``) whose value looks random (at
least 8 characters, Shannon entropy of 3 bits or more per character, not a template or a reference), and the
user's own patterns (``SCRIPTORIUM_REDACT_PATTERNS``, RE2 syntax). Every rule runs on RE2, so a scan takes time
linear in the text whatever it holds. ``SCRIPTORIUM_REDACT=off`` stores everything verbatim.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from scriptorium.redaction_rules import (
    AWS_SECRET_CONTEXT,
    MIN_VALUE,
    Rule,
    compile_rule,
    detector_rules,
    rule_set,
)
from scriptorium.sessions.model import Node, map_strings

KEY_FILE = "redaction.key"
PLACEHOLDER = re.compile(r"\[redacted: [a-z0-9-]+ #[0-9a-f]{6}\]")
_PLACEHOLDER_PARTS = re.compile(r"\[redacted: ([a-z0-9-]+) #([0-9a-f]{6})\]")
_MARK = "[redacted: "
_PLACED = re.compile(rb"\\?\[redacted: [a-z0-9-]+ #[0-9a-f]{6}\\?\]")
"""A placeholder as it stands in stored text (Markdown escapes its brackets): a name given one is redacted already."""
MIN_ENTROPY = 3.0
"""Shannon entropy (bits per character) a secret-named assignment's value must reach."""
AWS_SECRET_ENTROPY = 4.0
"""Entropy a bare 40-character run must reach to be taken for an AWS secret key (a git SHA, hex, stays below)."""
AWS_SECRET_REACH = 200
"""How far before or after a bare 40-character run the word ``aws`` or ``secret``, or a key ID, must stand."""
MAX_ROUNDS = 4
"""Scans of one text: a text redacted once is scanned again (a placeholder may end a run a rule now matches)."""
SPLIT_REACH = 256
"""How much of the end of one message and the start of the next is read for a secret cut in two between them."""
VALUE_PROBE = 256
"""How much of a secret-named assignment's value is read to tell whether it looks random."""
REPLACED_ELSEWHERE = 64
"""Secrets of one text looked for again wherever else they stand (beyond where a rule found them)."""
_TOKEN_TAIL = re.compile(rb"[A-Za-z0-9_+/=.-]*")
"""What continues a token a detector matched only the start of (a JWT's signature, a key cut short)."""
_SPACE = re.compile(r"\s")
MAX_PLAIN_NAME = 512
"""Names up to this long are first looked at without the rules (:meth:`Redactor._plain_name`)."""
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_+/=:.@-]{16,}")
"""Every secret format the detectors know is a run of at least 16 such characters."""
_NO_SECRET_RUN = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\d{4}-\d\d-\d\d(?:T[\d:.]+(?:Z|[+-]\d\d:?\d\d)?)?"
)
"""Runs no rule matches: a UUID, an ISO date or time."""
_KEYWORD = re.compile(r"(?i)key|secret|passw|pwd|token|credential")


def entropy(value: str) -> float:
    """Shannon entropy of ``value``, in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _random_looking(value: str) -> bool:
    from detect_secrets.filters import heuristic

    if len(value) < MIN_VALUE or entropy(value) < MIN_ENTROPY or _MARK in value:
        return False
    if value.startswith(("[", "(")) or "](" in value:
        return False  # Markdown's own syntax after a name (a citation ``secret: [label](source)``, ``[^ref]``)
    return not (
        heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_sequential_string(value)
        or value.startswith(("http://", "https://", "/", "./", "~"))
    )


def _indirect(assignment: str) -> bool:
    """``pwd = process.cwd()``, ``token: os.environ.get(…)``: a name given a call's or a lookup's result."""
    from detect_secrets.filters import heuristic

    return bool(heuristic.is_indirect_reference(assignment))


def _aws_secret(value: str, data: bytes, start: int) -> bool:
    """A bare run taken for an AWS secret access key: 40 characters of upper and lower case letters and digits
    (``/`` and ``+`` allowed), random-looking, with the word or a key ID within reach."""
    if len(value) != 40 or "=" in value or entropy(value) < AWS_SECRET_ENTROPY:
        return False
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)):
        return False
    near = data[max(0, start - AWS_SECRET_REACH) : start] + b" " + data[start + 40 : start + 40 + AWS_SECRET_REACH]
    return AWS_SECRET_CONTEXT.search(near) is not None


def _tail_end(data: bytes, end: int) -> int:
    tail = _TOKEN_TAIL.match(data, end)
    return tail.end() if tail else end


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


class Redactor:
    """Secrets out of text and names: detection (see the module) and the keyed placeholders."""

    def __init__(self, key: bytes | Callable[[], bytes], patterns: Iterable[str] = ()) -> None:
        self._key_source = key
        self._custom = [compile_rule(pattern, "custom", whole=True) for pattern in patterns]
        """The user's own rules, compiled now: a bad one is refused before anything runs."""
        self._compiled: tuple[list[Rule], Any] | None = None

    @property
    def _key(self) -> bytes:
        """The tag's key, read (or made) when the first secret needs a placeholder: a command that meets none
        leaves the state folder as it was."""
        if callable(self._key_source):
            self._key_source = self._key_source()
        return self._key_source

    def _matcher(self) -> tuple[list[Rule], Any]:
        """Every rule and their RE2 set, built on first use (detect-secrets loads its whole plugin set)."""
        if self._compiled is None:
            rules = [*detector_rules(), *self._custom]
            self._compiled = (rules, rule_set(rules))
        return self._compiled

    def placeholder(self, secret: str, kind: str) -> str:
        return f"[redacted: {kind} #{self._tag(secret)}]"

    def _tag(self, secret: str) -> str:
        return hmac.new(self._key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:6]

    def may_hold(self, text: str) -> bool:
        """Whether any rule matches anywhere in ``text`` (one linear pass; False: nothing to redact)."""
        return len(text) >= MIN_VALUE and self._matcher()[1].Match(text.encode("utf-8", "surrogatepass")) is not None

    def findings(self, text: str) -> list[tuple[str, str]]:
        """(secret, kind) of each secret in ``text``, longest first."""
        found, _spans = self._scan(text)
        return sorted(found.items(), key=lambda item: len(item[0]), reverse=True)

    def _scan(self, text: str) -> tuple[dict[str, str], list[tuple[int, int, str]]]:
        """Each secret in ``text`` → its kind, and where each was found: (start, end, secret) in the UTF-8 bytes.

        One RE2 pass tells which rules match anywhere; each of those then runs from the start, and after each
        secret it takes, on from that secret's end (a match inside a secret's tail is part of it): the work is
        linear in the text, whatever it repeats."""
        found: dict[str, str] = {}
        spans: list[tuple[int, int, str]] = []
        if len(text) < MIN_VALUE:
            return found, spans
        data = text.encode("utf-8", "surrogatepass")
        rules, matcher = self._matcher()
        for index in sorted(matcher.Match(data) or ()):  # the named kinds before the assignment rule
            rule = rules[index]
            if rule.aws_secret and not AWS_SECRET_CONTEXT.search(data):
                continue  # a bare 40-character run is a secret only near the word or a key ID: none here
            pos = 0
            while (match := rule.regex.search(data, pos)) is not None:
                start, stop = self._span_of(rule, match, data)
                pos = max(stop, match.end() + (match.end() == match.start()))
                if start < 0:
                    continue
                secret = _decode(data[start:stop])
                if len(secret) >= MIN_VALUE and _MARK not in secret:
                    found.setdefault(secret, rule.kind)
                    spans.append((start, stop, secret))
        return found, spans

    @staticmethod
    def _span_of(rule: Rule, match: Any, data: bytes) -> tuple[int, int]:
        """Where a rule's match has a secret, in bytes ((-1, end of match): none): the value of a secret-named
        assignment, the group a detector captures when that is the secret (a URL's password, a key after its
        name), else (or for a ``whole`` rule) the whole match, run on to the end of its token."""
        if rule.assignment:
            if _PLACED.match(data, match.start(2)):
                return -1, match.end()  # a name given a placeholder: redacted already
            # Judged on its first characters: a value's look does not change past them, and a scan must not
            # grow with a 100 KB one.
            value = _decode(data[match.start(2) : min(match.end(2), match.start(2) + VALUE_PROBE)])
            name = _decode(data[match.start(1) : match.end(1)])
            if _random_looking(value) and not _indirect(name + value):
                return match.span(2)  # type: ignore[no-any-return]
            return -1, match.end()
        if rule.aws_secret:
            value = _decode(match.group(0))
            return match.span() if _aws_secret(value, data, match.start()) else (-1, match.end())
        if not rule.whole:
            groups = [i for i, g in enumerate(match.groups(), 1) if g and len(g) >= MIN_VALUE]
            if groups:
                return match.span(max(groups, key=lambda i: len(match.group(i))))  # type: ignore[no-any-return]
        end = match.end() if rule.whole else _tail_end(data, match.end())
        return match.start(), end

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by its placeholder (the same text when it holds none)."""
        return self.redact(text)[0]

    def name(self, value: str) -> str:
        """An identifier (a session, node or provider ID, a path) with every secret replaced by a placeholder
        that is a name too (``redacted-<kind>-<tag>``), text placeholders (an importer's) included."""
        if _MARK not in value and (self._plain_name(value) or not self.may_hold(value)):
            return value
        return _PLACEHOLDER_PARTS.sub(lambda m: f"redacted-{m[1]}-{m[2]}", self.text(value))

    def _plain_name(self, value: str) -> bool:
        """A short name no rule could match, told without the rules (a read of a session by its UUID need not
        load them): no run of 16 token characters but a UUID or a date, no secret-sounding name."""
        if self._custom or len(value) > MAX_PLAIN_NAME:
            return False
        runs = (run.group(0) for run in _TOKEN_RUN.finditer(value))
        return all(_NO_SECRET_RUN.fullmatch(run) for run in runs) and not _KEYWORD.search(value)

    def redact(self, text: str) -> tuple[str, dict[str, str]]:
        """``text`` redacted, and each secret found → its placeholder (what else must lose it: the copies
        derived from a text stored before redaction, ``scriptorium memory redact``)."""
        replaced: dict[str, str] = {}
        for _round in range(MAX_ROUNDS):
            found, spans = self._scan(text)
            if not found:
                break
            placeholders = {secret: self.placeholder(secret, kind) for secret, kind in found.items()}
            replaced.update(placeholders)
            text = _replace_all(text, spans, placeholders)
        return text, replaced

    def value(self, value: Any) -> Any:
        """Every string inside a JSON value redacted (dict keys too); one pass over all of them first, so a value
        none of whose strings holds a secret is handed back as it is."""
        strings: list[str] = []

        def collect(text: str) -> str:
            strings.append(text)
            return text

        map_strings(value, collect)
        if not self.may_hold("\n".join(strings)):
            return value
        return map_strings(value, self.text)

    def split_secrets(self, texts: Sequence[str]) -> list[str]:
        """``texts`` (consecutive messages of one conversation) with each secret cut in two between one and the
        next replaced, in both, by the whole secret's placeholder: the end of one and the start of the next are
        read together (at most :data:`SPLIT_REACH` characters of each, up to their whitespace)."""
        out = list(texts)
        for i in range(len(out) - 1):
            left, right = out[i], out[i + 1]
            tail = _SPACE.split(left[-SPLIT_REACH:])[-1]
            head = _SPACE.split(right[:SPLIT_REACH], maxsplit=1)[0]
            if not tail or not head:
                continue
            joined = tail + head
            for secret, kind in self.findings(joined):
                start = joined.find(secret)
                if start >= len(tail) or start + len(secret) <= len(tail):
                    continue  # wholly in one of the two: each message's own redaction takes it
                mark = self.placeholder(secret, kind)
                cut = len(tail) - start
                out[i] = left[: len(left) - cut] + mark
                out[i + 1] = mark + right[len(secret) - cut :]
                break
        return out


def _replace_all(text: str, spans: list[tuple[int, int, str]], placeholders: dict[str, str]) -> str:
    """Each secret where it was found replaced by its placeholder (one pass over the bytes), then — for up to
    :data:`REPLACED_ELSEWHERE` secrets, longest first — wherever else it stands (the value of a secret-named
    assignment repeated bare, say): the work stays linear however many secrets a text holds."""
    data = text.encode("utf-8", "surrogatepass")
    pieces: list[bytes] = []
    at = 0
    for start, stop, secret in sorted(spans):
        if start < at:
            continue  # inside a longer secret taken already
        pieces += [data[at:start], placeholders[secret].encode()]
        at = stop
    pieces.append(data[at:])
    text = _decode(b"".join(pieces))
    for secret in sorted(placeholders, key=len, reverse=True)[:REPLACED_ELSEWHERE]:
        if secret in text:
            text = text.replace(secret, placeholders[secret])
    return text


def redact_nodes(nodes: Iterable[Node], redactor: Redactor | None) -> list[Node]:
    """``nodes`` with their content and metadata redacted (as they are without a redactor)."""
    if redactor is None:
        return list(nodes)
    return [replace(n, content=redactor.text(n.content), metadata=redactor.value(dict(n.metadata))) for n in nodes]


def state_key(state: Path) -> bytes:
    """The state folder's redaction key (made once: 32 random bytes, 0600)."""
    path = state / KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    state.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{KEY_FILE}.{os.getpid()}")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(32))
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs is the key
            os.link(scratch, path)  # whole or not at all, and never over another's
    finally:
        scratch.unlink(missing_ok=True)
    return path.read_bytes()


@cache
def _redactor(state: str, patterns: tuple[str, ...]) -> Redactor:
    return Redactor(lambda: state_key(Path(state)), patterns)


def redactor_for(state: Path, enabled: bool, patterns: Iterable[str] = ()) -> Redactor | None:
    """The redactor for a state folder (one per process and folder), or None when redaction is off."""
    return state_redactor(state, patterns) if enabled else None


def state_redactor(state: Path, patterns: Iterable[str] = ()) -> Redactor:
    """The state folder's redactor, whether or not conversations are redacted as they come in."""
    return _redactor(str(state.resolve()), tuple(patterns))
