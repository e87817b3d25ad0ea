"""A prompt's recall is scoped to the asking session's project (issue 58): its project's records and those
that belong to no project come first; another project's come only when they match clearly better, and
then marked with that project's name. Real git work trees, sessions imported as the hooks import them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers.cli import run
from tests.helpers.hooks import common, context, hook
from tests.helpers.transcripts import cc


def work_tree(folder: Path, remote: str | None = None) -> Path:
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    if remote is not None:
        subprocess.run(["git", "-C", str(folder), "remote", "add", "origin", remote], check=True)
    return folder


def said(state: Path, tmp_path: Path, session: str, text: str, cwd: Path | None, branch: str | None = None) -> None:
    """A two-turn Claude Code session whose user said ``text`` in ``cwd`` (None: a transcript without a
    folder), on git branch ``branch`` as Claude Code records it, imported and written by its SessionEnd hook."""
    lines = []
    for n, turn in enumerate([text, "Noted."]):
        entry = json.loads(cc(n, f"e{n - 1}" if n else None, "user" if n == 0 else "assistant", turn))
        entry["sessionId"] = session
        if cwd is not None:
            entry["cwd"] = str(cwd)
        if branch is not None:
            entry["gitBranch"] = branch
        lines.append(json.dumps(entry))
    transcript = tmp_path / f"{session}.jsonl"
    transcript.write_text("".join(f"{line}\n" for line in lines))
    assert hook(state, common("SessionEnd", session=session, transcript=transcript, reason="exit")).returncode == 0


def recall(state: Path, cwd: Path, prompt: str) -> str:
    text = context(
        hook(state, common("UserPromptSubmit", session="cc-asking", cwd=str(cwd), prompt=prompt)), "UserPromptSubmit"
    )
    return text


def test_the_asking_projects_records_come_first_and_another_projects_only_when_asked_for(
    state: Path, tmp_path: Path
) -> None:
    harbour = work_tree(tmp_path / "code" / "harbour")
    lighthouse = work_tree(tmp_path / "code" / "lighthouse")
    said(
        state,
        tmp_path,
        "cc-harbour",
        "In this repo we run the unit tests with make check before every commit.",
        harbour / "src",
    )
    said(
        state,
        tmp_path,
        "cc-lighthouse",
        "In this repo we run the unit tests with npm run unit before every commit.",
        lighthouse,
    )
    said(state, tmp_path, "cc-nowhere", "I prefer unit tests that run in under a second.", None)

    asked = recall(state, harbour, "how do we run the unit tests before a commit?")
    assert "make check" in asked, "the asking project's record (its session ran in a subfolder)"
    assert "npm run unit" not in asked, "another project's conventions never pass as this one's"
    assert "under a second" in asked, "a record of no project applies everywhere"

    elsewhere = recall(state, lighthouse, "how do we run the unit tests before a commit?")
    assert "npm run unit" in elsewhere and "make check" not in elsewhere

    named = recall(state, harbour, "in the lighthouse repo, was it npm run unit for the unit tests?")
    groups = {group.split("\n", 1)[0]: group for group in named.split("\n\n")}  # place title → its records
    (title,) = [title for title, group in groups.items() if "npm run unit" in group]
    assert title.endswith("[from project lighthouse]"), named
    assert all("from project" not in title for title, group in groups.items() if "make check" in group), (
        "the asking project's own is never marked"
    )


def test_two_clones_of_one_repository_are_one_project(state: Path, tmp_path: Path) -> None:
    """Known by their remote (written two ways): what one clone's sessions said is the other's own."""
    laptop = work_tree(tmp_path / "laptop" / "harbour", "git@github.com:acme/harbour.git")
    checkout = work_tree(tmp_path / "worktrees" / "harbour-fix", "https://github.com/Acme/harbour/")
    other = work_tree(tmp_path / "laptop" / "lighthouse", "git@github.com:acme/lighthouse.git")
    said(
        state, tmp_path, "cc-laptop", "In this repo we run the unit tests with make check before every commit.", laptop
    )
    said(
        state, tmp_path, "cc-other", "In this repo we run the unit tests with npm run unit before every commit.", other
    )

    asked = recall(state, checkout, "how do we run the unit tests before a commit?")
    assert "make check" in asked and "[from project" not in asked, asked
    assert "npm run unit" not in asked


def git(repo: Path, *args: str) -> None:
    who = ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"]
    subprocess.run(["git", *who, "-C", str(repo), *args], check=True, capture_output=True)


def test_a_record_from_a_branch_not_merged_here_is_marked_until_the_merge(state: Path, tmp_path: Path) -> None:
    repo = tmp_path / "harbour"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    git(repo, "checkout", "-q", "-b", "feature/v2")
    git(repo, "commit", "-q", "--allow-empty", "-m", "v2 client")
    said(
        state,
        tmp_path,
        "cc-v2",
        "The harbour client now calls the endpoints under /api/v2 for tide data.",
        repo,
        "feature/v2",
    )
    said(state, tmp_path, "cc-v1", "The harbour client calls the endpoints under /api/v1 for tide data.", repo, "main")
    question = "which endpoints does the harbour client call for tide data?"

    on_the_branch = recall(state, repo, question)
    assert "/api/v2" in on_the_branch and "not merged here" not in on_the_branch, "the branch's own records"

    git(repo, "checkout", "-q", "main")
    on_main = recall(state, repo, question)
    (v2,) = [line for line in on_main.splitlines() if "/api/v2" in line]
    assert "[on branch feature/v2, not merged here]" in v2, on_main
    (v1,) = [line for line in on_main.splitlines() if "/api/v1" in line and "User:" in line]
    assert "on branch" not in v1, "what was said on the mainline is current"

    git(repo, "merge", "-q", "--no-ff", "feature/v2", "-m", "merge v2")
    merged = recall(state, repo, question)
    assert "/api/v2" in merged and "not merged here" not in merged, "once merged, mainline"


def test_a_record_says_which_project_and_branch_it_was_said_in(state: Path, tmp_path: Path) -> None:
    """``memory get`` (the REST record and MCP ``memory_get`` answer with the same payload) names the projects
    a record's sessions ran in and the git branches its turns were said on; a record of no place names none."""
    harbour = work_tree(tmp_path / "code" / "harbour", "git@github.com:acme/harbour.git")
    said(state, tmp_path, "cc-harbour", "We pin the linter to ruff 0.6 in this repository.", harbour, "feature/lint")
    said(state, tmp_path, "cc-nowhere", "I prefer short commit messages.", None)
    found = json.loads(run("memory", "search", "ruff linter pinned", "--state", str(state), "--json").stdout)
    (pinned,) = [h for h in found["results"] if "ruff 0.6" in h["snippet"]]
    record = json.loads(run("memory", "get", pinned["memory_id"], "--state", str(state), "--json").stdout)
    assert record["projects"] == ["harbour"] and record["git_branches"] == ["feature/lint"], record
    found = json.loads(run("memory", "search", "short commit messages", "--state", str(state), "--json").stdout)
    (short,) = [h for h in found["results"] if "short commit" in h["snippet"]]
    record = json.loads(run("memory", "get", short["memory_id"], "--state", str(state), "--json").stdout)
    assert record["projects"] == [] and record["git_branches"] == []
