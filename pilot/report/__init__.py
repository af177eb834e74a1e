"""``pilot report``: read a finished (or running) run's files and tell where the time went."""
