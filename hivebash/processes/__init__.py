"""A task's processes: spawned, supervised by a worker, signalled, found, swept and reaped."""
