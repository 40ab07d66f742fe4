"""claude's transcripts: where they are, what each says, the index kept across restarts, readable logs."""
