"""The ``claude_code`` importer: sniffs a transcript, and yields its session (a main session,
a Task sub-agent's, or a compaction call's) with messages read lazily in pass 2."""

from __future__ import annotations

import json
import re
from array import array
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import orjson

from ...records import Message, Session
from .._json import parse_json
from .._text import title_line
from ..base import RECORD_ERRORS, ImportContext, Importer, head_text, register
from .convert import Converter
from .index import Facts, Index, build_index, loads_again
from .kinds import CONVERSATION_TYPES, KNOWN_TYPES, SYSTEM_KEPT, base_kind
from .tree import emission_plan, main_path, record_mask

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
AGENT_FILE_RE = re.compile(r"^agent-(.+)\.jsonl$")


@register
class ClaudeCode(Importer):
    """Claude Code transcripts: one session per file, the main path of its record tree."""

    name = "claude_code"
    description = "Claude Code session transcripts (~/.claude/projects/*/<session>.jsonl, subagents/)"
    extensions = (".jsonl",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        lines = text.split("\n")
        complete = lines[:-1] if len(head) >= 64 * 1024 else lines
        for line in complete[:40]:
            line = line.strip()
            if not line:
                continue
            try:
                rec = parse_json(line)
            except json.JSONDecodeError:  # nested too deep too
                break  # not JSONL, or a first line cut by the head: use the key test below
            if not isinstance(rec, dict):
                return False
            t = rec.get("type")
            if "sessionId" in rec and "parentUuid" in rec and isinstance(t, str):
                return True
            if "sessionId" in rec and "uuid" in rec and isinstance(rec.get("message"), dict):
                return True  # records without parent links (hand-made or very old files)
            if t not in KNOWN_TYPES:
                return False
            if t == "summary" and "leafUuid" in rec:
                return True
            # file-history-snapshot / queue-operation: Claude Code's, but look for a second clue
        # A first record longer than the head: look for the key combination instead.
        return all(k in text for k in ('"parentUuid"', '"sessionId"', '"isSidechain"'))

    def companions(self, path: Path) -> list[Path]:
        """A session's sub-agent transcripts: ``<session>/subagents/agent-*.jsonl`` beside
        ``<session>.jsonl`` (Claude Code 2.1+), in name order."""
        if AGENT_FILE_RE.match(path.name) or path.suffix != ".jsonl":
            return []
        folder = path.parent / path.stem / "subagents"
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if AGENT_FILE_RE.match(p.name) and p.is_file())

    def sidecars(self, path: Path) -> list[Path]:
        """A sub-agent transcript's ``agent-<id>.meta.json`` (its type, depth, the call that
        started it), read with it."""
        meta = _meta_path(path)
        return [meta] if meta is not None and meta.is_file() else []

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        idx, facts = build_index(path, ctx)
        agent_match = AGENT_FILE_RE.match(path.name)
        # A sub-agent file: agent-*.jsonl, or records that are all sidechain with an agentId.
        readable = len(idx) - len(idx.unreadable)  # the stubs of unreadable lines say nothing
        all_sidechain = readable > 0 and len(idx.sidechain) == readable
        is_agent = bool(agent_match) or (facts.agent_id is not None and all_sidechain)
        agent_id = facts.agent_id or (agent_match.group(1) if agent_match else None)
        is_compaction = bool(agent_id and agent_id.startswith("acompact"))
        sidechain = is_agent or all_sidechain

        included = main_path(path, idx, sidechain=sidechain, keep_all=is_compaction, ctx=ctx)
        inc = record_mask(len(idx), included)
        self._count_skips(idx, facts, inc, sidechain, is_compaction, ctx)
        plan = emission_plan(idx, included)

        session_id = facts.session_ids[0] if facts.session_ids else None
        if is_agent:
            external_id = agent_id or path.stem
            parent = session_id or (path.parent.parent.name if path.parent.name == "subagents" else None)
            global_id = False
        else:
            external_id = session_id or path.stem
            parent = None
            global_id = bool(UUID_RE.match(external_id))

        first_model: dict[int, int] = {}  # one count per call, from its first record
        for i in included:
            if idx.msg[i] and idx.model[i] >= 0:
                first_model.setdefault(idx.msg[i], idx.model[i])
        calls = Counter(
            idx.models[code] for code in first_model.values() if idx.models[code] != "<synthetic>"
        )
        model = calls.most_common(1)[0][0] if calls else None
        title = facts.custom_title or self._summary_title(idx, inc)
        if not title:
            title = next((t for i, t in idx.titles if inc[i]), None)
            title = title or (idx.titles[0][1] if idx.titles else None)
            title = title_line(title) if title else None

        metadata: dict[str, Any] = {
            "versions": facts.versions,
            "cwd": facts.cwds[0] if facts.cwds else None,
            "gitBranch": facts.branches[0] if facts.branches else None,
            "records": dict(facts.types),
            "model_calls": dict(calls),
            "main_path_records": len(included),
        }
        if len(facts.cwds) > 1:
            metadata["cwds"] = facts.cwds
        if len(facts.branches) > 1:
            metadata["gitBranches"] = facts.branches
        if len(facts.session_ids) > 1:
            metadata["session_ids"] = facts.session_ids
        if facts.slug:
            metadata["slug"] = facts.slug
        if facts.last_ts:
            metadata["ended_at"] = facts.last_ts
        if is_agent:
            metadata["role"] = "compaction_call" if is_compaction else "subagent"
            metadata["agent_id"] = agent_id
            metadata.update(_agent_meta(path, ctx))
        if facts.spawns:  # the sub-agents this session started, by agentId (the children's agent_id)
            metadata["subagents"] = facts.spawns

        yield Session(
            external_id=external_id,
            format=self.name,
            messages=self._messages(path, idx, plan, ctx, metadata["cwd"]),
            title=title,
            model=model,
            started_at=facts.first_ts,
            parent_external_id=parent,
            global_id=global_id,
            metadata={k: v for k, v in metadata.items() if v not in (None, [], {})},
        )

    @staticmethod
    def _summary_title(idx: Index, inc: bytearray) -> str | None:
        """The ``summary`` record whose leaf is in this file (on the main path first).

        Summaries of other sessions (their leaf is elsewhere) are not this one's title.
        """
        here = [(j, summary) for j, summary in ((idx.find(leaf), summary) for leaf, summary in idx.summaries)
                if j is not None]
        for j, summary in reversed(here):
            if inc[j]:
                return summary
        return here[-1][1] if here else None

    @staticmethod
    def _count_skips(
        idx: Index, facts: Facts, inc: bytearray, sidechain: bool, keep_all: bool,
        ctx: ImportContext,
    ) -> None:
        for kind, n in facts.types.items():
            base = kind.split(":")[0]
            if base not in CONVERSATION_TYPES:
                ctx.skip(kind, n, unknown=base not in KNOWN_TYPES)
            elif base == "system" and kind.split(":", 1)[1] not in SYSTEM_KEPT:
                ctx.skip(kind, n)
        import numpy as np

        # Per kind: a conversation record that counts as off-chain or sidechain when it is not
        # included (system records of other subtypes were already counted by subtype).
        counted = {}
        for kind in set(idx.kind):
            base = kind.split(":")[0]
            counted[kind] = base in CONVERSATION_TYPES and not (
                base == "system" and kind.split(":", 1)[1] not in SYSTEM_KEPT
            )
        n = len(idx)
        left_out = np.frombuffer(bytearray(map(counted.__getitem__, idx.kind)), dtype=np.uint8).astype(bool)
        if n:
            left_out &= np.frombuffer(inc, dtype=np.uint8) == 0
        total = int(left_out.sum())
        sidechain_n = 0
        if not keep_all:
            side = np.frombuffer(record_mask(n, idx.sidechain), dtype=np.uint8).astype(bool) if n else left_out
            sidechain_n = int((left_out & (side != sidechain)).sum())
        off_chain = total - sidechain_n
        if off_chain:
            ctx.skip("off-chain", off_chain)
        if sidechain_n:
            ctx.skip("sidechain", sidechain_n)
            ctx.warn(
                f"{sidechain_n} sidechain (sub-agent) records inside the main transcript were "
                "not imported; newer Claude Code versions write them to subagents/agent-*.jsonl"
            )

    @staticmethod
    def _messages(
        path: Path, idx: Index, plan: tuple[array, dict[int, list[int]]], ctx: ImportContext,
        cwd: str | None = None,
    ) -> Iterator[Message]:
        """Pass 2: read the planned records again (in file order, mostly without a seek); a model
        call made in another folder than the session's ``cwd`` keeps its own (``meta["cwd"]``)."""
        order, rest = plan
        conv = Converter(ctx, cwd)
        call, user, other, emit = conv.call, conv.user, conv.record, conv.emitted_one
        msg, offsets, lines, kinds = idx.msg, idx.offset, idx.line, idx.kind
        loads, decode_error = orjson.loads, orjson.JSONDecodeError
        is_user = {k: base_kind(k) == "user" for k in set(kinds)}
        with open(path, "rb") as f:
            readline, seek = f.readline, f.seek
            pos = 0  # where the file is: planned records mostly follow each other

            def read(j: int) -> Any:
                nonlocal pos
                off = offsets[j]
                if off != pos:
                    seek(off)
                raw = readline()
                pos = off + len(raw)
                try:
                    return loads(raw)  # as in pass 1, orjson succeeds where loads_line would
                except decode_error:
                    return loads_again(raw, lines[j], ctx)

            for i in order:
                try:
                    rec = read(i)
                    if msg[i]:  # a model call: its first record, and the others of a split call
                        more = rest.get(i) if rest else None
                        if more is None:
                            if isinstance(rec, dict):
                                m = call((rec,))
                                if m is not None:
                                    yield emit(m)
                            continue
                        recs = [rec] + [read(j) for j in more]
                        recs = [r for r in recs if isinstance(r, dict)]
                        if recs:
                            m = call(recs)
                            if m is not None:
                                yield emit(m)
                    elif isinstance(rec, dict):
                        for m in (user(rec, lines[i]) if is_user[kinds[i]] else other(rec, lines[i], kinds[i])):
                            yield emit(m)
                except RECORD_ERRORS as e:  # a record of unexpected shape: skipped, the rest kept
                    ctx.bad_record(e, line=lines[i])


def _meta_path(path: Path) -> Path | None:
    """``agent-<id>.meta.json`` beside ``agent-<id>.jsonl``, or None for another file."""
    return path.with_name(path.name[: -len(".jsonl")] + ".meta.json") if AGENT_FILE_RE.match(path.name) else None


# What a sub-agent's .meta.json says, under the metadata keys ctxf gives them.
_META_KEYS = {"agentType": "subagent_type", "spawnDepth": "spawn_depth", "toolUseId": "tool_call_id",
              "description": "description"}


def _agent_meta(path: Path, ctx: ImportContext) -> dict[str, Any]:
    """The sidecar's facts about a sub-agent (its type, depth and the call that started it);
    {} without one. A sidecar that cannot be read is warned about and left out."""
    meta = _meta_path(path)
    if meta is None or not meta.is_file():
        return {}
    try:
        if meta.stat().st_size > 1 << 20:
            raise ValueError("larger than 1 MiB")
        doc = parse_json(meta.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError, RecursionError) as e:
        ctx.warn(f"{meta.name}: not read ({e}); the sub-agent's type and call are not known")
        return {}
    out = {}
    for key, name in _META_KEYS.items():
        v = doc.get(key)
        if isinstance(v, str) and v or (isinstance(v, int) and not isinstance(v, bool)):
            out[name] = v
    return out
