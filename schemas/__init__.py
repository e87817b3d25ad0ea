"""Pydantic models at the edges: bus events and results (JSON only, versioned).

``schemas/json/`` holds their JSON Schemas (``python -m scriptorium.schemas.export``).
The domain core never imports this package.
"""
