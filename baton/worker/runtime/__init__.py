"""The processing loop of one worker and what it drives: tasks, commits, producer, flips, health."""
