"""The cluster edge: the Celery app, thin tasks, the Redis workspace lock with fencing, the result stream."""
