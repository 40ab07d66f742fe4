"""Files in the state directory: claiming it, opening without links, whole writes, when writes reach the disk."""
