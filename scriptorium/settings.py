"""Settings for composition roots (CLI, workers, web): the only place that reads the environment.

An edge module: the domain core never imports it; entry points build core
configuration objects from it and pass them down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from scriptorium.defaults import (
    DEFAULT_BATCH_TOKENS,
    DEFAULT_CORE_TOKEN_BUDGET,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_RECENT_LIMIT,
    DEFAULT_TRIGGER_TOKENS,
)
from scriptorium.workspace import WorkspaceConfig
from scriptorium.writing.service import WriteSettings


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
    batch_tokens: int = Field(default=DEFAULT_BATCH_TOKENS, ge=100)
    trigger_tokens: int = Field(default=DEFAULT_TRIGGER_TOKENS, ge=0)

    @property
    def memory_dir(self) -> Path:
        return self.state / "memory"

    @property
    def session_store_url(self) -> str:
        return self.sessions_url or f"sqlite:///{(self.state / 'sessions' / 'sessions.db').resolve()}"

    def write_settings(self) -> WriteSettings:
        return WriteSettings(batch_tokens=self.batch_tokens, trigger_tokens=self.trigger_tokens)

    def workspace_config(self) -> WorkspaceConfig:
        return WorkspaceConfig(
            recent_limit=self.recent_limit, core_budget=self.core_budget, lock_timeout=self.lock_timeout
        )
