"""Gemini CLI logs (``~/.gemini/tmp/<project>/``).

- ``chats/session-*.json``: one ``ConversationRecord`` (``messages[]`` of type user / gemini /
  info / error / warning); ``chats/session-*.jsonl`` (2026-): a metadata line, then message
  records (a later copy of an id replaces the earlier one), ``$set`` patches and ``$rewindTo``
  rewinds (``log``). Sub-agent chats are ``chats/<parentSessionId>/<sessionId>.jsonl``
  (``kind: "subagent"``): child sessions of the session named by their folder.
- ``checkpoint-<tag>.json`` (``/chat save``: ``{history}`` or a bare list of ``Content``) and
  ``checkpoints/*.json`` (written before a file-changing tool runs: ``clientHistory`` is the
  model client's history at that moment): each a session of exactly those Contents, the
  ground truth of what the model had been sent then.

Headless ``--output-format stream-json`` transcripts are another format (``stream``:
``gemini_cli_stream``): other records, one session per run, and only run totals for usage.

One session per file. A ``gemini`` record is one model call: its ``tokens`` are that call's
recorded usage (``convert``); each record keeps its own ``model`` (a session can switch model);
a ``$rewindTo`` becomes a ``history_edit`` marker (type ``rewind``, evicted) placed where it was
written, after the messages it took out, which stay for the calls that saw them.
"""

from __future__ import annotations

from .importer import GeminiCli
from .stream import GeminiCliStream

__all__ = ["GeminiCli", "GeminiCliStream"]
