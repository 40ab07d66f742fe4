"""The task model and its table: states, records, entries, the registry and its lock, todos, what the agent saw."""
