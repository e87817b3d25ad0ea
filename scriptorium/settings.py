"""Settings for composition roots (CLI, workers, web): the only place that reads the environment.

An edge module: the domain core never imports it; entry points build core
configuration objects from it and pass them down.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from scriptorium.defaults import (
    DEFAULT_BATCH_TOKENS,
    DEFAULT_CORE_TOKEN_BUDGET,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_RECENT_LIMIT,
    DEFAULT_TRIGGER_TOKENS,
)
from scriptorium.errors import ReasonCode, WriterUnavailable
from scriptorium.workspace import WorkspaceConfig
from scriptorium.writing.service import WriteSettings

if TYPE_CHECKING:
    from scriptorium.writers.llm import LLMConfig


class Settings(BaseSettings):
    """``SCRIPTORIUM_*`` environment variables (e.g. ``SCRIPTORIUM_STATE``, ``SCRIPTORIUM_RECENT_LIMIT``)."""

    model_config = SettingsConfigDict(env_prefix="SCRIPTORIUM_", extra="ignore")

    state: Path = Field(default=Path(".scriptorium"), description="State folder; memory lives at <state>/memory.")
    recent_limit: int = Field(default=DEFAULT_RECENT_LIMIT, ge=1, description="memory.recent.limit")
    core_budget: int = Field(default=DEFAULT_CORE_TOKEN_BUDGET, ge=1, description="Resident block token budget.")
    lock_timeout: float = Field(default=DEFAULT_LOCK_TIMEOUT_S, gt=0, description="Workspace lock budget (s).")
    log_level: str = Field(default="WARNING", description="structlog level for CLI runs.")
    sessions_url: str | None = Field(
        default=None, description="Session store URL; default sqlite:///<state>/sessions/sessions.db."
    )
    writer: Literal["verbatim", "llm"] = Field(default="verbatim", description="memory.writer.backend")
    writer_model: str = Field(default="", description="memory.writer.model (LLM writer)")
    writer_base_url: str = Field(default="http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint")
    writer_api_key: str = Field(default="not-needed", description="API key for the writer endpoint")
    writer_timeout_s: float = Field(default=120.0, gt=0, description="Per-request timeout of the LLM writer")
    batch_tokens: int = Field(default=DEFAULT_BATCH_TOKENS, ge=100)
    trigger_tokens: int = Field(default=DEFAULT_TRIGGER_TOKENS, ge=0)

    @property
    def memory_dir(self) -> Path:
        return self.state / "memory"

    @property
    def session_store_url(self) -> str:
        return self.sessions_url or f"sqlite:///{(self.state / 'sessions' / 'sessions.db').resolve()}"

    def llm_config_source(self) -> Callable[[], LLMConfig]:
        """Writer settings read on every pass: ``<state>/writer.json`` overrides the environment.

        Editing that file switches model or endpoint on the next pass, without a restart.
        """
        from scriptorium.writers.llm import LLMConfig  # imports the model client only when used

        path = self.state / "writer.json"

        def load() -> LLMConfig:
            values: dict[str, Any] = {
                "model": self.writer_model,
                "base_url": self.writer_base_url,
                "api_key": self.writer_api_key,
                "timeout_s": self.writer_timeout_s,
            }
            try:
                override = json.loads(path.read_text())
            except FileNotFoundError:
                override = {}
            except json.JSONDecodeError as exc:
                raise WriterUnavailable(
                    f"{path} is not valid JSON: {exc}", reason=ReasonCode.WRITER_START_FAILED
                ) from exc
            values.update({k: v for k, v in override.items() if k in values})
            if not values["model"]:
                raise WriterUnavailable(
                    "no writer model configured (SCRIPTORIUM_WRITER_MODEL or writer.json)",
                    reason=ReasonCode.WRITER_START_FAILED,
                )
            return LLMConfig(**values)

        return load

    def write_settings(self) -> WriteSettings:
        return WriteSettings(batch_tokens=self.batch_tokens, trigger_tokens=self.trigger_tokens)

    def workspace_config(self) -> WorkspaceConfig:
        return WorkspaceConfig(
            recent_limit=self.recent_limit, core_budget=self.core_budget, lock_timeout=self.lock_timeout
        )
