"""A heavy year of Claude Code transcripts, generated from a seed, written a month at a time.

What :mod:`benchmarks.year` imports. The layout and the lines are Claude Code's own:
``projects/<cwd with every non-alphanumeric character turned into '-'>/<session ID>.jsonl`` per session,
and ``agent-<agent ID>.jsonl`` beside it per subagent (sidechain entries, ``isSidechain: true``, naming
the session that spawned them). Each line carries what Claude Code writes (``parentUuid``, ``cwd``,
``sessionId``, ``version``, ``gitBranch``, the API message with its ID and usage, ``requestId``…).

The year: ``sessions_per_year`` sessions (2,000 by default: about 102,000 user and assistant messages and
134 MB of transcripts), spread evenly over the months across 15 projects, some busier than others. Sessions
vary in length (log-normal: most a few turns, some a hundred), in text (each project its own terms, each
session a subject of a few of them, prose, code and paths in between) and in shape:

* tool calls between the messages (``tool_use`` / ``tool_result`` lines, progress entries, file-history
  snapshots), never written into memory;
* rewound forks: a user message whose parent is an earlier turn (Claude Code's rewind), leaving a branch;
* resumed sessions: a session of an earlier month continued (its file appended to) in a later one;
* subagents: a ``Task`` tool call, the subagent's own transcript file, and its report as the tool result.

Every month is the same template (the same number of sessions, turns, messages and words; only the text,
the IDs, the projects and the days differ), so a month's import is the same amount of work whenever it comes:
what grows from month to month is only what was stored before.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

YEAR = 2025
VERSION = "2.0.28"
MODEL = "claude-sonnet-4-5-20250929"


def _split(words: str) -> list[str]:
    return words.split()


PROJECTS = (
    "atlas",
    "beacon",
    "cobalt",
    "driftwood",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "ion",
    "juniper",
    "kestrel",
    "lumen",
    "meridian",
    "nimbus",
    "orchard",
)
COMMON = _split("""the a to of and in is it that for on with as this we be are not or by at from but can if so
you your our was will would should could have has had do does did make need use using used want just
then than when where which what how why also more most some any all each every one two three first next
last new old same other only into out up down over after before because while there here now still again
very well much many few least already yet once both either whether such its their them they he she
change fix look check run test add remove keep move call return read write open close start stop try
work works working think seems looks means note case way time part file line value name list step point""")
TECH = _split("""function class method module package import export config setting option flag default error
exception trace stack log logger level warning debug request response client server handler route
endpoint api query schema table index column row migration database cache key queue worker job task
thread lock async await future promise callback event listener stream buffer batch retry timeout backoff
token auth session cookie header payload json yaml toml parser lexer compiler build deploy release
version branch commit merge rebase diff patch review test fixture mock assert coverage benchmark profile
memory cpu latency throughput budget limit quota shard replica leader follower snapshot checkpoint
container image volume network port socket proxy tls certificate secret vault env variable path folder
directory permission owner group user role policy rule filter sort page cursor offset window metric
counter gauge histogram trace span alert dashboard pipeline stage artifact registry dependency lockfile""")
VERBS = ("load", "parse", "sync", "flush", "merge", "render", "build", "fetch", "resolve", "index")
SYLLABLES = _split("""ka lo mi ner vas tor quil bre dan fen gal hux ira jov kel lum mor nax oph pel rin sul tam
ur vex wil xan yor zed ash bel cor dov eth fal grim hal isk jet kor lan mar nev orn pry""")
TOOLS = ("Read", "Bash", "Edit", "Grep", "Glob", "Write")


def project_cwd(name: str) -> str:
    """Where a project's sessions run (a made-up home, as the transcripts of any user would name one)."""
    return f"/home/dev/{'work' if PROJECTS.index(name) % 3 == 0 else 'src'}/{name}"


def project_folder(cwd: str) -> str:
    """Claude Code's folder name for a working directory: every non-alphanumeric character becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


# -- the template: what every month holds --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call inside a turn: an assistant message before it (words; 0: none) and its result."""

    text_words: int
    result_bytes: int


@dataclass(frozen=True, slots=True)
class Turn:
    user_words: int
    steps: tuple[Step, ...]
    answer_words: int


@dataclass(frozen=True, slots=True)
class Agent:
    """A subagent spawned during turn ``at``: its prompt, its tool calls and its report."""

    at: int
    prompt_words: int
    steps: tuple[Step, ...]
    report_words: int


@dataclass(frozen=True, slots=True)
class Slot:
    """One session of a month: a new one, or an earlier one resumed (its file appended to)."""

    resume: bool
    turns: tuple[Turn, ...]
    fork: tuple[int, int] | None
    """(turn, back to turn): that turn's prompt is parented to the end of the turn before ``back to``."""
    agents: tuple[Agent, ...]


def _words(rng: random.Random, median: float, sigma: float, cap: int) -> int:
    return max(3, min(cap, round(rng.lognormvariate(0, sigma) * median)))


def _steps(rng: random.Random, mean: float) -> tuple[Step, ...]:
    count = 0
    while rng.random() < mean / (mean + 1):  # geometric, mean ``mean``
        count += 1
    return tuple(
        Step(_words(rng, 30, 0.7, 300) if rng.random() < 0.5 else 0, round(rng.lognormvariate(4.5, 1.0)))
        for _ in range(count)
    )


MESSAGES_PER_SESSION = 51
"""The issue's heavy year: about 102,000 user and assistant messages in 2,000 sessions."""
MAX_TURNS = 150


def slot_messages(slot: Slot) -> int:
    """The user and assistant messages with text a slot writes (what memory archives and writes)."""
    turns = sum(2 + sum(s.text_words > 0 for s in t.steps) for t in slot.turns)
    return turns + sum(2 + sum(s.text_words > 0 for s in a.steps) for a in slot.agents)


def template(seed: int, per_month: int) -> tuple[Slot, ...]:
    """The sessions every month holds, drawn once from ``seed``: lengths log-normal, scaled so that a month
    holds :data:`MESSAGES_PER_SESSION` messages a session on average whatever the seed. Every month of two
    sessions or more holds each shape: its first session is forked and spawns a subagent, and one in ten
    (one at least) resumes a session of the month before."""
    rng = random.Random(f"template-{seed}")
    resumes = max(1, round(per_month * 0.1)) if per_month >= 2 else 0
    kinds = [False] * (per_month - resumes) + [True] * resumes
    rng.shuffle(kinds)
    if kinds and kinds[0]:  # the month's first session is a new one (the first month resumes its own)
        kinds[kinds.index(False)], kinds[0] = True, False
    drawn = []
    for number, resume in enumerate(kinds):
        length = rng.lognormvariate(2.8, 0.85) * (0.5 if resume else 1)
        turns = [Turn(_words(rng, 18, 0.9, 400), _steps(rng, 0.6), _words(rng, 28, 0.9, 900)) for _ in range(MAX_TURNS)]
        fork = (rng.random() < 0.15 or number == 0, rng.random(), rng.random())
        spawns = rng.randint(1, 3) if rng.random() < 0.25 or number == 0 else 0
        agents = [
            (rng.random(), Agent(0, _words(rng, 45, 0.6, 300), _steps(rng, 2.0), _words(rng, 120, 0.7, 900)))
            for _ in range(spawns)
        ]
        drawn.append((resume, length, turns, fork, agents))

    def build(scale: float) -> list[Slot]:
        slots = []
        for number, (resume, length, turns, (forked, at_u, back_u), agents) in enumerate(drawn):
            least = 3 if number == 0 else 1  # the first session of a month is forked: every shape, every month
            count = max(least, min(MAX_TURNS, round(length * scale)))
            fork = None
            if forked and count >= 3:
                at = 2 + int(at_u * (count - 2))
                fork = (at, 1 + int(back_u * (at - 1)))
            placed = sorted((replace(a, at=int(u * count)) for u, a in agents), key=lambda a: a.at)
            slots.append(Slot(resume, tuple(turns[:count]), fork, tuple(placed)))
        return slots

    target, scale = MESSAGES_PER_SESSION * per_month, 1.0
    for _ in range(6):
        slots = build(scale)
        scale *= target / sum(slot_messages(s) for s in slots)
    return tuple(build(scale))


# -- text ----------------------------------------------------------------------------------------------


class Text:
    """Words of a project: its own terms, the trade's, and plain English, in Zipf-like proportions."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.terms: dict[str, list[str]] = {}
        self.pools: dict[str, tuple[list[str], list[float]]] = {}
        for name in PROJECTS:
            terms = sorted({"".join(rng.choices(SYLLABLES, k=rng.randint(2, 3))) for _ in range(60)})
            self.terms[name] = terms
            pool = COMMON + TECH + terms
            weights = [1.0 / (rank + 2) ** 1.05 for rank in range(len(pool))]
            rng.shuffle(weights)
            total, cumulative = 0.0, []
            for weight in weights:
                total += weight
                cumulative.append(total)
            self.pools[name] = (pool, cumulative)

    def subject(self, project: str) -> list[str]:
        return self.rng.sample(self.terms[project], 3)

    def prose(self, project: str, subject: list[str], words: int) -> str:
        rng = self.rng
        pool, cumulative = self.pools[project]
        chosen = rng.choices(pool, cum_weights=cumulative, k=words)
        for _ in range(max(1, words // 15)):  # the session's subject comes back again and again
            chosen[rng.randrange(words)] = rng.choice(subject)
        sentences, start = [], 0
        while start < words:
            end = min(words, start + rng.randint(6, 18))
            sentence = " ".join(chosen[start:end])
            sentences.append(sentence[:1].upper() + sentence[1:] + rng.choice(".....?!:"))
            start = end
        text = " ".join(sentences)
        if words > 60 and rng.random() < 0.3:
            name = f"{rng.choice(subject)}_{rng.choice(VERBS)}"
            text += f"\n\n```python\ndef {name}(self, {rng.choice(TECH)}):\n    return self.{rng.choice(TECH)}\n```"
        if rng.random() < 0.2:
            text += f" See `src/{project}/{rng.choice(subject)}/{rng.choice(TECH)}.py`."
        return text

    def output(self, project: str, subject: list[str], size: int) -> str:
        """A tool's output of about ``size`` bytes: numbered source lines, as a Read gives back."""
        rng = self.rng
        lines, total, number = [], 0, rng.randint(1, 400)
        while total < size:
            term, verb = rng.choice(subject + self.terms[project][:5]), rng.choice(VERBS)
            line = f"{number:>6}\u2192    {rng.choice(TECH)} = {term}_{verb}({rng.choice(TECH)}, {rng.choice(COMMON)})"
            lines.append(line)
            total += len(line) + 1
            number += 1
        return "\n".join(lines)


# -- writing -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Known:
    """A session written so far: where its file is, and where its main branch ends."""

    id: str
    project: str
    path: Path
    subject: list[str]
    title: str
    last: str
    time: datetime
    first_prompt: str


@dataclass(slots=True)
class Month:
    """What one month wrote."""

    month: int
    new_sessions: int = 0
    resumed: int = 0
    forks: int = 0
    subagents: int = 0
    messages: int = 0
    """User and assistant messages with text: what memory writes (command echoes, tool lines left out)."""
    bytes: int = 0
    files: int = 0
    session_ids: list[str] = field(default_factory=list)
    cited: tuple[str, str] | None = None
    """(session ID, message ID) of the month's first user prompt: a source a REST change may cite."""


class Session:
    """Lines of one session (or subagent) file being written, chained by ``parentUuid``."""

    def __init__(self, corpus: YearCorpus, known: Known, time: datetime, parent: str | None, agent: str = "") -> None:
        self.corpus, self.known, self.time, self.parent, self.agent = corpus, known, time, parent, agent
        self.lines: list[str] = []
        self.messages = 0

    def _entry(self, kind: str, message: dict[str, Any] | None, **extra: Any) -> str:
        rng = self.corpus.rng
        self.time += timedelta(seconds=rng.uniform(2, 40))
        uid = self.corpus.uuid()
        entry: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": bool(self.agent),
            "userType": "external",
            "cwd": project_cwd(self.known.project),
            "sessionId": self.known.id,
            "version": VERSION,
            "gitBranch": "main",
        }
        if self.agent:
            entry["agentId"] = self.agent
        if message is not None:
            entry["message"] = message
        entry.update(extra)
        entry.update({"type": kind, "uuid": uid, "timestamp": self.time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"})
        self.lines.append(json.dumps(entry, ensure_ascii=False))
        self.parent = uid
        return uid

    def user(self, text: str) -> str:
        self.messages += 1
        return self._entry("user", {"role": "user", "content": text})

    def assistant(self, blocks: list[dict[str, Any]]) -> str:
        rng = self.corpus.rng
        text = any(b["type"] == "text" for b in blocks)
        self.messages += text
        usage = {
            "input_tokens": rng.randint(3, 40),
            "cache_creation_input_tokens": rng.randint(0, 4000),
            "cache_read_input_tokens": rng.randint(10_000, 90_000),
            "output_tokens": rng.randint(20, 1500),
            "service_tier": "standard",
        }
        message = {
            "id": f"msg_{self.corpus.hex(24)}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": blocks,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        return self._entry("assistant", message, requestId=f"req_{self.corpus.hex(24)}")

    def tool(self, step: Step, subject: list[str], name: str | None = None, tool_input: Any = None) -> str:
        """An assistant message (if any), a tool call and its result; returns the result's text."""
        corpus, rng, project = self.corpus, self.corpus.rng, self.known.project
        if step.text_words:
            self.assistant([{"type": "text", "text": corpus.text.prose(project, subject, step.text_words)}])
        call = f"toolu_{corpus.hex(24)}"
        name = name or rng.choice(TOOLS)
        if tool_input is None:
            tool_input = {"file_path": f"{project_cwd(project)}/src/{rng.choice(subject)}/{rng.choice(TECH)}.py"}
        self.assistant([{"type": "tool_use", "id": call, "name": name, "input": tool_input}])
        if rng.random() < 0.2:  # a progress entry: no message; the next entry is parented through it
            self._entry("progress", None, data={"type": "hook_progress", "hookName": "PostToolUse"})
        result = corpus.text.output(project, subject, step.result_bytes)
        block = {"tool_use_id": call, "type": "tool_result", "content": result}
        self._entry("user", {"role": "user", "content": [block]}, toolUseResult={"type": "text"})
        return result


class YearCorpus:
    """The year's transcripts under ``root``/projects, written month by month (:meth:`write_month`)."""

    def __init__(self, root: Path, seed: int = 2025, sessions_per_year: int = 2000) -> None:
        self.projects = root / "projects"
        self.seed = seed
        self.per_month = max(1, round(sessions_per_year / 12))
        self.template = template(seed, self.per_month)
        self.rng = random.Random(f"text-{seed}")
        self.text = Text(self.rng)
        self.sessions: list[Known] = []
        self.by_month: dict[int, list[Known]] = {}
        self.weights = [1.0 / (n + 1) ** 0.8 for n in range(len(PROJECTS))]  # some projects busier than others

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def hex(self, digits: int) -> str:
        return f"{self.rng.getrandbits(4 * digits):0{digits}x}"

    @property
    def messages_per_month(self) -> int:
        return sum(slot_messages(slot) for slot in self.template)

    def prompts(self, count: int = 8) -> list[tuple[str, str]]:
        """(cwd, prompt) pairs asking about subjects of the first month's sessions, never in their words."""
        chosen = self.by_month.get(1) or self.sessions
        out = []
        for known in chosen[:count]:
            a, b, _c = known.subject
            out.append((project_cwd(known.project), f"Remind me what we settled about {a} and {b} in {known.project}?"))
        return out

    def write_month(self, month: int) -> Month:
        """Write (and append) the transcripts of ``month`` (1-based: January of :data:`YEAR` is 1)."""
        rng = self.rng
        start = datetime(YEAR + (month - 1) // 12, (month - 1) % 12 + 1, 1, 8, tzinfo=UTC)
        end = datetime(YEAR + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        span = (end - start).total_seconds() - 3 * 86_400
        times = sorted(start + timedelta(seconds=rng.uniform(0, span)) for _ in self.template)
        report = Month(month)
        earlier = self.by_month.get(month - 1) or []
        made: list[Known] = []
        for slot, when in zip(self.template, times, strict=True):
            if slot.resume:
                pool = earlier or made[: max(1, len(made) // 2)]
                known = rng.choice(pool)
                when = max(when, known.time + timedelta(hours=1))
                report.resumed += 1
            else:
                project = rng.choices(PROJECTS, weights=self.weights)[0]
                subject = self.text.subject(project)
                title = f"{project.title()}: {subject[0]} {rng.choice(VERBS)} and {subject[1]} {rng.choice(TECH)}"
                folder = self.projects / project_folder(project_cwd(project))
                sid = self.uuid()
                known = Known(sid, project, folder / f"{sid}.jsonl", subject, title, "", when, "")
                report.new_sessions += 1
                made.append(known)
                self.sessions.append(known)
            self._write(known, slot, when, report)
        self.by_month[month] = made
        return report

    def _write(self, known: Known, slot: Slot, when: datetime, report: Month) -> None:
        rng, text, project, subject = self.rng, self.text, known.project, known.subject
        new = not known.last
        known.path.parent.mkdir(parents=True, exist_ok=True)
        main = Session(self, known, when, known.last or None)
        ends: list[str | None] = []  # where each turn ended (the parent of the next turn's prompt)
        agents: dict[int, list[Agent]] = {}
        for agent in slot.agents:
            agents.setdefault(agent.at, []).append(agent)
        for number, turn in enumerate(slot.turns):
            main.time += timedelta(seconds=rng.uniform(30, 900))
            if slot.fork and number == slot.fork[0]:  # rewound: asked again from an earlier point
                main.parent = ends[slot.fork[1]]
                report.forks += 1
            ends.append(main.parent)
            if rng.random() < 0.3:
                snapshot = {"messageId": self.uuid(), "trackedFileBackups": {}, "timestamp": main.time.isoformat()}
                main.lines.append(
                    json.dumps({"type": "file-history-snapshot", "messageId": self.uuid(), "snapshot": snapshot})
                )
            if rng.random() < 0.04:  # a slash command's echo: a user line memory leaves out
                main._entry("user", {"role": "user", "content": "<command-name>/clear</command-name>"}, isMeta=False)
            prompt = text.prose(project, subject, turn.user_words)
            uid = main.user(prompt)
            if not known.first_prompt:
                known.first_prompt = uid
            if report.cited is None:
                report.cited = (known.id, uid)
            for step in turn.steps:
                main.tool(step, subject)
            for agent in agents.get(number, []):
                self._agent(known, main, agent, report)
            main.assistant([{"type": "text", "text": text.prose(project, subject, turn.answer_words)}])
        known.last, known.time = main.parent or known.last, main.time
        lines = main.lines
        if new:
            lines = [json.dumps({"type": "summary", "summary": known.title, "leafUuid": known.last}), *lines]
            report.files += 1
            report.session_ids.append(known.id)
        data = "".join(line + "\n" for line in lines).encode()
        with known.path.open("ab") as handle:
            handle.write(data)
        report.bytes += len(data)
        report.messages += main.messages

    def _agent(self, known: Known, main: Session, agent: Agent, report: Month) -> None:
        """A Task call in ``main``, the subagent's own file, and its report as the call's result."""
        text, project, subject = self.text, known.project, known.subject
        prompt = text.prose(project, subject, agent.prompt_words)
        agent_id = self.hex(8)
        sub = Session(self, known, main.time, None, agent=agent_id)
        sub.user(prompt)
        for step in agent.steps:
            sub.tool(step, subject)
        report_text = text.prose(project, subject, agent.report_words)
        sub.assistant([{"type": "text", "text": report_text}])
        task = {"description": f"Look into {subject[0]}", "prompt": prompt, "subagent_type": "general-purpose"}
        uid_call = f"toolu_{self.hex(24)}"
        main.assistant([{"type": "tool_use", "id": uid_call, "name": "Task", "input": task}])
        block = {"tool_use_id": uid_call, "type": "tool_result", "content": [{"type": "text", "text": report_text}]}
        main._entry("user", {"role": "user", "content": [block]}, toolUseResult={"status": "completed"})
        main.time = max(main.time, sub.time)
        data = "".join(line + "\n" for line in sub.lines).encode()
        path = known.path.parent / f"agent-{agent_id}.jsonl"
        path.write_bytes(data)
        report.files += 1
        report.subagents += 1
        report.bytes += len(data)
        report.messages += sub.messages
