"""The ``scriptorium`` console script run in this process: what a subprocess would see and give back.

A process per call costs a Python start and the imports (about a second); the logic under test is the same
code. :func:`console` calls the console script's entry (:func:`scriptorium.cli.entry.main`) with
``sys.argv``, stdin, stdout and stderr, the environment, the working folder and the umask of a process of its
own, and puts each back afterwards, structlog's configuration too (the command configures it on the stderr
it was given). A test of the process boundary itself (the installed script, exit codes the shell sees,
``python -S``, a daemon) runs the real process instead.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import structlog


@contextlib.contextmanager
def environment(changes: Mapping[str, str], unset: Iterable[str] = ()) -> Iterator[None]:
    """``os.environ`` with ``changes`` and without ``unset`` for the block, as it was after."""
    saved = dict(os.environ)
    os.environ.update(changes)
    for name in unset:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def umask_kept() -> Iterator[None]:
    """The process's umask put back after the block (the commands set their own)."""
    umask = os.umask(0o022)
    os.umask(umask)
    try:
        yield
    finally:
        os.umask(umask)


def console(
    args: list[str],
    *,
    env: Mapping[str, str] | None = None,
    unset: Iterable[str] = (),
    stdin: str | bytes | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``scriptorium ARGS`` in this process, ``env`` added to the environment and ``unset`` taken out of it: its
    exit code, stdout and stderr (an uncaught exception is exit 1 with its traceback on stderr, as the
    interpreter would give it)."""
    from scriptorium.cli.entry import main

    data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    fake_in = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    fake_out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    fake_err = io.TextIOWrapper(err_bytes, encoding="utf-8", write_through=True)
    logging_config = structlog.get_config()
    saved = sys.stdin, sys.stdout, sys.stderr, sys.argv
    code: int
    with environment(env or {}, unset), umask_kept(), contextlib.chdir(cwd or Path.cwd()):
        sys.stdin, sys.stdout, sys.stderr, sys.argv = fake_in, fake_out, fake_err, ["scriptorium", *args]
        try:
            code = main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=fake_err)
        except Exception:
            traceback.print_exc(file=fake_err)
            code = 1
        finally:
            fake_out.flush()
            fake_err.flush()
            sys.stdin, sys.stdout, sys.stderr, sys.argv = saved
            structlog.configure(**logging_config)
    return subprocess.CompletedProcess(
        ["scriptorium", *args], code, out_bytes.getvalue().decode(), err_bytes.getvalue().decode()
    )
