"""Cline, Roo Code and Kilo Code task folders (``globalStorage/<extension>/tasks/<id>/``).

One folder is one session: ``importer`` (sniff, the session and its metadata, which of the
three agents wrote it), ``history`` (``api_conversation_history.json``: the history the model
was sent, usage per call, Cline's deleted ranges and Roo's condense / truncation as recorded
history edits), ``ui`` (``ui_messages.json``: each call's usage and the edits it records) and
``uiconv`` (a session from ``ui_messages.json`` alone, which records no window).
"""

from .importer import Cline

__all__ = ["Cline"]
