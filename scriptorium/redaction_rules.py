"""What :mod:`scriptorium.redaction` looks for: every rule compiled for RE2, so that no input makes a scan slower
than linear in its length.

Python's ``re`` backtracks: a pattern with an unbounded repetition before a literal (detect-secrets' OpenAI
and JWT rules, a secret-named assignment's name) takes time quadratic in a run of its prefix — 100 KB of
``pwd`` took 45 s. RE2 (``google-re2``, the linear-time engine made for untrusted patterns and inputs) runs
every rule in one pass over the text (:class:`re2.Set`), then only the rules that matched are run for their
matches. RE2 has no look-around and no back-reference; the few rules that use them are written here without
(:func:`re2_form`), and the user's own patterns must be RE2 syntax (a bad one is refused).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

from scriptorium.errors import InvalidArgument

MIN_VALUE = 8
"""A secret shorter than this is not taken for one (a secret-named assignment's value, a detector's group)."""
MAX_REPEAT = 1000
"""RE2's largest counted repetition: a longer bound is written open (``{n,}``; the match runs to its token's end
anyway)."""

KEYWORDS = r"(?:api_?key|auth_?key|access_?key|secret|passw(?:or)?d|pwd|token|credentials?|private_?key|client_?key)"
ASSIGNMENT = (
    r"(?i)(" + KEYWORDS + r"[a-z0-9_.-]*[\"']?\s*(?:=|:|:=|=>)\s*)[\"'`]?([^\s\"'`,;]{" + str(MIN_VALUE) + r",})"
)
"""``NAME = value`` (``=``, ``:``, ``:=``, ``=>``; the value optionally quoted) with a secret-sounding name: the
shape of detect-secrets' keyword detector, with ``token`` and ``credentials`` added. Group 1 is the name and
operator (what :func:`scriptorium.redaction._indirect` reads), group 2 the value."""
AWS_SECRET_RUN = r"[A-Za-z0-9/+=]{40,}"
"""A run that may be an AWS secret access key: exactly 40 of ``[A-Za-z0-9/+]``, checked by the caller (RE2 takes
the whole run, so a longer run is one candidate, not many)."""
AWS_SECRET_CONTEXT_PATTERN = rb"(?i:aws|secret)|(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}"
"""What must stand near a bare 40-character run for it to be taken for an AWS secret key: the word, or a key ID."""
PRIVATE_KEY = (
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
    r"(?:[^\"]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[^\"]*)"
)
"""The whole block, not only its first line (detect-secrets' own detector flags the header); to its END line, or
to the end of the string when it has none (a key cut off mid-paste)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One compiled pattern: what it finds is called ``kind``; ``whole``: the whole match is the secret (else
    the longest group of at least :data:`MIN_VALUE` characters, when there is one)."""

    regex: Any
    kind: str
    whole: bool = False
    assignment: bool = False
    aws_secret: bool = False


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a bad pattern is an InvalidArgument, not a line on stderr
    options.max_mem = 64 << 20
    return options


OPTIONS = _options()
AWS_SECRET_CONTEXT = re2.compile(AWS_SECRET_CONTEXT_PATTERN, OPTIONS)


def re2_form(pattern: str) -> str:
    """A detect-secrets pattern in RE2 syntax: ``(?!\\w)`` after a token's class dropped (the match runs on to
    its token's end: :func:`scriptorium.redaction._secret_of`), counted repetitions above RE2's bound opened."""
    pattern = pattern.replace(r"(?!\w)", "")
    return re.sub(r"\{(\d+),(\d+)\}", lambda m: m[0] if int(m[2]) <= MAX_REPEAT else "{" + m[1] + ",}", pattern)


def compile_rule(pattern: str, kind: str, **flags: bool) -> Rule:
    """A rule over UTF-8 bytes: RE2 reports byte offsets without mapping them back to characters (which its
    ``str`` interface does at every match), and a search from an offset reads from there on only."""
    try:
        return Rule(re2.compile(pattern.encode(), OPTIONS), kind, **flags)
    except re2.error as exc:
        raise InvalidArgument(f"bad redaction pattern {pattern!r} (RE2 syntax): {exc}") from exc


def slug(secret_type: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def detector_rules() -> list[Rule]:
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

    plugins: Iterable[Any] = (
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
    )
    rules = [
        compile_rule(re2_form(regex.pattern), slug(plugin.secret_type))
        for plugin in plugins
        for regex in plugin().denylist
    ]
    return [
        *rules,
        compile_rule(r"sk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{80,}", "anthropic-api-key"),
        compile_rule(r"AIza[0-9A-Za-z_-]{35}", "google-api-key"),
        # OpenAI's project, service-account and admin keys, which need not carry ``T3BlbkFJ``.
        compile_rule(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}", "openai-token"),
        compile_rule(PRIVATE_KEY, "private-key", whole=True),
        compile_rule(AWS_SECRET_RUN, "aws-secret-access-key", aws_secret=True),
        compile_rule(ASSIGNMENT, "secret-assignment", assignment=True),
    ]


def rule_set(rules: Iterable[Rule]) -> Any:
    """One RE2 set of every rule's pattern: which of them match anywhere in a text, in one linear pass."""
    matcher = re2.Set.SearchSet(OPTIONS)
    for rule in rules:
        matcher.Add(rule.regex.pattern)  # bytes: the set runs on the same encoded text
    matcher.Compile()
    return matcher
