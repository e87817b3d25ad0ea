"""The LLM writer and organizer: any OpenAI-compatible chat endpoint with tool calling.

The model edits the *staged* ``topics/`` only, through file tools (list, read,
write, edit, move, delete), then calls ``commit_edits``; the runtime then
normalizes, validates and installs. New citations are written
``[short keyword](provider/thread/message)``. Configuration is read through a
callable on every pass, so a new model or endpoint takes effect on the next
pass without a restart. Client errors are translated here, once. What the model
costs is counted in the writer's :class:`~scriptorium.writer_interface.Usage`:
one run per conversation the model answered, and the tokens each reply reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import openai

from scriptorium.errors import ReasonCode, ScriptoriumError, WriterFailed, WriterUnavailable
from scriptorium.logs import get_logger
from scriptorium.writer_interface import Batch, MayCombine, Repair, Restated, TopicFiles, Usage
from scriptorium.writers.prompting import batch_prompt, prompt

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """Where and how to reach the model (``memory.writer.*``)."""

    model: str
    base_url: str
    api_key: str = "not-needed"
    timeout_s: float = 120.0
    max_steps: int = 40


ConfigSource = Callable[[], LLMConfig]


TOOLS_NOTE = (
    "\nTools: list_topics, read_topic, write_topic, edit_topic, move_topic,\n"
    "delete_topic, and commit_edits when you are done.\n"
)
"""What a tool-calling model is told about its tools (the prompt files say what to write, not how)."""


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string", "description": text} for key, text in properties.items()},
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


TOOLS = [
    _tool("list_topics", "List the topic files (paths under topics/)."),
    _tool("read_topic", "Read one topic file.", path="topic path, e.g. topics/people/alice.md"),
    _tool("write_topic", "Create or replace a topic file.", path="topic path", content="the whole Markdown file"),
    _tool(
        "edit_topic",
        "Replace one exact, unique piece of text in a topic file.",
        path="topic path",
        old="text to replace (must occur exactly once)",
        new="replacement text",
    ),
    _tool("move_topic", "Rename a topic file.", src="current path", dst="new path"),
    _tool("delete_topic", "Delete a topic file (its records must be kept elsewhere).", path="topic path"),
    _tool("commit_edits", "Finish: hand the staged topics to the runtime for validation and install."),
]


def _client(config: LLMConfig) -> openai.OpenAI:
    return openai.OpenAI(base_url=config.base_url, api_key=config.api_key, timeout=config.timeout_s, max_retries=0)


def _translate(exc: openai.OpenAIError) -> ScriptoriumError:
    """Map client errors to reason codes (retryable unless retrying the same request cannot help)."""
    if isinstance(exc, openai.APITimeoutError):
        return WriterUnavailable(f"the model did not answer in time: {exc}", reason=ReasonCode.WRITER_TIMEOUT)
    if isinstance(exc, openai.APIConnectionError):
        return WriterUnavailable(f"the model endpoint is unreachable: {exc}", reason=ReasonCode.MODEL_UNREACHABLE)
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError | openai.NotFoundError):
        return WriterUnavailable(f"the writer cannot start: {exc}", reason=ReasonCode.WRITER_START_FAILED)
    if isinstance(exc, openai.RateLimitError | openai.InternalServerError):
        return WriterUnavailable(f"the model is unavailable: {exc}", reason=ReasonCode.MODEL_UNREACHABLE)
    return WriterFailed(f"the model request failed: {exc}")


class _Session:
    """One tool-calling conversation over the staged topics."""

    def __init__(self, config: LLMConfig, system: str, topics: TopicFiles, usage: Usage) -> None:
        self.config = config
        self.topics = topics
        self.usage = usage
        self.client = _client(config)
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}]

    def run(self, user: str) -> None:
        self.messages.append({"role": "user", "content": user})
        for step in range(self.config.max_steps):
            try:
                reply = self.client.chat.completions.create(
                    model=self.config.model,
                    messages=self.messages,  # type: ignore[arg-type]
                    tools=TOOLS,  # type: ignore[arg-type]
                )
            except openai.OpenAIError as exc:
                raise _translate(exc) from exc
            self._count(reply, first=step == 0)
            if not reply.choices:
                raise WriterFailed("the model returned no choices")
            message = reply.choices[0].message
            calls = message.tool_calls or []
            self.messages.append(message.model_dump(exclude_none=True))
            if not calls:
                raise WriterFailed("the model stopped without calling commit_edits")
            for call in calls:
                name = call.function.name  # type: ignore[union-attr]
                if name == "commit_edits":
                    return
                result = self._call(name, call.function.arguments)  # type: ignore[union-attr]
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise WriterFailed(f"no commit_edits after {self.config.max_steps} steps")

    def _count(self, reply: Any, first: bool) -> None:
        """A run once the model answers (an endpoint out of reach costs nothing), and the tokens it reports."""
        if first:
            self.usage.runs += 1
        total = getattr(getattr(reply, "usage", None), "total_tokens", None)
        if isinstance(total, int) and total > 0:
            self.usage.tokens += total

    def _call(self, name: str, raw: str) -> str:
        try:
            args = json.loads(raw or "{}")
            if not isinstance(args, dict):
                raise ValueError("arguments must be an object")
            return self._dispatch(name, args)
        except (ValueError, KeyError, TypeError) as exc:
            return f"error: bad arguments for {name}: {exc}"
        except ScriptoriumError as exc:
            return f"error {exc.reason}: {exc.message}"

    def _dispatch(self, name: str, args: dict[str, Any]) -> str:
        topics = self.topics
        if name == "list_topics":
            return "\n".join(topics.list_topics()) or "(no topics yet)"
        if name == "read_topic":
            return topics.read(str(args["path"]))
        if name == "write_topic":
            topics.write(str(args["path"]), str(args["content"]))
            return "ok"
        if name == "edit_topic":
            text = topics.read(str(args["path"]))
            old = str(args["old"])
            if text.count(old) != 1:
                return f"error: the text to replace occurs {text.count(old)} times; it must occur exactly once"
            topics.write(str(args["path"]), text.replace(old, str(args["new"])))
            return "ok"
        if name == "move_topic":
            topics.move(str(args["src"]), str(args["dst"]))
            return "ok"
        if name == "delete_topic":
            topics.delete(str(args["path"]))
            return "ok"
        return f"error: unknown tool {name}"


class LLMWriter:
    """Writes a batch into topics with a tool-calling model."""

    name = "llm"
    wants_branches = True
    """Its batches carry their :class:`~scriptorium.writer_interface.BranchContext` (the pass reads the graph)."""

    def __init__(self, config: ConfigSource, usage: Usage | None = None) -> None:
        self.config = config
        self.usage = usage if usage is not None else Usage()
        """Its runs and tokens (a model costs money): the pass charges them to the day's budget."""

    def write(self, batch: Batch, topics: TopicFiles, repair: Repair | None = None) -> None:
        config = self.config()  # read on every pass: a model change needs no restart
        user = batch_prompt(batch, topics.list_topics(), repair)
        log.info("llm.write", model=config.model, messages=len(batch.messages), repair=repair is not None)
        _Session(config, prompt("writer") + TOOLS_NOTE, topics, self.usage).run(user)


class LLMOrganizer:
    """Reorganizes topics with a tool-calling model; it never sees the source archive."""

    name = "llm"

    def __init__(self, config: ConfigSource, usage: Usage | None = None) -> None:
        self.config = config
        self.usage = usage if usage is not None else Usage()

    def organize(
        self,
        topics: TopicFiles,
        may_combine: MayCombine | None = None,
        changed: Collection[str] | None = None,
        restated: Restated | None = None,
    ) -> None:
        """A model cannot be handed the rule as code: what it produces is checked after (``BRANCHES_MERGED``)."""
        config = self.config()
        listing = "\n".join(topics.list_topics()) or "(no topics yet)"
        _Session(config, prompt("organizer") + TOOLS_NOTE, topics, self.usage).run(
            f"Topic files now:\n{listing}\n\nOrganize them."
        )
