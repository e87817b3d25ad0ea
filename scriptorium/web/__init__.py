"""The web edge: the owner REST API (and, later, the Memory page)."""
