"""A task's files in the state directory: output files, records, the room an end needs, spare files."""
