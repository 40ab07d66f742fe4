"""Where sessions run: their working directory, their git worktree, and the record of both."""
