"""The runtime-side publisher: one call per event, from any Python runtime.

It sends Celery task messages (JSON only) carrying the event; it never
carries message bodies — workers reread session storage.
"""

from __future__ import annotations

from celery import Celery

from schemas.events import BackfillRequested, ReorganizeRequested, SessionIdle, TurnEnded
from workers.handling import TASK_FOR_EVENT

Event = TurnEnded | SessionIdle | ReorganizeRequested | BackfillRequested


class Publisher:
    """Publishes events to the cluster's broker."""

    def __init__(self, broker_url: str) -> None:
        self.app = Celery("scriptorium-publisher", broker=broker_url)
        self.app.conf.update(task_serializer="json", accept_content=["json"], broker_connection_retry=True)

    def publish(self, event: Event) -> str:
        """Send one event; returns the task ID (the key of its result in the result backend)."""
        result = self.app.send_task(TASK_FOR_EVENT[event.type], args=[event.model_dump(mode="json")])
        return str(result.id)

    def turn_ended(self, workspace: str, session_id: str) -> str:
        return self.publish(TurnEnded(workspace=workspace, session_id=session_id))

    def session_idle(self, workspace: str, session_id: str) -> str:
        return self.publish(SessionIdle(workspace=workspace, session_id=session_id))

    def reorganize(self, workspace: str) -> str:
        return self.publish(ReorganizeRequested(workspace=workspace))

    def backfill(self, workspace: str) -> str:
        return self.publish(BackfillRequested(workspace=workspace))

    def close(self) -> None:
        self.app.close()
