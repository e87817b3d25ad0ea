"""A real local HTTP server that speaks the OpenAI chat-completions API with scripted replies.

Each script step is a function of the request body returning either a reply
dict (``{"tool_calls": [(name, args), ...]}`` or ``{"content": "..."}``), an
``("http", status)`` error, or ``("sleep", seconds)`` before answering with the
next step. Every request body is recorded.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = Callable[[dict[str, Any]], Any]


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[Step] = []
        self.default: Step | None = None
        """Answers every request once the script is used up (None: HTTP 500)."""
        self.organizer_commits = False
        """Answer organizer conversations with commit_edits, outside the script."""
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _next(self, body: dict[str, Any]) -> Any:
        with self._lock:
            self.requests.append(body)
            system = str(body.get("messages", [{}])[0].get("content", ""))
            if self.organizer_commits and system.startswith("You organize"):
                return {"tool_calls": [("commit_edits", {})]}
            if not self.script:
                if self.default is None:
                    return ("http", 500)
                step = self.default
            else:
                step = self.script.pop(0)
        return step(body)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                reply = fake._next(body)
                while isinstance(reply, tuple) and reply[0] == "sleep":
                    time.sleep(reply[1])
                    reply = reply[2](body) if len(reply) > 2 else {"tool_calls": [("commit_edits", {})]}
                if isinstance(reply, tuple) and reply[0] == "http":
                    payload = json.dumps({"error": {"message": "scripted failure", "type": "server_error"}}).encode()
                    self.send_response(reply[1])
                else:
                    payload = json.dumps(completion(body, reply)).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)

        return Handler


_counter = iter(range(1, 1_000_000))


def completion(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    calls = reply.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{next(_counter)}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for n, a in calls
        ]
    return {
        "id": f"chatcmpl-{next(_counter)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "unknown"),
        "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def tools(*calls: tuple[str, dict[str, Any]]) -> Step:
    return lambda body: {"tool_calls": list(calls)}


def source_refs(body: dict[str, Any]) -> list[str]:
    """The ``[provider/thread/message]`` refs the writer put in its user message."""
    import re

    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return re.findall(r"^\[([^\]\s]+/[^\]\s]+/[^\]\s]+)\]", user, re.M)


def serve() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    try:
        yield fake
    finally:
        fake.close()
