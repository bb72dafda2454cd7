"""Gemini CLI headless ``--output-format stream-json`` transcripts (the ``gemini_cli_stream`` importer).

``gemini -p ... --output-format stream-json`` writes one JSON event a line to stdout
(google-gemini/gemini-cli ``packages/core/src/output/types.ts`` and ``packages/cli/src/
nonInteractiveCli.ts``, read at 5411f113cafae26161b4969b0237b8e1e024e2c2, 2026-08-21; the events
date from #10883 and have kept their shape since, ``stats.models`` added by #21839):

- ``init`` {session_id, model}: one CLI run; a file holding several runs (a harness appending
  each run's stdout) holds several sessions, one per ``init``;
- ``message`` {role user|assistant, content, delta?}: the user's prompt once, then the model's
  text as ``delta`` chunks of the reply being streamed;
- ``tool_use`` {tool_name, tool_id, parameters}: a call the model asked for. Every call of one
  model response is emitted before any runs, then the results: the text and tool calls between
  two results (or a prompt) are one model call, one assistant message;
- ``tool_result`` {tool_id, status success|error, output?, error?}: ``output`` is the tool's
  ``resultDisplay`` (what the terminal shows: "" for a ``read_file``), not the
  ``functionResponse`` the model read, so a tool message holds less than the model saw
  (``meta["output_is_display"]``);
- ``error`` {severity, message}: the CLI's warnings (loop detected, max turns): kept in the
  session's metadata, the model never read them;
- ``result`` {status, error?, stats}: the end of the run. ``stats`` (``convertToStreamStats``)
  are the run's totals over every model call of the session (``input_tokens`` = the sum of the
  calls' prompt tokens, ``cached`` and ``input`` its split, ``output_tokens``, ``tool_calls``,
  ``models`` per model): totals, never one call's figures, so no message gets a recorded usage;
  they go into the session's metadata, which ``ctxf check``'s ``totals`` sets beside ctxf's own
  figures. A ``result`` with ``status: error`` (an API error, a fatal tool error, a
  cancellation) is the run's failure: the session's outcome is ``failure`` and the error is kept.
  ``status: success`` says the CLI's loop ended, not that the task was done: the outcome stays
  unknown. A stream cut off before its ``result`` has no totals.

Lines before a run's ``init`` or after its ``result`` belong to no CLI run (an eval harness's own
prompt line, without the CLI's ``timestamp``): skipped and counted. An extra key on every line (a
harness's ``ts``) is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ...records import Message, Session, ToolCall
from .._sniffing import head_jsonl_records, looks_like_jsonl, mostly
from .._text import title_line
from ..base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_str,
    iter_jsonl,
    json_text,
    register,
)
from .importer import UUID_RE

EVENT_TYPES = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
OUTSIDE = "line outside a CLI run (before its init or after its result)"
DISPLAY_NOTE = ("the tool's resultDisplay as the CLI printed it, not the functionResponse the model read "
                "(read_file prints nothing, a shell command its output)")


def _is_event(r: Any) -> bool:
    """A record of the stream-json event schema (extra keys allowed: a harness adds ``ts``)."""
    if not isinstance(r, dict):
        return False
    t = r.get("type")
    if t == "init":
        return isinstance(r.get("session_id"), str) and isinstance(r.get("model"), str)
    if t == "message":
        return r.get("role") in ("user", "assistant") and isinstance(r.get("content"), str)
    if t == "tool_use":
        return isinstance(r.get("tool_name"), str) and isinstance(r.get("tool_id"), str) and "parameters" in r
    if t == "tool_result":
        return isinstance(r.get("tool_id"), str) and r.get("status") in ("success", "error")
    if t == "error":
        return isinstance(r.get("message"), str) and "severity" in r
    if t == "result":
        return r.get("status") in ("success", "error") and ("stats" in r or "error" in r)
    return False


@dataclass
class _Run:
    """One CLI run (from its ``init``) being read."""

    session_id: str
    model: str | None
    started_at: str | None
    messages: list[Message] = field(default_factory=list)
    text: list[str] = field(default_factory=list)  # the open model call's text deltas
    calls: list[ToolCall] = field(default_factory=list)  # the open model call's tool calls
    call_at: str | None = None
    names: dict[str, str] = field(default_factory=dict)  # tool_id -> tool_name
    answered: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    notices: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None

    def bump(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def flush(self) -> None:
        """Close the open model call: its text and tool calls as one assistant message."""
        if not self.text and not self.calls:
            return
        self.messages.append(Message(role="assistant", text="".join(self.text), tool_calls=tuple(self.calls),
                                     timestamp=self.call_at, model=self.model))
        self.text, self.calls, self.call_at = [], [], None

    def event(self, r: dict[str, Any]) -> None:
        t = r["type"]
        ts = as_str(r.get("timestamp"))
        self.bump(t)
        if t == "message":
            if r["role"] == "user":
                self.flush()
                self.messages.append(Message(role="user", text=r["content"], timestamp=ts))
            else:
                if not self.text and not self.calls:
                    self.call_at = ts
                self.text.append(r["content"])
                if r.get("delta") is not True:
                    self.bump("assistant message (whole)")
        elif t == "tool_use":
            if not self.text and not self.calls:
                self.call_at = ts
            tid = r["tool_id"]
            self.names[tid] = r["tool_name"]
            self.calls.append(ToolCall(name=r["tool_name"], arguments=json_text(r.get("parameters")), id=tid))
        elif t == "tool_result":
            self.flush()
            tid = r["tool_id"]
            err = as_dict(r.get("error"))
            out = r.get("output")
            text = out if isinstance(out, str) and out else as_str(err.get("message")) or json_text(out)
            meta: dict[str, Any] = {"status": r["status"], "output_is_display": True}
            if err:
                meta["error"] = {"type": err.get("type"), "message": err.get("message")}
            if tid not in self.names:
                meta["call_not_in_log"] = True
                self.bump("tool_result without its tool_use")
            self.answered.add(tid)
            self.messages.append(Message(role="tool", text=text, name=self.names.get(tid), tool_call_id=tid,
                                         timestamp=ts, meta=meta))
        elif t == "error":
            self.notices.append({"severity": r.get("severity"), "message": r["message"], "timestamp": ts})
        elif t == "result":
            self.flush()
            self.result = r

    def session(self, fmt: str, path: Path) -> Session:
        self.flush()
        res = self.result or {}
        error = as_dict(res.get("error")) if res else {}
        stats = as_dict(res.get("stats"))
        unanswered = [i for i in self.names if i not in self.answered]
        first = next((m for m in self.messages if m.role == "user" and m.text.strip()), None)
        metadata: dict[str, Any] = {
            "agent": "gemini-cli",
            "layout": "stream-json",
            "events": self.counts,
            "result": ({"status": res.get("status"), "error": error or None, "timestamp": res.get("timestamp")}
                       if res else None),
            "ended": ("result" if res else "the stream ends without a result event (cut off): no totals"),
            "stream_stats": stats or None,
            "stream_stats_what": ("the run's totals over all its model calls (result.stats): input_tokens is the "
                                  "sum of the calls' prompts, not one window" if stats else None),
            "notices": self.notices,
            "unanswered_tool_calls": unanswered,
            "tool_output": DISPLAY_NOTE if self.answered else None,
        }
        outcome = "unknown"
        if res.get("status") == "error":
            outcome = "failure"
            metadata["outcome_from"] = "the CLI's result event: status error (the run ended on an error)"
        return Session(
            external_id=self.session_id,
            format=fmt,
            messages=self.messages,
            title=title_line(first.text) if first else None,
            model=self.model,
            started_at=self.started_at,
            outcome=outcome,
            global_id=bool(UUID_RE.match(self.session_id)),
            metadata={k: v for k, v in metadata.items() if v not in (None, {}, [], "")},
        )


@register
class GeminiCliStream(Importer):
    """Gemini CLI headless ``--output-format stream-json`` output, one session per ``init``."""

    name = "gemini_cli_stream"
    description = ("Gemini CLI headless --output-format stream-json transcripts (init, message, tool_use, "
                   "tool_result, error, result events; one session per init)")
    extensions = (".jsonl", ".json", ".ndjson", ".log", ".txt")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        if not looks_like_jsonl(path, head):
            return False
        records = head_jsonl_records(head)
        # Every record an event of the schema (a harness may add a line of its own), one an init.
        return mostly(records, _is_event) and any(isinstance(r, dict) and r.get("type") == "init"
                                                  and _is_event(r) for r in records)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        run: _Run | None = None
        runs = 0
        for line, r in iter_jsonl(path, ctx):
            try:
                if not isinstance(r, dict):
                    raise TypeError(f"an event must be an object, not {type(r).__name__}")
                if not _is_event(r):
                    t = r.get("type")
                    if t in EVENT_TYPES:
                        raise ValueError(f"a {t!r} event lacks the fields the stream-json schema gives it")
                    ctx.skip(f"unknown event {t!r}" if isinstance(t, str) else "record without a type", unknown=True)
                    continue
                if r["type"] == "init":
                    if run is not None:
                        yield run.session(self.name, path)
                    runs += 1
                    run = _Run(session_id=r["session_id"], model=as_str(r.get("model")),
                               started_at=as_str(r.get("timestamp")))
                    run.bump("init")
                    continue
                if run is None or run.result is not None:
                    ctx.skip(OUTSIDE)
                    continue
                run.event(r)
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="event", line=line)
        if run is not None:
            yield run.session(self.name, path)
        elif not runs:
            from ...errors import InputError

            raise InputError("no init event: no Gemini CLI run in the file", where=str(path),
                             hint="a stream-json transcript starts each run with an init event; force another "
                             "format with --format")


def stats_totals(stats: Any) -> dict[str, int | None]:
    """The figures of a ``result.stats`` (for ``ctxf check``'s totals)."""
    s = as_dict(stats)
    return {k: as_int(s.get(k)) for k in ("input_tokens", "output_tokens", "cached", "input", "tool_calls")}


__all__ = ["GeminiCliStream", "stats_totals"]
