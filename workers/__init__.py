"""Celery app and thin task wrappers around core write passes (lock, fencing, outcome mapping).

Empty until the cluster lands.
"""
