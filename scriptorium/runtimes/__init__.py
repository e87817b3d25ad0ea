"""The runtime edge: what agent runtimes run or load to reach memory.

:mod:`.hooks` answers their hook payloads (:mod:`.context`: the answer's shape, cap, project and budget) and
:mod:`.daemon` with :mod:`.hook_client` keep the answers fast; :mod:`.mcp` serves the
model tools of :mod:`.tools`; :mod:`.setup` wires both into a runtime's own settings files. What is specific
to one runtime — where it keeps transcripts, which files its settings live in — is its own module
(:mod:`.claude_code`, :mod:`.codex`, :mod:`.pi`), listed once in :mod:`.catalog`. Their transcript
formats are read by the importers in :mod:`scriptorium.producers`.
"""
