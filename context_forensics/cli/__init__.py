"""The Typer app: one module per command group. The only place typer is imported."""

from .app import app, main

__all__ = ["app", "main"]
