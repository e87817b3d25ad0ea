"""Secrets never enter memory: every conversation is redacted where it comes in, before it is stored.

One function, :meth:`Redactor.text`, is what the transcript importers (on every JSON string of every line,
``producers.importing.json_objects``) and the session nodes route (on every node) call before anything is
stored, archived, indexed or committed. A secret becomes a placeholder that keeps the text readable::

    export AWS_ACCESS_KEY_ID=[redacted: aws-access-key #3f2a9c]

The tag is a keyed hash (HMAC-SHA256 with a random key kept in the state folder, ``redaction.key``, 0600):
the same secret reads the same in every message and every import, so archiving stays a pure function of the
(redacted) message and a re-import writes nothing, yet the tag says nothing of the secret.

Detection is Yelp's ``detect-secrets`` rule set (its regex detectors: AWS, Azure storage, GitHub, GitLab,
Slack, Stripe, OpenAI, JWT, npm, PyPI, SendGrid, Twilio, Discord, … and passwords in URLs), with what it
lacks added as detectors of its own kind (:class:`AnthropicDetector`, :class:`GoogleApiKeyDetector`, whole
private-key blocks), secret-named assignments (``PASSWORD=…``, ``api_key: "…"``, ``GITHUB_TOKEN=…``) whose
value looks random (at least 8 characters, Shannon entropy of 3 bits or more per character, not a template
or a reference), and the user's own patterns (``SCRIPTORIUM_REDACT_PATTERNS``). ``SCRIPTORIUM_REDACT=off``
stores everything verbatim.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from scriptorium.errors import InvalidArgument
from scriptorium.sessions.model import Node, map_strings

KEY_FILE = "redaction.key"
PLACEHOLDER = re.compile(r"\[redacted: [a-z0-9-]+ #[0-9a-f]{6}\]")
_MARK = "[redacted: "
MIN_VALUE = 8
"""A secret-named assignment's value shorter than this is not taken for a secret."""
MIN_ENTROPY = 3.0
"""Shannon entropy (bits per character) a secret-named assignment's value must reach."""
MAX_ROUNDS = 8
"""Scans of one text: a detector that yields its first match only is run again until it finds nothing new."""


def _detectors() -> list[Any]:
    """The regex detectors of detect-secrets, and ours of the same kind (imported on first use: the library
    loads its whole plugin set)."""
    from detect_secrets.plugins import (
        artifactory,
        aws,
        azure_storage_key,
        basic_auth,
        discord,
        github_token,
        gitlab_token,
        jwt,
        mailchimp,
        npm,
        openai,
        pypi_token,
        sendgrid,
        slack,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )
    from detect_secrets.plugins.base import RegexBasedDetector

    class AnthropicDetector(RegexBasedDetector):
        secret_type = "Anthropic API Key"
        denylist = (re.compile(r"sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{80,}"),)

    class GoogleApiKeyDetector(RegexBasedDetector):
        secret_type = "Google API Key"
        denylist = (re.compile(r"AIza[0-9A-Za-z_-]{35}"),)

    class OpenAIProjectKeyDetector(RegexBasedDetector):
        """OpenAI's project, service-account and admin keys, which need not carry ``T3BlbkFJ``."""

        secret_type = "OpenAI Token"
        denylist = (re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}"),)

    class PrivateKeyBlockDetector(RegexBasedDetector):
        """The whole block, not only its first line (detect-secrets' own detector flags the header)."""

        secret_type = "Private Key"
        whole_match = True
        denylist = (
            re.compile(
                r"-----BEGIN (?P<kind>(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
                r"(?:[^\"]*?-----END (?P=kind)-----|[^\"]*)"
            ),
        )

    plugins = (
        artifactory.ArtifactoryDetector,
        aws.AWSKeyDetector,
        azure_storage_key.AzureStorageKeyDetector,
        basic_auth.BasicAuthDetector,
        discord.DiscordBotTokenDetector,
        github_token.GitHubTokenDetector,
        gitlab_token.GitLabTokenDetector,
        jwt.JwtTokenDetector,
        mailchimp.MailchimpDetector,
        npm.NpmDetector,
        openai.OpenAIDetector,
        pypi_token.PypiTokenDetector,
        sendgrid.SendGridDetector,
        slack.SlackDetector,
        square_oauth.SquareOAuthDetector,
        stripe.StripeDetector,
        telegram_token.TelegramBotTokenDetector,
        twilio.TwilioKeyDetector,
        AnthropicDetector,
        GoogleApiKeyDetector,
        OpenAIProjectKeyDetector,
        PrivateKeyBlockDetector,
    )
    return [plugin() for plugin in plugins]


_KEYWORDS = r"(?:api_?key|auth_?key|access_?key|secret|passw(?:or)?d|pwd|token|credentials?|private_?key|client_?key)"
_ASSIGNMENT = re.compile(
    r"(?i)" + _KEYWORDS + r"[A-Za-z0-9_.-]*[\"']?\s*(?:=|:|:=|=>)\s*([\"'`]?)([^\s\"'`,;]{" + str(MIN_VALUE) + r",})\1"
)
"""``NAME = value`` (``=``, ``:``, ``:=``, ``=>``; the value optionally quoted) with a secret-sounding name: the
shape of detect-secrets' keyword detector, with ``token`` and ``credentials`` added."""
_ASSIGNMENT_LOWER = re.compile(_KEYWORDS + r"[a-z0-9_.-]*[\"']?\s*(?:=|:|:=|=>)")
"""The same without ignoring case, run first on the lowered text: ten times faster, and most text has none."""
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_+/=:.@-]{16,}")
"""Every secret format the detectors know is a run of at least 16 such characters (a key, a token, a URL
with a password, a key block's lines): text without one is not scanned by them."""
_NO_SECRET_RUN = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\d{4}-\d\d-\d\d(?:T[\d:.]+(?:Z|[+-]\d\d:?\d\d)?)?"
)
"""Runs no detector matches, and every transcript line has: a UUID, an ISO date or time (a run that is one of
these, whole, is no reason to scan)."""
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_+/=.-]*")
"""What continues a token a detector matched only the start of (a JWT's signature, a key cut short)."""


def entropy(value: str) -> float:
    """Shannon entropy of ``value``, in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _random_looking(value: str) -> bool:
    from detect_secrets.filters import heuristic

    if len(value) < MIN_VALUE or entropy(value) < MIN_ENTROPY or _MARK in value:
        return False
    return not (
        heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_sequential_string(value)
        or value.startswith(("http://", "https://", "/", "./", "~"))
    )


def _candidate(text: str) -> bool:
    """Whether ``text`` has a run of token characters a detector might match (see :data:`_TOKEN_RUN`)."""
    return any(not _NO_SECRET_RUN.fullmatch(run.group(0)) for run in _TOKEN_RUN.finditer(text))


def _secret_of(match: re.Match[str], text: str, *, whole: bool = False) -> str:
    """What a detector's match redacts: the group it captures when that is the secret (a URL's password, a
    key after its name), else (or with ``whole``) the whole match, run on to the end of its token."""
    groups = [] if whole else [group for group in match.groups() if group and len(group) >= MIN_VALUE]
    if groups:
        return max(groups, key=len)
    tail = _TOKEN_TAIL.match(text, match.end())
    return text[match.start() : tail.end() if tail else match.end()]


def _indirect(assignment: str) -> bool:
    """``pwd = process.cwd()``, ``token: os.environ.get(…)``: a name given a call's or a lookup's result."""
    from detect_secrets.filters import heuristic

    return bool(heuristic.is_indirect_reference(assignment))


def _slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


class Redactor:
    """Secrets out of text: detection (see the module) and the keyed placeholder."""

    def __init__(self, key: bytes, patterns: Iterable[str] = ()) -> None:
        self._key = key
        self._rules = [
            (regex, _slug(detector.secret_type), getattr(detector, "whole_match", False))
            for detector in _detectors()
            for regex in detector.denylist
        ]
        """(regex, kind, whether the whole match is the secret) of every detector."""
        self._custom: list[re.Pattern[str]] = []
        for pattern in patterns:
            try:
                self._custom.append(re.compile(pattern))
            except re.error as exc:
                raise InvalidArgument(f"bad redaction pattern {pattern!r}: {exc}") from exc

    def placeholder(self, secret: str, kind: str) -> str:
        tag = hmac.new(self._key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:6]
        return f"[redacted: {kind} #{tag}]"

    def may_hold(self, line: str) -> bool:
        """Whether a JSON line may hold a secret in one of its strings (False: none of them needs a look).

        A decoded string's runs of token characters are runs of the line too (escapes start with a backslash,
        which ends a run; ``\\/`` and ``\\"`` are undone first), so a line none of whose runs is a candidate,
        with no secret-named assignment, has no string a detector would match. Your own patterns may match
        anything: with them every line is looked at."""
        if self._custom:
            return True
        text = line.replace('\\"', '"').replace("\\/", "/")
        return _candidate(text) or _ASSIGNMENT_LOWER.search(text.lower()) is not None

    def findings(self, text: str) -> list[tuple[str, str]]:
        """(secret, kind) of each secret in ``text``, longest first."""
        found: dict[str, str] = {}
        if _candidate(text):
            for regex, kind, whole in self._rules:
                for match in regex.finditer(text):
                    secret = _secret_of(match, text, whole=whole)
                    if len(secret) >= MIN_VALUE and _MARK not in secret:
                        found.setdefault(secret, kind)
        if _ASSIGNMENT_LOWER.search(text.lower()):
            for match in _ASSIGNMENT.finditer(text):
                if _random_looking(value := match.group(2)) and not _indirect(match.group(0)):
                    found.setdefault(value, "secret-assignment")
        for pattern in self._custom:
            for match in pattern.finditer(text):
                if (secret := match.group(0)) and _MARK not in secret:
                    found.setdefault(secret, "custom")
        return sorted(found.items(), key=lambda item: len(item[0]), reverse=True)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by its placeholder (the same text when it holds none)."""
        return self.redact(text)[0]

    def redact(self, text: str) -> tuple[str, dict[str, str]]:
        """``text`` redacted, and each secret found → its placeholder (what else must lose it: the copies
        derived from a text stored before redaction, ``scriptorium memory redact``)."""
        replaced: dict[str, str] = {}
        if len(text) < MIN_VALUE:
            return text, replaced
        for _round in range(MAX_ROUNDS):
            found = self.findings(text)
            if not found:
                break
            for secret, kind in found:
                replaced[secret] = self.placeholder(secret, kind)
                text = text.replace(secret, replaced[secret])
        return text, replaced

    def value(self, value: Any) -> Any:
        """Every string inside a JSON value redacted (dict keys too)."""
        return map_strings(value, self.text)


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
    return Redactor(state_key(Path(state)), patterns)


def redactor_for(state: Path, enabled: bool, patterns: Iterable[str] = ()) -> Redactor | None:
    """The redactor for a state folder (one per process and folder), or None when redaction is off."""
    return state_redactor(state, patterns) if enabled else None


def state_redactor(state: Path, patterns: Iterable[str] = ()) -> Redactor:
    """The state folder's redactor, whether or not conversations are redacted as they come in."""
    return _redactor(str(state.resolve()), tuple(patterns))
