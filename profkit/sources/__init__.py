"""Sources turn the outside world (live tuning, logs, cache files, engine outputs) into tables."""
