"""The REST API, as routers by job; what they need (settings, the workspace, the guard) comes from the
app (:mod:`scriptorium.web.api.served`), and every JSON answer has its model (:mod:`scriptorium.schemas.api`).

* :mod:`~scriptorium.web.api.changes` — changes, the core's save, the hold queue, forgetting;
* :mod:`~scriptorium.web.api.reads` — records, their provenance, archived conversations, topics, the core;
* :mod:`~scriptorium.web.api.search` — search and status.
"""

from fastapi import APIRouter

from scriptorium.web.api import changes, reads, search

ROUTERS: tuple[APIRouter, ...] = (changes.router, reads.router, search.router)
