"""Pydantic models at the edges: queue events, results and API bodies (JSON only, versioned).

Empty until the cluster and API land; the domain core never imports this package.
"""
