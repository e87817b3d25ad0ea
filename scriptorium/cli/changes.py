"""``scriptorium memory update | get | log | revert | core``: the modification interface at the shell."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scriptorium.cli.output import emit
from scriptorium.cli.parser import Declare
from scriptorium.errors import InvalidArgument, NotFound

if TYPE_CHECKING:  # the handlers import what they run on: the parser loads none of it (issue 56)
    from scriptorium.settings import Settings
    from scriptorium.workspace import MemoryWorkspace, TxnResult


def _open(settings: Settings) -> MemoryWorkspace:
    from scriptorium.workspace.workspace import MemoryWorkspace

    return MemoryWorkspace(settings.memory_dir, settings.workspace_config())


def _result(args: argparse.Namespace, result: TxnResult) -> int:
    human = (
        f"revision {result.revision[:12]}: {len(result.changed_files)} file(s) changed"
        if result.changed
        else f"nothing changed (revision {result.revision[:12]})"
    )
    emit(args, result.to_dict(), human)
    return 0


def cmd_update(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.changes.update import update as update_memory
    from scriptorium.schemas.changes import parse_update

    raw = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    request = parse_update(raw)
    arguments = request.arguments()
    arguments["dry_run"] = arguments["dry_run"] or args.dry_run
    with _open(settings) as ws:
        result = update_memory(ws, **arguments)
    if result.dry_run and not args.json:
        print(result.diff.rstrip("\n") or "(no topic changes)")
    return _result(args, result)


def cmd_get(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.access.scope import visible_record
    from scriptorium.audience import OWNER, viewer_for
    from scriptorium.recall.branches import shared_view

    with _open(settings) as ws:
        if args.target.startswith("topics/"):
            text = ws.read_topic(args.target)
            emit(args, {"path": args.target, "content": text}, text.rstrip("\n"))
            return 0
        viewer = viewer_for(args.as_requester) if args.as_requester else OWNER
        payload = visible_record(ws, args.target, viewer, shared_view(settings.session_store_url))
        where = " › ".join([payload["topic_path"], *payload["headings"]])
        branch = f"  [{payload['branch']}]" if payload["branch"] else ""
        if payload["audience"]:
            branch += f"  [audience: {', '.join(payload['audience'])}]"
        for origin in payload["origins"]:
            how = "continued from" if "continued_from" in origin else "spawned by"
            branch += f"  [{origin['session']} {how} {origin.get('continued_from') or origin.get('spawned_by')}]"
        emit(args, payload, f"{where}{branch}\n{payload['time'] or 'undated'}: {payload['content']}")
    return 0


def cmd_why(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.changes.provenance import provenance
    from scriptorium.recall.branches import shared_view

    with _open(settings) as ws:
        payload = provenance(ws, args.memory_id, shared_view(settings.session_store_url))
    found = payload["provenance"]
    lines = [f"{payload['memory_id']}  {' › '.join([payload['topic_path'], *payload['headings']])}"]
    lines.append(f"{payload['time'] or 'undated'}: {payload['content']}")
    for source in found["sources"]:
        lines.append(
            f"  cites {source['source']}  ({source['role']}, {source['time']}, {source['trust']})"
            + (f"  origin {source['origin']}" if source["origin"] else "")
        )
    for label in ("introduced", "last_changed"):
        if (commit := found[label]) is not None:
            lines.append(
                f"  {label.replace('_', ' ')}: {commit['commit'][:12]}  {commit['at'][:19]}  {commit['message']}"
            )
    emit(args, payload, "\n".join(lines))
    return 0


def cmd_sources(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.changes.provenance import conversation_sources

    with _open(settings) as ws:
        payload = conversation_sources(ws, thread=args.thread, session=args.session)
    lines = [
        f"{s['time']}  {s['source']}  {s['role']}  {s['trust']}  cited by {', '.join(s['cited_by']) or 'no record'}"
        for s in payload["sources"]
    ]
    emit(args, payload, "\n".join(lines))
    return 0


_TRAILERS = ("Requested-by", "Approved-by", "Rejected-by")


def cmd_log(args: argparse.Namespace, settings: Settings) -> int:
    trailers = [f"%(trailers:key={t},valueonly,separator=%x2c)" for t in _TRAILERS]
    fields = "%x1f".join(["%H", "%T", "%cI", "%s", *trailers])
    with _open(settings) as ws:
        out = ws.git.repo.git.log(f"-{args.limit}", f"--format={fields}%x1e", "main")
    entries = []
    for line in filter(None, (chunk.strip("\n") for chunk in out.split("\x1e"))):
        commit, tree, when, subject, *values = line.split("\x1f")
        entry: dict[str, Any] = {"commit": commit, "revision": tree, "at": when, "message": subject}
        for key, value in zip(_TRAILERS, values, strict=True):
            if value.strip():
                entry[key.lower().replace("-", "_")] = value.strip()
        entries.append(entry)
    human = "\n".join(
        f"{e['commit'][:12]}  {e['at'][:19]}  {e['message']}"
        + "".join(f"  [{k.replace('_', ' ')} {e[k]}]" for k in ("requested_by", "approved_by", "rejected_by") if k in e)
        for e in entries
    )
    emit(args, {"commits": entries}, human)
    return 0


def cmd_revert(args: argparse.Namespace, settings: Settings) -> int:
    from git.exc import GitCommandError

    from scriptorium.changes.update import apply_patch

    with _open(settings) as ws:
        git = ws.git.repo.git
        try:
            commit = git.rev_parse("--verify", "-q", f"{args.commit}^{{commit}}")
            parent = git.rev_parse("--verify", "-q", f"{commit}^")
        except GitCommandError as exc:
            raise NotFound(f"no commit {args.commit} with a parent in this workspace") from exc
        reverse = git.diff("--no-color", "--full-index", commit, parent, "--", "topics") + "\n"
        if not reverse.strip():
            raise InvalidArgument(f"commit {commit[:12]} changed no topics; nothing to revert")
        # Records that commit created are explicitly deleted by its revert.
        before = _ids_at(ws, parent)
        after = _ids_at(ws, commit)
        result = apply_patch(ws, reverse, message=f"Revert {commit[:12]}", deletions=after - before)
    return _result(args, result)


def _ids_at(ws: MemoryWorkspace, commit: str) -> set[str]:
    from scriptorium.workspace.topics import parse_topic

    tree = ws.git.commit_tree(commit)
    ids: set[str] = set()
    for path, sha in ws.git.list_files(tree, "topics").items():
        ids |= parse_topic(path, ws.git.read_blob(sha).decode("utf-8")).block_ids()
    return ids


def cmd_core(args: argparse.Namespace, settings: Settings) -> int:
    with _open(settings) as ws:
        core = ws.core_rendering()
    payload = {
        "content": core.text,
        "tokens": core.tokens,
        "budget": core.budget,
        "included_ids": list(core.included_ids),
        "omitted_ids": list(core.omitted_ids),
    }
    emit(
        args,
        payload,
        f"{core.text.rstrip()}\n\n({core.tokens} / {core.budget} tokens, {len(core.omitted_ids)} omitted)",
    )
    return 0


def _proposals(settings: Settings, ws: MemoryWorkspace) -> Any:
    from scriptorium.access.requests import Proposals

    return Proposals(ws, settings.state)


def cmd_proposals(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.audience import OWNER_PRINCIPAL

    with _open(settings) as ws:
        found = _proposals(settings, ws).listed(OWNER_PRINCIPAL, args.only)
    lines = [
        f"{p['id']}  {p['state']:<8}  {p['created'][:19]}  {p['requester'] or 'token ' + str(p['token_id'])}"
        f"{'  [token revoked]' if p['token_revoked'] else ''}  {p['request'].get('message', 'Update memory')}"
        f"  ({len(p['dry_run']['changed_files'])} file(s))"
        for p in found
    ]
    emit(args, {"proposals": found}, "\n".join(lines) or "no proposals")
    return 0


def cmd_proposal(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.audience import OWNER_PRINCIPAL

    with _open(settings) as ws:
        found = _proposals(settings, ws).one(OWNER_PRINCIPAL, args.id)
    refusal = f"\nrefused: {found['refusal']['reason']}: {found['refusal']['message']}" if found["refusal"] else ""
    head = f"{found['id']}  {found['state']}  from {found['requester'] or 'token ' + str(found['token_id'])}{refusal}"
    emit(args, found, f"{head}\n{found['dry_run'].get('diff', '').rstrip()}")
    return 0


def cmd_approve(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.audience import OWNER_PRINCIPAL

    with _open(settings) as ws:
        decided = _proposals(settings, ws).approve(args.id, OWNER_PRINCIPAL)
    revision = (decided["result"] or {}).get("revision") or ""
    emit(args, decided, f"approved {decided['id']} (revision {revision[:12]})")
    return 0


def cmd_reject(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.audience import OWNER_PRINCIPAL

    with _open(settings) as ws:
        decided = _proposals(settings, ws).reject(args.id, OWNER_PRINCIPAL, args.why)
    emit(args, decided, f"rejected {decided['id']}")
    return 0


def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.access.requests import forget_request
    from scriptorium.schemas.changes import ForgetRequest

    changes: list[Any] = []
    if args.with_changes:
        raw = sys.stdin.read() if args.with_changes == "-" else Path(args.with_changes).read_text(encoding="utf-8")
        changes = json.loads(raw).get("memory_changes") or []
        if not changes:
            raise InvalidArgument("--with takes a body of memory_changes (the links to remove)")
    body = _forget_body(
        ForgetRequest,
        thread=args.thread,
        session=args.session,
        sources=args.source or [],
        why=args.why,
        dry_run=args.dry_run,
        purge_history=args.purge_history,
        memory_changes=changes,
    )
    with _open(settings) as ws:
        payload = forget_request(ws, body, settings.session_store_url)
    verb_ = "would forget" if args.dry_run else "forgot"
    lines = [f"{verb_} {len(payload['sources'])} source(s); {len(payload['deleted'])} record(s) deleted"]
    if payload["deleted_shared"]:
        lines.append(
            f"{len(payload['deleted_shared'])} of them cited other sources too and go whole"
            " (their text may carry what is forgotten) — write them again from those sources if you need them:"
        )
        for d in payload["deleted_shared"]:
            lines.append(f"  ^{d['memory_id']}  {d['topic_path']}" + (f": {d['content']}" if "content" in d else ""))
            lines.append(f"    also cited: {', '.join(d['other_sources'])}")
    if args.dry_run and payload["transaction"].get("diff"):
        lines.append(payload["transaction"]["diff"].rstrip())
    emit(args, payload, "\n".join(lines))
    return 0


def cmd_redact(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.changes.redact import redact_memory
    from scriptorium.redaction import state_redactor
    from scriptorium.workspace.purge import purge_secrets

    redactor = state_redactor(settings.state, settings.redact_patterns)  # asked for: on even when intake's is off
    store = settings.session_store()
    try:
        with _open(settings) as ws:
            payload = redact_memory(ws, redactor, store=store, dry_run=args.dry_run)
            if args.purge_history:
                known = payload.pop("replacements")
                payload["purge"] = purge_secrets(ws, redactor, known, dry_run=args.dry_run)
            else:
                payload.pop("replacements")
    finally:
        store.close()
    verb_ = "would redact" if args.dry_run else "redacted"
    store_nodes = (payload["derived"]["store"] or {}).get("nodes_redacted", 0)
    lines = [
        f"{verb_} {payload['secrets']} secret(s): {len(payload['sources'])} source(s), "
        f"{len(payload['records'])} record(s), {store_nodes} session store row(s)"
    ]
    if payload["topic_paths_with_secrets"]:
        lines.append("topic paths holding a secret (rename them: memory update):")
        lines += [f"  {path}" for path in payload["topic_paths_with_secrets"]]
    if "purge" in payload:
        lines.append(f"history: {payload['purge']['commits_rewritten']} commit(s) rewritten")
    emit(args, payload, "\n".join(lines))
    return 0


def _forget_body(model: Any, **fields: Any) -> Any:
    from pydantic import ValidationError

    try:
        return model(**fields)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(body)'}: {e['msg']}" for e in exc.errors())
        raise InvalidArgument(f"invalid forget request: {details}") from exc


def register(verb: Declare) -> None:
    """Add these verbs through the CLI's ``verb(name, handler, help, arguments)``."""

    def update(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("file", help="JSON request body ('-' for stdin)")
        sub.add_argument("--dry-run", action="store_true", help="validate only: print the diff, install nothing")

    verb("update", cmd_update, "apply memory_changes, whole-topic changes or a unified diff (JSON body)", update)

    def get(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("target", help="a memory_id such as m-0mx3otj1u005, or a topic path")
        sub.add_argument("--as", dest="as_requester", metavar="NAME", help="answer as requester NAME would be answered")

    verb("get", cmd_get, "show one record (by memory_id) or one topic (by topics/… path)", get)
    verb(
        "why",
        cmd_why,
        "where one record came from: its sources as archived, the commits that wrote it",
        lambda sub: sub.add_argument("memory_id", help="a memory_id such as m-0mx3otj1u005"),
    )

    def sources(sub: argparse.ArgumentParser) -> None:
        which = sub.add_mutually_exclusive_group(required=True)
        which.add_argument("--thread", help="provider/thread, as in the source identities")
        which.add_argument("--session", help="a session ID (under any provider)")

    verb("sources", cmd_sources, "what was archived from one conversation, and which records cite it", sources)
    verb(
        "log",
        cmd_log,
        "list the workspace's commits, newest first",
        lambda sub: sub.add_argument("-n", "--limit", type=int, default=20, help="how many commits"),
    )
    verb(
        "revert",
        cmd_revert,
        "undo one earlier write as a new, validated transaction",
        lambda sub: sub.add_argument("commit", help="the commit to undo (from `memory log`)"),
    )
    verb("core", cmd_core, "show the resident block as injected, with its token count and budget")
    verb(
        "proposals",
        cmd_proposals,
        "the hold queue: changes propose tokens sent, to approve or reject",
        lambda sub: sub.add_argument(
            "--only", choices=["held", "approved", "rejected", "stale"], help="only proposals in this state"
        ),
    )
    verb(
        "proposal",
        cmd_proposal,
        "one proposal, with the diff it would make",
        lambda sub: sub.add_argument("id", help="a proposal ID such as p-0123456789ab"),
    )
    verb("approve", cmd_approve, "apply a held proposal on the current revision", lambda sub: sub.add_argument("id"))

    def reject(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("id")
        sub.add_argument("--why", default="", help="a note kept with the proposal")

    verb("reject", cmd_reject, "discard a held proposal (the history records it)", reject)

    def forget(sub: argparse.ArgumentParser) -> None:
        what = sub.add_mutually_exclusive_group(required=True)
        what.add_argument("--thread", help="provider/thread")
        what.add_argument("--session", help="a session ID (under any provider)")
        what.add_argument("--source", nargs="+", help="provider/thread/message identities (or sources/… paths)")
        sub.add_argument("--why", default="", help="kept in the tombstone and the commit (never quote the text)")
        sub.add_argument("--dry-run", action="store_true", help="show what would go and the diff; change nothing")
        sub.add_argument("--purge-history", action="store_true", help="also rewrite git history without the text")
        sub.add_argument(
            "--with",
            dest="with_changes",
            metavar="FILE",
            help="memory_changes applied in the same transaction ('-': stdin)",
        )

    verb(
        "forget", cmd_forget, "forget a conversation or some sources for real: records, sources, derived state", forget
    )

    def redact(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
        sub.add_argument(
            "--purge-history", action="store_true", help="then rewrite git history so that no commit holds a secret"
        )

    verb(
        "redact",
        cmd_redact,
        "take secrets stored before redaction out of the memory, the session store and history",
        redact,
    )
