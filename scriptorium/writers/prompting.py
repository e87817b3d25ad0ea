"""What every model writer is told: the shipped prompt files and one batch's text."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

from scriptorium.writer_interface import Batch, Repair


def prompt(name: str) -> str:
    """A prompt file shipped with the package (``prompts/<name>.md``)."""
    return resources.files("scriptorium.writers").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def repair_text(repair: Repair | None) -> str:
    if repair is None:
        return ""
    return (
        "\n\nYour previous edit was rejected and nothing was installed. The topics below are the "
        f"installed ones again.\nReason: {repair.reason}: {repair.message}\nHow to fix: {repair.guidance}\n"
        f"Rejected text:\n{repair.rejected_text}\n"
    )


def branch_text(batch: Batch) -> str:
    """What the model is told when the conversation forked: which branch this is, what the others said."""
    context = batch.branch
    if context is None:
        return ""
    where = "the branch the conversation is on now" if context.status == "current" else "a branch the user left"
    lines = [
        f"This conversation forked: these messages are on {where} (the branches part after {context.fork}).",
        "Its records are alternatives to what the other branches decided, not additions to it. Where a",
        "message chooses between them, say so and cite both (e.g. 'Atlas uses FastAPI, chosen over Flask').",
    ]
    if context.siblings:
        lines.append("The other branches said (cite as [keyword](source_ref)):")
        lines += [f"[{ref}] {text[:300]}" for ref, text in context.siblings]
    return "\n".join(lines) + "\n\n"


def batch_prompt(batch: Batch, topic_paths: Sequence[str], repair: Repair | None = None) -> str:
    """The user message of one write: the conversation, where it forked, the topic files, the new
    messages with the ``source_ref`` each fact cites, and why the last attempt was rejected."""
    lines = [
        f"[{m.source_ref}] {m.node.role} at {m.node.created_at.isoformat()}:\n{m.node.content}" for m in batch.messages
    ]
    listing = "\n".join(topic_paths) or "(no topics yet)"
    return (
        f"Conversation: {batch.title}\n\n{branch_text(batch)}Topic files now:\n{listing}\n\nNew messages "
        "(cite each fact as [short keyword](source_ref) with the source_ref in brackets):\n\n"
        + "\n\n".join(lines)
        + repair_text(repair)
    )
