"""The floors ``benchmarks/runtimes.py`` measures Scriptorium beside: servers and homes that cost a runtime
what its own hook and MCP machinery costs, and nothing of ours."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from tests.requirements import cli
from tests.runtimes.real import Machine

ROOT = Path(__file__).resolve().parents[1]

MINIMAL_SERVER = textwrap.dedent(
    """
    import anyio
    import mcp.types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])

    server = Server("minimal", on_list_tools=list_tools)

    async def main():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    """
)
SERVER_FLOOR = textwrap.dedent(
    """
    import sys
    import mcp.types as types
    import uvicorn
    from mcp.server import Server
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    TOOLS = ("memory_status", "memory_get", "memory_search", "memory_update")

    async def list_tools(ctx, params):
        tools = [types.Tool(name=name, input_schema={"type": "object"}) for name in TOOLS]
        return types.ListToolsResult(tools=tools)

    async def hook(request):
        await request.body()
        return JSONResponse({})

    app = Server("floor", on_list_tools=list_tools).streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True
    )
    app.router.routes.append(Route("/api/hooks", hook, methods=["POST"]))
    app.router.routes.append(Route("/openapi.json", lambda request: JSONResponse({}), methods=["GET"]))
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
    """
)
"""The server floor: what answers ``/api/hooks`` with nothing at once and lists the four tools at ``/mcp`` (the
same low-level SDK server, stateless, on the same ASGI server as ``scriptorium serve``)."""


FLOOR_SERVER = (
    "import sys; sys.path.insert(0, sys.argv[1]); from scriptorium.runtimes import hook_client; "
    "hook_client.relay = lambda argv, raw: ''; from scriptorium.runtimes.mcp.front import serve; serve(int, [])"
)
"""The bare front: it answers the opening and the lists as ours does, and every ``hook`` call with nothing at
once (no daemon, no memory); a call of any other tool ends it (its server is ``int``)."""


def make_floor(user: Machine) -> None:
    """Turn a home set up at user scope into the floor: every command hook ``true``, and the MCP server the
    bare front, which answers every ``mcp_tool`` hook with nothing."""
    settings_file = user.home / ".claude" / "settings.json"
    settings = json.loads(settings_file.read_text())
    for groups in settings["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                if hook["type"] == "command":
                    hook["command"] = "true"
    settings_file.write_text(json.dumps(settings))
    servers_file = user.home / ".claude.json"
    servers = json.loads(servers_file.read_text())
    servers["mcpServers"]["scriptorium"] = {
        "type": "stdio",
        "command": sys.executable,
        "args": ["-S", "-c", FLOOR_SERVER, str(ROOT)],
        "alwaysLoad": True,
    }
    servers_file.write_text(json.dumps(servers))


def make_codex_floor(user: Machine) -> None:
    """Turn a home set up for Codex into its floor: every command hook ``true`` and every ``mcp_tool`` hook
    answered with nothing by the bare front, the MCP server (trusted anew, as setup trusts ours)."""
    import tomlkit

    from scriptorium.runtimes.codex import add_trust, hook_hashes, remove_trust, trust_keys

    hooks_file = user.home / ".codex" / "hooks.json"
    keys = trust_keys(hooks_file)
    hooks = json.loads(hooks_file.read_text())
    for groups in hooks["hooks"].values():
        for group in groups:
            for hook in group["hooks"]:
                if hook["type"] == "command":  # `true` ignores its arguments
                    hook["command"] = f"true scriptorium hook --state {user.state}"
    hooks_file.write_text(json.dumps(hooks))
    config_file = user.home / ".codex" / "config.toml"
    config = tomlkit.parse(config_file.read_text())
    server = config["mcp_servers"]["scriptorium"]
    server["command"], server["args"] = sys.executable, ["-S", "-c", FLOOR_SERVER, str(ROOT)]
    text = remove_trust(tomlkit.dumps(config), keys)
    config_file.write_text(add_trust(text, hook_hashes(str(cli("codex")), user.project, user.env)))
