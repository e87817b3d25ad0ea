"""How the runtimes start this package: ``python -S`` (:data:`scriptorium.runtimes.setup.entries.LAUNCHER`),
so that a hook's fast path pays for no site-packages; whatever needs more loads the site module first."""

from __future__ import annotations

import sys
import threading

_site_lock = threading.Lock()
_site_loaded = False


def with_site() -> None:
    """Load the site module now when the interpreter started without it (``-S``): site-packages' folders and
    ``.pth`` files, before anything from them is imported. Once per process, whichever thread asks first (the
    MCP front answers a hook in one thread while its server may start in another)."""
    global _site_loaded
    with _site_lock:
        if sys.flags.no_site and not _site_loaded:
            import site

            site.main()
            _site_loaded = True
