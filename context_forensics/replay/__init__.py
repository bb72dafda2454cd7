"""Replay: the window of every model call under a model and an overflow policy (policies/)."""
