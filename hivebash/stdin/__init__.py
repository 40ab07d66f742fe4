"""A task's input: /dev/null, a pipe, or a pseudo-terminal, and the control keys."""
