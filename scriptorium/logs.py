"""structlog, configured once per entry point (the CLI, the hook command, the hook daemon, the watcher):
context variables first, JSON off a terminal, the console renderer on one, to stderr.

Before that, and in a process no entry point configured (a worker, a program using the package), structlog
would print to stdout — the channel of the hook and MCP stdio protocols. :func:`stderr_by_default` (run when
the package is imported) points it at stderr the moment structlog itself is imported, unless something
configured it already. This module imports only the standard library until then: the hook command's fast
path runs without site-packages.

Modules log through :func:`get_logger`, which loads structlog at the first event logged at the configured
level: a CLI command that logs nothing (most, at the default WARNING) never loads it.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing costs the hook's fast path more than all the rest
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any


_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "exception": 40, "critical": 50}
"""structlog's level methods and their standard numbers (what ``make_filtering_bound_logger`` filters on)."""
_threshold: int | None = None
"""The level :func:`configure_logging` set, once it has; until then every event reaches structlog."""


def configure_logging(level: str) -> None:
    """Log at ``level`` (a standard level name) and above: now if structlog is loaded, else when it is first
    imported — a command that logs nothing at that level never loads it (a tenth of a second of a CLI run)."""
    import logging

    global _threshold
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"not a log level: {level!r}")
    _threshold = number
    if "structlog" in sys.modules:
        _configure(sys.modules["structlog"], number)
    else:
        stderr_by_default()


def get_logger(name: str) -> Any:
    """A structlog logger for ``name`` that loads structlog at its first event at a level that is logged
    (structlog's own ``get_logger`` returns ``Any`` too)."""
    return _LazyLogger(name)


def _noop(*args: object, **kwargs: object) -> None:
    return None


class _LazyLogger:
    __slots__ = ("_name", "_real")

    def __init__(self, name: str) -> None:
        self._name = name
        self._real: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._real is None:
            if _threshold is not None and _LEVELS.get(attr, _threshold) < _threshold:
                return _noop  # what the configured filtering logger would drop, without loading structlog
            import structlog

            self._real = structlog.get_logger(self._name)
        return getattr(self._real, attr)


def _configure(structlog: ModuleType, threshold: int) -> None:
    renderer = structlog.dev.ConsoleRenderer() if sys.stderr.isatty() else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def _to_stderr(structlog: ModuleType) -> None:
    if _threshold is not None:
        _configure(structlog, _threshold)
    elif not structlog.is_configured():
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))


class _StderrWhenImported:
    """A meta-path finder that finds nothing itself: it wraps structlog's own loader so that, once structlog
    has loaded, :func:`_to_stderr` runs."""

    _finding = False

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name != "structlog" or self._finding:
            return None
        from importlib.util import find_spec

        self._finding = True  # the finders after this one find structlog's spec
        try:
            spec = find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            _to_stderr(module)

        setattr(spec.loader, "exec_module", exec_module)  # noqa: B010  (mypy: no assigning to a method)
        return spec


def stderr_by_default() -> None:
    """structlog logs to stderr unless configured otherwise: now if it is loaded, else when it is imported."""
    if "structlog" in sys.modules:
        _to_stderr(sys.modules["structlog"])
    elif not any(isinstance(finder, _StderrWhenImported) for finder in sys.meta_path):
        sys.meta_path.insert(0, _StderrWhenImported())
