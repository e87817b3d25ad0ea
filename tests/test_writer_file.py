"""``<state>/writer.json`` read as a typed model: a value of the wrong kind is refused with its key named (not
cast into something else), null leaves the environment's value, and a newer layout is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scriptorium.errors import InvalidArgument, ReasonCode, WriterUnavailable
from scriptorium.settings import Settings


def settings_with(tmp_path: Path, writer: object) -> Settings:
    (tmp_path / "writer.json").write_text(json.dumps(writer))
    return Settings(state=tmp_path, writer_model="env-model", writer_command="claude")


def test_writer_json_values_override_the_environment_typed(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, {"backend": "codex", "model": "m", "timeout_s": 30, "max_turns": 5})
    assert settings.writer_backend() == "codex"
    agent = settings.agent_config_source()()
    assert (agent.command, agent.model, agent.timeout_s, agent.max_turns) == ("claude", "m", 30.0, 5)
    llm = settings.llm_config_source()()
    assert (llm.model, llm.timeout_s) == ("m", 30.0)


def test_null_in_writer_json_leaves_the_environments_value(tmp_path: Path) -> None:
    agent = settings_with(tmp_path, {"model": None, "command": None}).agent_config_source()()
    assert (agent.model, agent.command) == ("env-model", "claude")


@pytest.mark.parametrize(
    ("writer", "key"),
    [
        ({"command": ["claude", "--debug"]}, "command"),  # was cast to the string "['claude', '--debug']"
        ({"max_turns": 2.5}, "max_turns"),  # was truncated to 2
        ({"timeout_s": "soon"}, "timeout_s"),  # the LLM writer took it as is and failed at its first request
        ({"timeout_s": -1}, "timeout_s"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_naming_its_key(tmp_path: Path, writer: object, key: str) -> None:
    settings = settings_with(tmp_path, writer)
    for load in (settings.agent_config_source(), settings.llm_config_source()):
        with pytest.raises(WriterUnavailable) as refused:
            load()
        assert refused.value.reason is ReasonCode.WRITER_START_FAILED and key in refused.value.message


def test_a_writer_json_of_a_newer_layout_is_refused(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, {"version": 2, "model": "m"})
    with pytest.raises(WriterUnavailable, match="version"):
        settings.llm_config_source()()
    assert settings_with(tmp_path, {"version": 1, "model": "m"}).llm_config_source()().model == "m"


def test_a_backend_writer_json_does_not_name_is_an_invalid_argument(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="claude-code"):
        settings_with(tmp_path, {"backend": "claude"}).writer_backend()
    assert settings_with(tmp_path, {"max_turns": "x"}).writer_backend() == "verbatim"  # the pass reports that one
