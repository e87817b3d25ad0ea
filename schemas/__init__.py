"""Pydantic models at the edges: bus events and results (JSON only, versioned), request bodies, and the
REST API's answers and error body (:mod:`scriptorium.schemas.api`).

``schemas/json/`` holds their JSON Schemas (``python -m scriptorium.schemas.export``).
The domain core never imports this package.
"""
