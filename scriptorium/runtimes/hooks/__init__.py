"""The hook command, the hook daemon, the watcher and what their answers give a session
(:mod:`scriptorium.runtimes`).

Nothing is imported here: :mod:`.client` runs on the hook's fast path, before site-packages."""
