"""Rendering: rich tables per command, plots and the HTML report. Only here and in cli/ is rich imported."""
