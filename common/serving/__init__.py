"""waitress serving: the listener, connections (uid, deadlines, idle close), streamed answers, request threads."""
