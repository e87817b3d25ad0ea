"""``memory status`` costs what it reads, not what is stored: the topic, record and source counts are kept
by every install and read back in a new process without parsing a topic; the core is read alone. Kept
figures always equal a recount, whatever the installs did (topics made, rewritten, deleted with their records;
sources archived)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange, WorkspaceConfig, topics, views
from scriptorium.workspace import workspace as workspace_module
from scriptorium.workspace.workspace import CORE_MEMO, STATS_FILE


def archive(ws: MemoryWorkspace, n: int) -> str:
    with ws.lock():
        [path] = ws.archive_sources([SourceMessage("test", "t", f"m{n}", "user", "2026-11-01T00:00:00Z", f"m{n}")])
    ws.transact(lambda stage: None, message="archive", appended_sources=[path])
    return f"test/t/m{n}"


def recount(ws: MemoryWorkspace) -> tuple[int, int, int]:
    (ws.root / ".scriptorium" / STATS_FILE).unlink(missing_ok=True)
    fresh = MemoryWorkspace(ws.root)
    try:
        stats = fresh.stats()
    finally:
        fresh.close()
    return stats.topics, stats.records, stats.sources


def test_the_kept_figures_equal_a_recount_after_every_kind_of_install(tmp_path: Path) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    try:
        ws.stats()  # counted once: from here on, kept
        for n in range(6):
            source = archive(ws, n)
            lines = "".join(f"2026-11-0{k + 1}: Fact {n}.{k} [k]({source}).\n\n" for k in range(n % 3 + 1))
            ws.apply_changes([TopicChange(f"topics/t{n}.md", "create", f"# T{n}\n\n{lines}")], message="make")
            kept = ws.stats()
            assert (kept.topics, kept.records, kept.sources) == recount(ws), n
        text = ws.read_topic("topics/t5.md")
        ws.apply_changes([TopicChange("topics/t5.md", "update", text.replace("Fact 5.1", "Fact 5.1b"))], message="edit")
        ws.apply_changes([TopicChange("topics/t2.md", "delete")], message="drop")
        kept = ws.stats()
        assert (kept.topics, kept.records, kept.sources) == recount(ws)
        assert kept.topics == 5 and kept.sources == 6
    finally:
        ws.close()


def test_a_new_process_reads_the_status_without_parsing_a_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    source = archive(ws, 0)
    ws.stats()
    for n in range(30):
        ws.apply_changes(
            [TopicChange(f"topics/t{n}.md", "create", f"# T\n\n2026-11-01: F{n} [k]({source}).\n")], message="m"
        )
    ws.apply_changes([TopicChange("topics/core.md", "create", f"# Core\n\nAlways lint [k]({source}).\n")], message="c")
    expected = ws.stats()
    ws.close()
    topics.clear_memo()
    parsed: list[str] = []
    parse = topics._parse_topic
    monkeypatch.setattr(topics, "_parse_topic", lambda path, text: parsed.append(path) or parse(path, text))
    fresh = MemoryWorkspace(tmp_path / "memory")
    try:
        assert fresh.stats() == expected and expected.topics == 31
        assert parsed == []
        assert "Always lint" in fresh.core_rendering().text
        assert parsed == [], "the install's rendering of the core is remembered: not even the core is parsed"
    finally:
        fresh.close()


def test_the_remembered_core_figures_are_a_fresh_rendering_of_the_installed_core_at_the_budget_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    source = archive(ws, 0)
    facts = "".join(
        f"Rule {n}: run the linter with profile {n} before committing [k]({source}).\n\n" for n in range(200)
    )
    ws.apply_changes([TopicChange("topics/core.md", "create", f"# Core\n\n{facts}")], message="c")
    ws.close()

    def fresh_rendering(budget: int) -> views.CoreRendering:
        with MemoryWorkspace(tmp_path / "memory", WorkspaceConfig(core_budget=budget)) as fresh:
            (fresh.root / ".scriptorium" / CORE_MEMO).unlink(missing_ok=True)
            return fresh.core_rendering()

    def remembered(budget: int) -> views.CoreRendering:
        with MemoryWorkspace(tmp_path / "memory", WorkspaceConfig(core_budget=budget)) as fresh:
            return fresh.core_rendering()

    default = WorkspaceConfig().core_budget
    kept = remembered(default)
    assert kept == fresh_rendering(default) and kept.omitted_ids, "the install's memo equals a fresh rendering"
    small = remembered(60)  # another budget: rendered again, not the memo of the default's
    assert small == fresh_rendering(60) and small.tokens <= 60 < kept.tokens

    assert remembered(default) == kept  # the memo is the old core's at the default budget again
    # The core changes and its memo is not rewritten (the process died right after the install): the memo
    # of the old core is not used.
    with monkeypatch.context() as crash, MemoryWorkspace(tmp_path / "memory") as ws:
        crash.setattr(MemoryWorkspace, "_write_core_memo", lambda *a: None)
        text = ws.read_topic("topics/core.md").replace("# Core\n\n", f"# Core\n\nNever push to main [k]({source}).\n\n")
        ws.apply_changes([TopicChange("topics/core.md", "update", text)], message="c2")
    calls: list[int] = []
    render = views.render_core
    monkeypatch.setattr(workspace_module, "render_core", lambda *a, **k: calls.append(1) or render(*a, **k))
    after = remembered(default)
    assert "Never push to main" in after.text
    assert after == fresh_rendering(default) and calls
