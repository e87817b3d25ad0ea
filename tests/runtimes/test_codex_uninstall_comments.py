"""``scriptorium setup codex --uninstall`` after the user edited ``config.toml`` (issue 59): the user's comments
stay, those tomlkit files under our ``[mcp_servers.scriptorium]`` table included (written after it, before
the next table or the end of the file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scriptorium.runtimes import codex
from tests.helpers.runtime_setup import make_home, setup

SERVER = {"command": "scriptorium", "args": ["mcp"]}


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s + '\n# my own note: keep this\n[profiles.fast]\nmodel = "o4-mini"\n',
        lambda s: s + "# my own note at the end\n",
        lambda s: s.replace("[mcp_servers.scriptorium]", "# servers below\n[mcp_servers.scriptorium]"),
        lambda s: s.replace('model = "o3"\n', 'model = "o3"  # the best\n# tuned by hand\n'),
    ],
)
def test_removing_our_server_keeps_every_comment_of_the_users(edit: object) -> None:
    written = codex.add_server('# my config\nmodel = "o3"\n', SERVER)
    edited = edit(written)  # type: ignore[operator]
    removed = codex.remove_server(edited)
    comments = [line.strip() for line in edited.splitlines() if line.lstrip().startswith("#") or " # " in line]
    for comment in comments:
        assert comment in removed, (comment, removed)
    assert "scriptorium" not in removed


def test_uninstall_after_the_user_edited_config_toml_keeps_their_comment(tmp_path: Path) -> None:
    home, state = make_home(tmp_path), tmp_path / "state"
    setup(home, state, "codex")
    config = home / ".codex" / "config.toml"
    config.write_text(config.read_text() + "\n# added by me after setup\n")
    setup(home, state, "codex", "--uninstall")
    after = config.read_text()
    assert "# added by me after setup" in after and "mcp_servers.scriptorium" not in after


def test_removing_our_trust_records_keeps_the_users_comment_below_them() -> None:
    key = "/home/u/.codex/hooks.json:stop:0:0"
    written = codex.add_trust(codex.add_server('# my config\nmodel = "o3"\n', SERVER), {key: "sha256:abc"})
    edited = written + "# mine, at the end\n"
    removed = codex.remove_trust(codex.remove_server(edited), [key])
    assert "# mine, at the end" in removed and "# my config" in removed
    assert "scriptorium" not in removed and "trusted_hash" not in removed
