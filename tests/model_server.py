"""A scripted model server on 127.0.0.1 for the released runtime CLIs.

It speaks the two wire formats the runtimes use: Anthropic Messages (``POST /v1/messages``, streamed
as server-sent events or not; Claude Code, pi's Anthropic provider) and OpenAI Responses (``POST
/v1/responses``, streamed; Codex). Every request is logged with its path and body, so a test asserts
what reached the model: the core, the recall block, the tool list of the *first* request.

What the server answers is a script: a list of :class:`Reply` steps, each taken by the next
conversation request (a request whose tools or system prompt show it is the runtime's own side
request, a title or a quota check, takes the ``side`` reply instead and never uses a step). When the
script is used up, every request gets ``default``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    name: str
    """The tool's name as the runtime listed it; a suffix is enough (``memory_search``)."""
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    delay_s: float = 0.0
    """Wait this long before answering (a kill test's "mid-turn")."""


@dataclass
class Logged:
    path: str
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            name = tool.get("name") or (tool.get("function") or {}).get("name")
            if name:
                names.append(str(name))
        return names

    @property
    def text(self) -> str:
        """Everything the request carries as words: system prompt, instructions, messages."""
        return json.dumps(
            {k: self.body.get(k) for k in ("system", "instructions", "messages", "input")}, ensure_ascii=False
        )


Step = Reply | Callable[[Logged], Reply]


class ModelServer:
    def __init__(self, *, side: Callable[[Logged], bool] | None = None) -> None:
        self.script: list[Step] = []
        self.default: Step = Reply(text="Done.")
        self.side = side or (lambda request: False)
        self.input_tokens = 10
        """The input tokens each answer reports (a large count makes Codex and OpenClaw compact)."""
        self.requests: list[Logged] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def conversation(self) -> list[Logged]:
        """The logged model requests that were not side requests."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith(("/messages", "/responses")) and not self.side(r)]

    def _reply(self, logged: Logged) -> Reply:
        with self._lock:
            self.requests.append(logged)
            if self.side(logged) or not logged.path.endswith(("/messages", "/responses")):
                return Reply(text="Side reply.")
            step = self.script.pop(0) if self.script else self.default
        return step(logged) if callable(step) else step

    def _tool_name(self, logged: Logged, wanted: str) -> str:
        return self._find_tool(logged, wanted)[1]

    def _find_tool(self, logged: Logged, wanted: str) -> tuple[str | None, str]:
        """The namespace (Codex lists an MCP server's tools in one) and name of the listed tool ``wanted``
        names or ends with."""
        for tool in logged.body.get("tools") or []:
            inner = tool.get("tools") if tool.get("type") == "namespace" else None
            for candidate in inner or [tool]:
                name = str(candidate.get("name") or (candidate.get("function") or {}).get("name") or "")
                if name and (name == wanted or name.endswith(wanted)):
                    return (tool["name"] if inner else None), name
        return None, wanted

    # Anthropic Messages ------------------------------------------------------------------------------

    def _anthropic_events(self, logged: Logged, reply: Reply) -> Iterator[tuple[str, dict[str, Any]]]:
        n = next(self._ids)
        model = logged.body.get("model", "scripted")
        usage = {
            "input_tokens": self.input_tokens,
            "output_tokens": 1,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        yield (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
        index = 0
        if reply.text or not reply.tool_calls:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": reply.text or "Done."},
                },
            )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
            index += 1
        for k, call in enumerate(reply.tool_calls):
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": f"toolu_{n}_{k}",
                        "name": self._tool_name(logged, call.name),
                        "input": {},
                    },
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(call.arguments)},
                },
            )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
            index += 1
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        yield "message_stop", {"type": "message_stop"}

    def _anthropic_message(self, logged: Logged, reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text or not reply.tool_calls:
            content.append({"type": "text", "text": reply.text or "Done."})
        n = next(self._ids)
        for k, call in enumerate(reply.tool_calls):
            name = self._tool_name(logged, call.name)
            content.append({"type": "tool_use", "id": f"toolu_{n}_{k}", "name": name, "input": call.arguments})
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": logged.body.get("model", "scripted"),
            "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": 5},
        }

    # OpenAI Responses --------------------------------------------------------------------------------

    def _responses_events(self, logged: Logged, reply: Reply) -> Iterator[tuple[str, dict[str, Any]]]:
        n = next(self._ids)
        response = {"id": f"resp_{n}", "object": "response", "status": "in_progress", "output": []}
        yield "response.created", {"type": "response.created", "response": response}
        items: list[dict[str, Any]] = []
        if reply.text or not reply.tool_calls:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text or "Done.", "annotations": []}],
                }
            )
        for k, call in enumerate(reply.tool_calls):
            namespace, name = self._find_tool(logged, call.name)
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{n}_{k}",
                    "call_id": f"call_{n}_{k}",
                    "name": name,
                    **({"namespace": namespace} if namespace else {}),
                    "arguments": json.dumps(call.arguments),
                    "status": "completed",
                }
            )
        for index, item in enumerate(items):
            for event in ("response.output_item.added", "response.output_item.done"):
                yield event, {"type": event, "output_index": index, "item": item}
        usage = {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input_tokens + 5,
        }
        done = {**response, "status": "completed", "output": items, "usage": usage}
        yield "response.completed", {"type": "response.completed", "response": done}

    # HTTP --------------------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send_json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                with model._lock:
                    model.requests.append(Logged(self.path, {}))
                if self.path.rstrip("/").endswith("/models"):
                    self._send_json(200, {"data": [], "models": []})
                else:
                    self._send_json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                path = self.path.split("?", 1)[0].rstrip("/")
                logged = Logged(path, body if isinstance(body, dict) else {"_body": body})
                if path.endswith("/count_tokens"):
                    with model._lock:
                        model.requests.append(logged)
                    self._send_json(200, {"input_tokens": 100})
                    return
                if not path.endswith(("/messages", "/responses")):
                    with model._lock:
                        model.requests.append(logged)
                    self._send_json(200, {})
                    return
                reply = model._reply(logged)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if path.endswith("/responses"):
                    self._stream(model._responses_events(logged, reply))
                elif logged.body.get("stream"):
                    self._stream(model._anthropic_events(logged, reply))
                else:
                    self._send_json(200, model._anthropic_message(logged, reply))

            def _stream(self, events: Iterator[tuple[str, dict[str, Any]]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    for name, data in events:
                        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                self.close_connection = True

        return Handler


def main() -> None:
    """Run the server alone, answering every request with ``--text``, and print each request's path."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--text", default="Done.")
    parser.add_argument("--log", help="append each request's JSON here")
    parser.add_argument("--input-tokens", type=int, default=10, help="the input tokens each answer reports")
    args = parser.parse_args()
    server = ModelServer()
    server.default = Reply(text=args.text)
    server.input_tokens = args.input_tokens
    print(server.url, flush=True)
    seen = 0
    try:
        while True:
            time.sleep(0.2)
            for logged in server.requests[seen:]:
                print(logged.path, logged.tool_names[:50], flush=True)
                if args.log:
                    with open(args.log, "a") as f:
                        f.write(json.dumps({"path": logged.path, "body": logged.body}) + "\n")
            seen = len(server.requests)
    except KeyboardInterrupt:
        server.close()


def tool_results(request: Logged) -> list[dict[str, Any]]:
    """The memory tools' answers a request carries back to the model (each a JSON object)."""
    found = []
    for message in request.body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            text = inner if isinstance(inner, str) else "".join(b.get("text", "") for b in inner or [])
            found.append(json.loads(text))
    return found


if __name__ == "__main__":
    main()
