"""Settings from the environment (``SCRIPTORIUM_*``), and logging that loads structlog only when it logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from scriptorium.settings import Settings, environment_values


def test_given_values_win_over_the_environment_which_wins_over_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRIPTORIUM_RECENT_LIMIT", "7")
    monkeypatch.setenv("SCRIPTORIUM_IDLE_MINUTES", "12.5")
    settings = Settings(recent_limit=3)
    assert settings.recent_limit == 3  # given
    assert settings.idle_minutes == 12.5  # the environment's, converted
    assert settings.batch_tokens == Settings.model_fields["batch_tokens"].default  # neither: the default


def test_a_variable_is_read_in_any_case_and_a_list_from_json() -> None:
    found = environment_values(
        Settings.model_fields,
        {"scriptorium_Recent_Limit": "9", "SCRIPTORIUM_REDACT_PATTERNS": '["tok-[0-9]+"]', "RECENT_LIMIT": "1"},
    )
    assert found == {"recent_limit": "9", "redact_patterns": ["tok-[0-9]+"]}
    assert Settings.model_validate(found).redact_patterns == ["tok-[0-9]+"]


def test_a_bad_value_is_refused_by_name_with_what_it_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRIPTORIUM_REDACT_PATTERNS", "tok-[0-9]+")  # not JSON: left as text, which is no list
    monkeypatch.setenv("SCRIPTORIUM_RECENT_LIMIT", "0")  # below its floor
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert {(error["loc"], error["input"]) for error in refused.value.errors()} == {
        (("redact_patterns",), "tok-[0-9]+"),
        (("recent_limit",), "0"),
    }


LOGS = """
import json, sys
from scriptorium.logs import configure_logging, get_logger

log = get_logger("probe")
configure_logging(sys.argv[1])
log.info("probe.info", n=1)
before = "structlog" in sys.modules
log.warning("probe.warning", n=2)
print(json.dumps([before, "structlog" in sys.modules]))
"""


@pytest.mark.parametrize(("level", "loaded_by_info", "lines"), [("WARNING", False, 1), ("INFO", True, 2)])
def test_structlog_loads_at_the_first_event_logged_at_the_level_and_logs_to_stderr(
    level: str, loaded_by_info: bool, lines: int
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRIPTORIUM_")}
    done = subprocess.run([sys.executable, "-c", LOGS, level], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [loaded_by_info, True]  # stdout holds nothing else: logs go to stderr
    events = [json.loads(line) for line in done.stderr.splitlines()]
    assert [event["event"] for event in events] == ["probe.info", "probe.warning"][-lines:]
    assert all(event["level"] in ("info", "warning") and "timestamp" in event for event in events)
