"""``python -m tests.helpers.celery_worker APP --hostname NAME@%h --concurrency N``: a worker of the Celery app
``APP`` (a module path, as ``celery -A`` takes it) started the way ``scriptorium worker`` starts its own
(:func:`scriptorium.workers.app.run_worker`), without gossip, mingle or heartbeats, as the cluster tests want.

Not celery's command line: that imports every celery subcommand first, some 0.4 s of CPU for each of the
hundred-odd workers the suite starts. ``tests/cluster/test_two_hosts.py`` and ``test_operations.py`` still
start workers through ``celery -A … worker`` and ``scriptorium worker``, so both stay covered."""

from __future__ import annotations

import argparse
import importlib
import sys

from scriptorium.workers.app import run_worker


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("app")
    parser.add_argument("--hostname", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--loglevel", default="INFO")
    args = parser.parse_args()
    module, _, name = args.app.partition(":")
    app = getattr(importlib.import_module(module), name or "app")
    return run_worker(
        app,
        concurrency=args.concurrency,
        loglevel=args.loglevel,
        hostname=args.hostname,
        without_gossip=True,
        without_mingle=True,
        without_heartbeat=True,
    )


if __name__ == "__main__":
    sys.exit(main())
