"""The Typer app: one module per command group. The only place typer is imported.

Importing this package registers every command on ``app``, in the order ``ctxf --help`` lists
them; ``main`` is the console-script entry point.
"""

# Not sorted (I001): the import order is the order `ctxf --help` lists the commands in.
from . import store, replay, config  # noqa: F401, I001  (ingest … formats, replay/models, config)
from . import audit, check, diverge, drift, explain, facts, view  # noqa: F401
from .common import app, main

__all__ = ["app", "main"]
