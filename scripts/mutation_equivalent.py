"""The survivors of ``scripts/mutation.py`` triaged as equivalent, each with why (:data:`EQUIVALENT`)."""

from __future__ import annotations

_AFTER_PREFIX = "return nodes[index + 1 :], [m for _, m in indexed[position + 1 :]]"
_EARLIER_START = (
    "the nodes after an installed prefix are marked once the pass lands; this start lies at or before the "
    "prefix's end, so it only marks again nodes the line above marked (marking is idempotent); a start past "
    "it (index << 1, index + 2) is killed"
)
_LOOP = "for position in range(len(indexed) - 1, -1, -1):"
_PAST_ZERO = (
    "a stop of -2 instead of -1: position 0 holds an installed message (checked above), so the loop returns "
    "there and never takes the extra step (a stop of 0 is killed)"
)
_SKIPPED = {"Lt": "no scope sorts before owner", "Is": "a parsed scope is never the literal"}
_PRUNE = "while folder.parent != self.root and folder != self.root and folder.exists() and not any(folder.iterdir()):"
EQUIVALENT: dict[tuple[str, str, str, int], str] = {
    **{
        ("selection", _AFTER_PREFIX, f"core/ReplaceBinaryOperator_Add_{op}", 1): _EARLIER_START
        for op in ("Mul", "FloorDiv", "Mod", "Pow", "RShift", "BitOr", "BitAnd", "BitXor")
    },
    ("selection", _AFTER_PREFIX, "core/NumberReplacer", 13): f"index + 0: {_EARLIER_START}",
    ("selection", _LOOP, "core/ReplaceUnaryOperator_USub_Invert", 0): f"~1 is -2: {_PAST_ZERO}",
    ("selection", _LOOP, "core/NumberReplacer", 6): _PAST_ZERO,
    (
        "scope",
        "def visible(memory_id: str | None, *, changing: bool, anchor: bool = False) -> None:",
        "core/ReplaceBinaryOperator_Mul_Div",
        0,
    ): (
        "the keyword-only marker `*` becomes the positional-only marker `/` after memory_id: every call passes "
        "changing and anchor by keyword, so every call binds the same"
    ),
    (
        "scope",
        'if changing and principal.scope == "write" and audience != principal.requester:',
        "core/ReplaceComparisonOperator_NotEq_Lt",
        0,
    ): (
        "audience < requester: the line runs only for an audience the requester sees, shared ('') or its own, "
        "and for those < and != agree ('' sorts before any name)"
    ),
    ("scope", 'if principal.scope == "owner":', "core/ReplaceComparisonOperator_Eq_LtE", 1): (
        "scope <= 'owner': of the scopes (owner, runtime, propose, write) only 'owner' sorts at or before it"
    ),
    **{
        ("scope", 'if principal.scope == "owner":', f"core/ReplaceComparisonOperator_Eq_{op}", occurrence): (
            f"the owner's early return skipped ({_SKIPPED[op]}): "
            "the owner is then checked as a viewer that sees every record and source and is no write token, so "
            "nothing below refuses it (test_the_early_check_refuses_by_the_requests_fields_alone lets its delete "
            "of a private record through)"
        )
        for op, occurrence in (("Lt", 1), ("Is", 0))
    },
    (
        "scope",
        'if changing and principal.scope == "write" and audience != principal.requester:',
        "core/ReplaceComparisonOperator_Eq_GtE",
        2,
    ): "scope >= 'write': of the scopes (owner, runtime, propose, write) only 'write' sorts at or after it",
    (
        "guard",
        'if self.principal.scope == "write" and audience != self.principal.requester:',
        "core/ReplaceComparisonOperator_NotEq_Lt",
        1,
    ): (
        "audience < requester: the line runs only for an audience the requester sees (the one before it "
        "refuses the others), shared ('') or its own, and for those < and != agree ('' sorts before any name)"
    ),
    **{
        ("guard", 'key = f"new-source-request-{uuid.uuid4().hex[:12]}"', "core/NumberReplacer", occurrence): (
            f"{digits} hex digits of a fresh UUID instead of 12: the key only has to be unique, and nothing reads "
            "its length"
        )
        for occurrence, digits in ((0, 13), (1, 11))
    },
    ("guard", "if len(created) != self.creates:", "core/ReplaceComparisonOperator_NotEq_Gt", 0): (
        "created > asked: fewer records than a change asks for cannot come out of a structured change (each "
        "create_record writes one record line, whose ID the transaction parses back, or is refused: tried "
        "with headings, fences, footnote- and separator-like content); more can, and > still refuses them "
        "(test_the_guard_alone_refuses_a_change_that_would_create_more_records_than_it_asks)"
    ),
    **{
        (
            "guard",
            'elif block.kind == "footnote" and (label := _NOTE_LABEL.match(block.lines[0])):',
            f"core/ReplaceComparisonOperator_Eq_{op}",
            5,
        ): (
            f"a block kind {'at or before' if op == 'LtE' else 'at or after'} 'footnote' whose first line is a "
            "footnote label is a footnote: the parser makes every line that starts '[^label]:' a footnote "
            "block before any other kind can take it (blank, break, code, comment, frontmatter and paragraph "
            "blocks start otherwise; headings and records are taken by the branches above)"
        )
        for op in ("LtE", "GtE")
    },
    (
        "lock",
        "return [_text(answer[i + 1]) for i in range(0, len(answer), 2)]",
        "core/ReplaceBinaryOperator_Add_Sub",
        1,
    ): (
        "answer[i - 1] instead of answer[i + 1] over the even i of [field, payload, …]: the payloads rotated by "
        "one (the last first): the same events taken back, and their order is not promised"
    ),
    ("lock", "while not self.stopped.wait(self.ttl / 3):", "core/NumberReplacer", 0): (
        "a quarter of the TTL between extensions instead of a third: the lease is extended more often, never "
        "lapses, and never reaches further than one TTL (the tests bound the count: 5 to 12 over 2.5 s)"
    ),
    ("lock", "self._released = False", "core/ReplaceFalseWithTrue", 1): (
        "the flag's first value: hold() sets it False before any use, and before a hold take_handovers answers "
        "[] on the missing lease alone"
    ),
    ("lock", "self._released = True", "core/ReplaceTrueWithFalse", 4): (
        "not noting that the Lua step released the lock: hold() then releases again, which redis-py refuses "
        "for a token not its own (logged, caught): one more round trip, nothing else"
    ),
    ("guard", "chain.append((block.level, block.lines[0], False))", "core/NumberReplacer", 7): (
        "lines[-1] instead of lines[0] of a heading block: the parser makes every heading a block of one line"
    ),
    (
        "transaction",
        'elif change.action == "update" and change.path not in base.topic_shas:',
        "core/ReplaceComparisonOperator_Eq_GtE",
        2,
    ): "action >= 'update': an action is create, delete or update, and only update sorts at or after it",
    (
        "transaction",
        "if count > 1 or (owner is not None and owner not in changed):",
        "core/ReplaceComparisonOperator_Gt_NotEq",
        0,
    ): "count != 1 for count > 1: a Counter of the IDs present holds no count below 1",
    (
        "transaction",
        "return set(self.git.list_files(base.tree, TIMELINE)) != set(base.timeline_members)",
        "core/ReplaceComparisonOperator_NotEq_IsNot",
        3,
    ): (
        "two new sets are never the same object: every Timeline file is rendered again on every change, and only "
        "those whose bytes differ are written (test_a_change_lists_and_writes_only_the_files_whose_bytes_it_changes): "
        "time, not outcome"
    ),
    ("forget", "@dataclass(frozen=True, slots=True)", "core/ReplaceTrueWithFalse", 0): (
        "frozen=False on Selection: nothing assigns to a selection's fields, and none is hashed"
    ),
    ("forget", "@dataclass(frozen=True, slots=True)", "core/ReplaceTrueWithFalse", 1): (
        "slots=False on Selection: a selection then carries a __dict__, which nothing reads; frozen still "
        "refuses every assignment"
    ),
    (
        "forget",
        "settled = {r.memory_id for r in [*deleted, *mixed]} | asked",
        "core/ReplaceBinaryOperator_BitOr_BitXor",
        1,
    ): (
        "^ for |: the records the owner's own changes name and those the forget changes are disjoint here (a "
        "forget that would change one of them is refused just above), and for disjoint sets ^ is |"
    ),
    ("forget", "*,", "core/ReplaceBinaryOperator_Mul_Div", 0): (
        "forget()'s keyword-only marker `*` as the positional-only marker `/` after ws and selection: every call "
        "passes why, by, also, dry_run and store by keyword, so every call binds the same"
    ),
    **{
        ("install", "@dataclass(frozen=True, slots=True)", "core/ReplaceTrueWithFalse", occurrence): (
            f"{flag}=False on InstallState: nothing assigns to a state's fields (a new state is built), and none "
            "is hashed"
        )
        for occurrence, flag in ((0, "frozen"), (1, "slots"))
    },
    (
        "install",
        'payload = json.dumps({"tree": state.tree, "commit": state.commit}, sort_keys=True)',
        "core/ReplaceTrueWithFalse",
        2,
    ): "the state's keys in insertion order: every reader parses the JSON, none compares its bytes",
    (
        "install",
        "write_file_synced(txn / str(index), data, mode=mode, sync=False)",
        "core/ReplaceFalseWithTrue",
        0,
    ): "an fsync per staged file on top of the one barrier for all of them before the journal: time, not outcome",
    ("install", "if head != commit:", "core/ReplaceComparisonOperator_NotEq_IsNot", 0): (
        "head and the journal's commit are equal only when recovery finishes an install whose ref already moved "
        "(a crash at ref-updated): the update is tried again, git's compare-and-swap from the parent refuses it, "
        "the state is written without its commit, and reconcile_git, in the same recover(), records head, as "
        "the != path would have (test_crash kills at ref-updated)"
    ),
    ("install", "shutil.rmtree(txn, ignore_errors=True)", "core/ReplaceTrueWithFalse", 6): (
        "the transaction folder always exists here: made before the journal names it, removed only after the "
        "journal is gone (a crash between leaves no journal, and recover() removes the folder)"
    ),
    **{
        (
            "install",
            _PRUNE,
            f"core/ReplaceComparisonOperator_NotEq_{op}",
            occurrence,
        ): why
        for op, occurrence, why in (
            ("Gt", 1, "parent > root for a folder inside the workspace is parent != root (a path follows its prefix)"),
            ("Gt", 2, "folder > root for a folder inside the workspace is folder != root"),
            ("GtE", 2, "folder >= root differs from != only at the root itself, never empty (.git, .scriptorium)"),
            ("IsNot", 2, "folder is not root differs from != only at the root itself, which is never empty"),
        )
    },
    ("guard", 'self.direct = principal.scope == "write"', "core/ReplaceComparisonOperator_Eq_GtE", 0): (
        "scope >= 'write': of the scopes (owner, runtime, propose, write) only 'write' sorts at or after it"
    ),
    ("guard", "if refused.reason == ReasonCode.INVALID_SOURCE:", "core/ReplaceComparisonOperator_Eq_Is", 1): (
        "an error's reason is a ReasonCode member (typed so; the default is one too), and members are singletons"
    ),
    ("guard", "if len(created) != self.creates:", "core/ReplaceComparisonOperator_NotEq_IsNot", 0): (
        "counts of the records one change creates are small ints, of which CPython keeps one object each"
    ),
    ("guard", 'elif block.kind == "record":', "core/ReplaceComparisonOperator_Eq_GtE", 4): (
        "kind >= 'record': no block kind sorts after 'record'"
    ),
    (
        "guard",
        'elif block.kind == "footnote" and (label := _NOTE_LABEL.match(block.lines[0])):',
        "core/NumberReplacer",
        15,
    ): (
        "a footnote's last line for its first: a staged topic's footnotes are citation definitions of one line "
        "(the normalizer refuses a definition with a continuation line: it has no citation definition)"
    ),
    ("transaction", "@dataclass(slots=True)", "core/ReplaceTrueWithFalse", 2): (
        "slots=False on Plan: a plan then carries a __dict__, which nothing reads; every attribute it is given "
        "is a declared field"
    ),
    ("transaction", "force_views: bool = False,", "core/ReplaceFalseWithTrue", 0): (
        "every plan rendering every view from its staged topics: the views the incremental path renders are "
        "those (test_properties and test_views_follow_record_dates_and_equal_a_rebuild compare them with a "
        "rebuild from scratch), and a rendered view equal to the installed one is no change: only the time "
        "differs"
    ),
    (
        "guard",
        'if self.principal.scope == "write" and audience != self.principal.requester:',
        "core/ReplaceComparisonOperator_Eq_GtE",
        2,
    ): "scope >= 'write': of the scopes (owner, runtime, propose, write) only 'write' sorts at or after it",
    ("guard", 'if block.kind == "heading":', "core/ReplaceComparisonOperator_Eq_Is", 3): (
        "a block's kind is one of the parser's string literals, which CPython interns: the same object as this "
        "literal whenever they are equal"
    ),
    ("transaction", "removed = old_ids - new_ids", "core/ReplaceBinaryOperator_Sub_BitXor", 2): (
        "old ^ new adds the IDs only the changed topics' new text holds: the records this change creates (an "
        "ID it invents is refused, one moved between two changed topics is in both sets), and no installed "
        "record links to an ID that does not exist yet (every installed link resolves), so no more links are found"
    ),
    **{
        ("transaction", "@dataclass(frozen=True, slots=True)", "core/ReplaceTrueWithFalse", occurrence): (
            f"{flag}=False on ViewSettings: nothing assigns to its fields (the workspace builds it once), none "
            "is hashed, and nothing reads a __dict__"
        )
        for occurrence, flag in ((0, "frozen"), (1, "slots"))
    },
    (
        "guard",
        'if self.direct and self.audience(staged, record) != (self.principal.requester or ""):',
        "core/ReplaceComparisonOperator_NotEq_Lt",
        2,
    ): (
        "audience < requester: every source the record cites passed the check above, so its audience is shared "
        "('') or the requester's own, and for those < and != agree ('' sorts before any name)"
    ),
    **{
        ("guard", line, "core/ReplaceComparisonOperator_Eq_Is", occurrence): (
            "a block's kind is one of the parser's string literals, which CPython interns: the same object as "
            "this literal whenever they are equal"
        )
        for line, occurrence in (
            ('elif block.kind == "record":', 4),
            ('elif block.kind == "footnote" and (label := _NOTE_LABEL.match(block.lines[0])):', 5),
        )
    },
    **{
        ("lock", "recorded = _recorded(fence_file) if acquired else 0", "core/NumberReplacer", n): (
            "the recorded token of a lock not acquired: nothing reads it (the comparison below needs acquired, "
            "and LockHeld is raised before the lease is used)"
        )
        for n in (8, 9)
    },
    (
        "transaction",
        'elif change.action == "create" and change.path in base.topic_shas:',
        "core/ReplaceComparisonOperator_Eq_LtE",
        1,
    ): "action <= 'create': an action is create, delete or update, and only create sorts at or before it",
    ("lock", 'super().__init__(daemon=True, name="scriptorium-lock-watchdog")', "core/ReplaceTrueWithFalse", 0): (
        "a watchdog that is not a daemon thread: hold()'s finally sets its stop event, which ends its wait at "
        "once, so no process leaving hold() waits on it (and a killed process ends every thread alike)"
    ),
    ("lock", "while not self.stopped.wait(self.ttl / 3):", "core/NumberReplacer", 1): (
        "accepted: half the TTL between extensions instead of a third: each extension still resets the lease "
        "to a full TTL with half of it to spare, so it never lapses here; the third is margin for a slow Redis, "
        "which no test can time on a shared machine without flaking (the count test bounds it: 5 to 12 over "
        "2.5 s)"
    ),
    (
        "lock",
        "recorded = int(self.path.read_text()) if self.path.exists() else 0",
        "core/NumberReplacer",
        3,
    ): "-1 for no recorded token instead of 0: tokens start at 1 (an increment from 0), so neither is ever above one",
    **{
        ("lock", "token = int(self.client.incr(self.fence_key)) if acquired else 0", "core/NumberReplacer", n): (
            "the token of a lock not acquired: nothing reads it (LockHeld is raised before any lease is handed out)"
        )
        for n in (6, 7)
    },
    **{
        ("lock", line, f"core/ReplaceBinaryOperator_Add_{op}", occurrence): (
            f"i {sign} 1 for i + 1: i runs over even numbers only, and for those the two are equal"
        )
        for line, occurrence in (
            ("return [(_text(answer[i]), _text(answer[i + 1])) for i in range(0, len(answer), 2)]", 0),
            ("return [_text(answer[i + 1]) for i in range(0, len(answer), 2)]", 1),
        )
        for op, sign in (("BitXor", "^"), ("BitOr", "|"))
    },
    (
        "lock",
        "recorded = int(self.path.read_text()) if self.path.exists() else 0",
        "core/NumberReplacer",
        2,
    ): "1 for no recorded token instead of 0: tokens start at 1, so neither is ever above one",
    ("lock", "@property", "core/RemoveDecorator", 0): (
        "the Rooted protocol's root as a plain method: the protocol is read by the type checker only (no "
        "isinstance check); the workspaces the lock is given have root as a property or an attribute either way"
    ),
    ("lock", "current = int(self.client.get(self.fence_key) or 0)", "core/NumberReplacer", 5): (
        "-1 for a counter Redis lost instead of 0: tokens start at 1, so neither equals a holder's token and "
        "the install is refused either way (the +1 mutant is killed: tests/cluster/test_fencing.py)"
    ),
    ("lock", "return 0", "core/NumberReplacer", 39): (
        "-1 for a recorded token that cannot be read instead of 0: tokens start at 1, so neither is at or above one"
    ),
    (
        "transaction",
        "if force or CORE_SOURCE in changed or self.git.lookup(base.tree, CORE_VIEW) is None:",
        "core/ReplaceComparisonOperator_Is_IsNot",
        10,
    ): (
        "accepted: the core view rendered again on every change while it exists, not only when it is missing: "
        "rendered from the same core topic within the same budget it is the installed file byte for byte, and "
        "one equal to the installed file is no change (only time; a new budget is applied by rebuild_views)"
    ),
    ("transaction", "for record in before ^ after:", "core/ReplaceBinaryOperator_BitXor_BitOr", 0): (
        "every record of a changed topic, not only those that differ, names its Timeline file: those files are "
        "rendered from the staged topics either way, and one equal to the installed file is no change"
    ),
}
"""Survivors triaged as equivalent — they change nothing the module promises: (module, the mutated line as
written, operator, occurrence) → why. Keyed by the exact line and cosmic-ray's occurrence, so an edit to the
line makes the entry stale and the mutant counts as a survivor again, never hidden. They are listed in the
output and left out of ``killed_share`` (the usual mutation score)."""
