"""The MCP server, its front and the model tools (:mod:`scriptorium.runtimes`).

Nothing is imported here: :mod:`.front` answers a runtime's handshake before anything else loads."""
