"""Rendering: rich tables per command, plots and the HTML report. Only here and in cli/ is rich imported.

This package exports what every view shares (``common``: the consoles, ``safe`` / ``preview``
for inert log text (``inert.inert``, the one neutralizer), ``fit_columns``, ``print_json``,
``wrote``, ``model_notes``, the block ``curve``). Each
command's views live in a module named for it, imported by the command that shows them:
``ingest`` (and ``formats``), ``sessions`` (and ``show``), ``replay`` (and the window of
``--at``), ``config`` (``models``, ``config show``), ``facts``, ``drift``, ``diverge``,
``audit``; ``html`` is ``ctxf report``; ``plots*`` write PNG/SVG charts with matplotlib,
imported only when a plot is asked for; ``progress`` is the one progress bar the long commands
draw on stderr. Every view takes a console and the command's JSON-shaped result, so what a
table shows is what ``--json`` prints.
"""

from .common import (
    curve,
    fit_columns,
    hidden_columns_note,
    message_text,
    min_width,
    model_notes,
    preview,
    print_json,
    safe,
    stderr_console,
    stdout_console,
    step_label,
    wrote,
)

__all__ = [
    "curve", "fit_columns", "hidden_columns_note", "message_text", "min_width", "model_notes", "preview",
    "print_json", "safe", "stderr_console", "stdout_console", "step_label", "wrote",
]
