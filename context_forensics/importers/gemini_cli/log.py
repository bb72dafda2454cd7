"""A Gemini CLI session file as the ordered list of what happened to its history.

Gemini CLI (packages/core/src/services/chatRecordingService.ts) writes a session either as one
``ConversationRecord`` (``session-*.json``, until 2026) or as JSONL (``session-*.jsonl``): a
metadata line (``sessionId``, ``projectHash``, ``startTime``, ``kind``), then one line per write
of a message record. A record is appended again whenever it changes (its tokens arrive, its tool
calls finish): the later copy of an id replaces the earlier one *in its place*, as the CLI's
loader does (a ``Map`` keyed by id). ``{"$set": {...}}`` patches the metadata; a ``$set`` holding
``messages`` replaces the whole history with that list (the CLI syncs it from the model's
history after a compression, a rollback or masking). ``{"$rewindTo": id}`` drops that message
and every one after it (``/rewind``); an id the history does not hold drops everything (the
loader's rule).

``read_log`` keeps every record that was ever in the history, in order, and puts an ``Edit``
where a rewind or a history replacement took records out, so the messages earlier calls saw
stay and the edit is a recorded event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import RECORD_ERRORS, ImportContext, as_str, iter_jsonl, load_json


@dataclass
class Slot:
    """One message record in the history (its latest copy), or an edit of the history."""

    record: dict[str, Any] | None = None
    line: int | None = None
    copies: int = 1
    summary: bool = False  # a record a history replacement added in place of removed ones
    edit: "Edit | None" = None


@dataclass
class Edit:
    type: str  # "rewind", "compaction" or "truncation"
    removed: list[int]  # slot indices that left the history
    source: str
    target: str | None = None  # the $rewindTo id
    found: bool = True


@dataclass
class Log:
    metadata: dict[str, Any] = field(default_factory=dict)
    slots: list[Slot] = field(default_factory=list)
    layout: str = "jsonl"
    counts: dict[str, int] = field(default_factory=dict)

    def bump(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n


class _History:
    def __init__(self, log: Log, ctx: ImportContext) -> None:
        self.log = log
        self.ctx = ctx
        self.live: dict[str, int] = {}  # id -> slot index, in history order

    def message(self, rec: dict[str, Any], line: int | None) -> None:
        mid = rec["id"]
        self.log.bump("message records")
        at = self.live.get(mid)
        if at is not None:
            slot = self.log.slots[at]
            slot.record, slot.copies = rec, slot.copies + 1
            self.log.bump("later copies")
            return
        self.live[mid] = len(self.log.slots)
        self.log.slots.append(Slot(record=rec, line=line))

    def rewind(self, target: str, line: int | None) -> None:
        self.log.bump("$rewindTo")
        ids = list(self.live)
        found = target in self.live
        start = ids.index(target) if found else 0
        removed = [self.live.pop(i) for i in ids[start:]]
        if not found:
            self.ctx.warn(f"$rewindTo {target!r}: no message of that id in the history; Gemini CLI's loader "
                          "then drops the whole history, and so did this read", line=line)
        self.log.slots.append(Slot(line=line, edit=Edit("rewind", removed, "gemini_cli:$rewindTo", target, found)))

    def replace(self, records: list[Any], line: int | None) -> None:
        """A ``$set`` of ``messages``: the history is now exactly ``records``."""
        self.log.bump("$set messages")
        new = [r for r in records if isinstance(r, dict) and isinstance(r.get("id"), str)]
        keep = {r["id"] for r in new}
        removed = [self.live.pop(i) for i in list(self.live) if i not in keep]
        added = [r for r in new if r["id"] not in self.live]
        for r in new:
            if r["id"] in self.live:
                slot = self.log.slots[self.live[r["id"]]]
                if slot.record != r:
                    self.log.bump("records rewritten by $set messages")
                slot.record = r
        if removed:
            kind = "compaction" if added else "truncation"
            self.log.slots.append(Slot(line=line, edit=Edit(kind, removed, "gemini_cli:$set.messages")))
        for r in added:
            self.live[r["id"]] = len(self.log.slots)
            self.log.slots.append(Slot(record=r, line=line, summary=bool(removed)))


def _header(rec: dict[str, Any]) -> bool:
    return isinstance(rec.get("sessionId"), str) and isinstance(rec.get("projectHash"), str)


def read_log(path: Path, ctx: ImportContext, *, jsonl: bool) -> Log:
    log = Log(layout="jsonl" if jsonl else "json")
    hist = _History(log, ctx)
    if not jsonl:
        data = load_json(path, ctx)
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise TypeError("the file is no ConversationRecord (an object with a messages list)")
        log.metadata = {k: v for k, v in data.items() if k != "messages"}
        for i, rec in enumerate(data["messages"]):
            with ctx.record("message", index=i):
                if not isinstance(rec, dict) or not as_str(rec.get("id")):
                    raise TypeError("a message record must be an object with an id")
                hist.message(rec, None)
        return log
    for line, rec in iter_jsonl(path, ctx):
        try:
            if not isinstance(rec, dict):
                raise TypeError(f"a record must be an object, not {type(rec).__name__}")
            if isinstance(rec.get("$rewindTo"), str):
                hist.rewind(rec["$rewindTo"], line)
            elif isinstance(rec.get("id"), str):
                hist.message(rec, line)
            elif isinstance(rec.get("$set"), dict):
                patch = rec["$set"]
                log.bump("$set")
                if isinstance(patch.get("messages"), list):
                    hist.replace(patch["messages"], line)
                log.metadata.update({k: v for k, v in patch.items() if k != "messages"})
            elif _header(rec):
                log.bump("metadata lines")
                log.metadata.update({k: v for k, v in rec.items() if k != "messages"})
                for i, msg in enumerate(rec.get("messages") or ()):  # a whole legacy record on one line
                    with ctx.record("message", line=line, index=i):
                        if not isinstance(msg, dict) or not as_str(msg.get("id")):
                            raise TypeError("a message record must be an object with an id")
                        hist.message(msg, line)
            else:
                ctx.skip("unknown record")
        except RECORD_ERRORS as e:
            ctx.bad_record(e, line=line)
    return log
