"""Tunables, each with the reason it has the value it has.

Only composition roots (the CLI, workers, the web app) read settings; they pass
values down. Everything here is a default, never read from the environment.
"""

from __future__ import annotations

WRITER_RUN_ENV = "SCRIPTORIUM_WRITER_RUN"
"""Set to ``1`` in the environment of an agent CLI running as the writer: Scriptorium's own hooks and MCP
server stand aside inside it, so the writer's session never feeds memory or edits it around the pass."""

HOOK_TOOL = "hook"
"""The MCP tool a runtime's ``mcp_tool`` hooks call (:mod:`scriptorium.runtimes.mcp.front`): its arguments are the
hook's payload, its text the hook's output (what ``scriptorium hook`` would print)."""

MAX_HOOK_PAYLOAD = 1 << 20
"""Bytes of a hook payload read from stdin: a runtime's payload is a few kilobytes; more is not one."""
PRIVATE_UMASK = 0o077
"""What every entry point sets first: whatever it creates is its user's alone."""

DEFAULT_HOOK_DAEMON_IDLE_S = 900.0
"""The hook daemon exits after this long without a hook: a quiet quarter hour ends a working session."""

DEFAULT_CORE_TOKEN_BUDGET = 2000
"""Tokens of ``topics/core.md`` rendered into the resident ``core.md`` (a rendering budget, never a gate)."""

DEFAULT_RECENT_LIMIT = 50
"""Newest records, in creation order, listed by the Recent view (``memory.recent.limit``)."""

DEFAULT_LOCK_TIMEOUT_S = 1.0
"""Seconds to wait for the workspace lock before reporting LOCK_HELD: retrying next turn beats delaying the user."""

DEFAULT_REPACK_LOOSE_OBJECTS = 2000
"""Loose git objects (git's gc.auto estimate) that start a background repack: a commit here writes large trees."""

DEFAULT_WRITE_QUOTA_BYTES = 16 * 1024 * 1024
"""Bytes a write token's requester may commit per day (UTC): thousands of records, far from a disk's worth a year."""

DEFAULT_RUNTIME_QUOTA_BYTES = 64 * 1024 * 1024
"""Bytes of session nodes a runtime token's requester may post per day (UTC): a long day of agent transcripts."""

DEFAULT_BATCH_TOKENS = 16_000
"""A write pass cuts its batch at this many tokens: one model call cannot hold a day of conversation."""

DEFAULT_TRIGGER_TOKENS = 8_000
"""Below this many pending tokens an unforced write does nothing."""

DEFAULT_WRITER_DAILY_RUNS = 100
"""Runs a writer that costs money (the LLM writer, an agent CLI) may make per UTC day and workspace, its
organizer's and repair runs included. A heavy day of sessions takes a few dozen (a batch is 16k tokens of
conversation, an organize follows every five); an import of a year of transcripts would take thousands, and
this is what bounds it: the rest waits for the next day, or for a raised budget. Every costly writer reports
its runs, so this cap always holds."""

DEFAULT_WRITER_DAILY_TOKENS = 0
"""Tokens (0: no cap) a costly writer's model may report per UTC day and workspace. Off by default: the
backends count unlike things (Claude Code reports every cached read of the context, each turn again; an
OpenAI-compatible endpoint the prompt and completion of each step; a local model costs nothing per token),
so one number would stop an agent writer by mid-morning or never bind an LLM writer. Runs bound the spend;
set this to what your plan pays for."""

DEFAULT_ORGANIZE_BATCHES = 5
"""Organize after this many batches since the last organize."""

DEFAULT_ORGANIZE_TOKENS = 40_000
"""Organize after this many written tokens since the last organize."""

DEFAULT_ORGANIZE_INTERVAL_S = 24 * 3600
"""Organize again one day after the last global organize."""

DEFAULT_SCAN_INTERVAL_S = 5 * 60
"""The idle sweep runs every five minutes."""

DEFAULT_IDLE_AFTER_S = 30 * 60
"""A session idle this long gets a forced write."""

TIMELINE_SNIPPET_CHARS = 160
"""Characters of a record's text shown in Timeline and Recent entries (derived views only)."""

GIT_AUTHOR_NAME = "Scriptorium"
"""Author and committer name of every memory commit."""

GIT_AUTHOR_EMAIL = "scriptorium@localhost"
"""Author and committer email of every memory commit."""

DEFAULT_MAX_CONNECTIONS = 512
"""Connections `scriptorium serve` holds at once (at most half its file-descriptor limit); more are refused."""

DEFAULT_MAX_CLIENT_CONNECTIONS = 128
"""Connections one client address holds at once: a machine's runtimes share it; a slowloris gets no more."""

DEFAULT_BACKLOG = 128
"""Connections waiting to be accepted, and accepted at one go: a burst cannot take every descriptor first."""

DEFAULT_HEADER_TIMEOUT_S = 10.0
"""Seconds a connection has to send a whole request head; a head trickled past it is answered 408, closed."""

DEFAULT_BODY_TIMEOUT_S = 30.0
"""Seconds a request has to send its whole body (8 MiB at most) once it is read; past it, 408."""

DEFAULT_KEEP_ALIVE_S = 5
"""Seconds an idle kept-alive connection stays open between requests (uvicorn's own default)."""

DEFAULT_SIGNIN_ATTEMPTS = 5
"""Failed sign-ins to the page one client may make in a row before it must wait (429)."""

DEFAULT_SIGNIN_WINDOW_S = 60.0
"""Seconds over which a client's failed sign-ins come back, evenly (five a minute)."""
