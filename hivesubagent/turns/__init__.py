"""A turn: one claude process, its command line, its stream, its table, its waits, its stall, what it did."""
