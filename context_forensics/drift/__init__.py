"""Drift: the goal, the per-step similarity curve and its verdict bands."""
