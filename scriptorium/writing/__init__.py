"""The write pass: selection, batching, archiving ahead, outcomes, organize counters, branches and spawned
sessions, the pass lock and its hand-overs. It calls writers through :mod:`scriptorium.writer_interface`."""
