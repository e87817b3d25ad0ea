"""``scriptorium setup``: the settings entries it writes, reversibly, and the extensions it installs
(:mod:`scriptorium.runtimes`)."""
