"""``python -m scriptorium``: the ``scriptorium`` command, for an installation without its console script."""

from scriptorium.cli.entry import main

raise SystemExit(main())
