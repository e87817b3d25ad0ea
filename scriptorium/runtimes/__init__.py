"""The runtime edge: what agent runtimes run or load to reach memory.

What each runtime is comes first, one module per runtime — where it keeps transcripts, which files its
settings live in, the release it needs, what setup does that is its own (:mod:`.claude_code`, :mod:`.codex`,
:mod:`.pi`, :mod:`.openclaw`; the Claude Code plugin, :mod:`.plugin`) — declared with :mod:`.base` and listed
once in :mod:`.catalog`; :mod:`.openings` says which prompt opens a session's context. Then three parts by job:

* :mod:`.hooks`: the hook command (:mod:`.hooks.command`) answers the runtimes' hook payloads
  (:mod:`.hooks.answer`: the answer's shape, cap, project and budget; :mod:`.hooks.context`: what memory gives
  a session), the hook daemon (:mod:`.hooks.daemon`) with its client (:mod:`.hooks.client`) keeps the answers
  fast, writing hooks run off the critical path (:mod:`.hooks.writes`, :mod:`.hooks.inbox`), and the watcher
  (:mod:`.hooks.watcher`) writes the sessions whose runtime never said they ended;
* :mod:`.mcp`: the MCP server (:mod:`.mcp.server`) and its front (:mod:`.mcp.front`), serving the model tools
  of :mod:`.mcp.tools`;
* :mod:`.setup`: ``scriptorium setup`` (:mod:`.setup.command`) wires both into a runtime's own settings files,
  reversibly (:mod:`.setup.reversible`), and installs the TypeScript extensions (:mod:`.setup.extensions`).

The transcript formats are read by the importers in :mod:`scriptorium.producers`.
"""
