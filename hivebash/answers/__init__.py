"""What a request answers with: a task's view, the inline waits, progress, the answers' text, the list table."""
