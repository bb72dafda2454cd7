"""ATIF: Harbor's Agent Trajectory Interchange Format (RFC 0001), ``ATIF-v1.0`` to ``ATIF-v1.8``.

One JSON object per file: ``{schema_version, session_id, trajectory_id?, agent {name, version,
model_name, extra}, steps[], notes, final_metrics, continued_trajectory_ref, extra}``; each step
``{step_id, timestamp, source user|agent|system, model_name, message (text, or content parts
from v1.6), reasoning_content, tool_calls[{tool_call_id, function_name, arguments}],
observation {results[{source_call_id, content, subagent_trajectory_ref}]}, metrics
{prompt_tokens, completion_tokens, cached_tokens, cost_usd, extra}, is_copied_context, extra}``.
Read from Harbor's reference models as inspect_scout's ATIF source uses them
(meridianlabs-ai/inspect_scout @ 63b481d6, ``src/inspect_scout/sources/_atif``) and the
RFC's changelog up to v1.8 (audio content parts, Harbor v0.23.0); every 1.x revision only adds
optional fields, so one reader reads them all.

Decisions:

- A step is one message: ``user`` -> user, ``system`` -> system, ``agent`` -> assistant with its
  tool calls, ``reasoning_content`` as a thinking part, and ``metrics`` as the call's recorded
  usage (Harbor's ``prompt_tokens`` includes the cached tokens, as ctxf's does). Each observation
  result follows its step: a ``tool`` message when it names its call (``source_call_id``), else
  a ``user`` message (``meta["atif_observation"]``): feedback the harness hands the model
  without a call (terminus-2 sends the terminal's output as the next prompt).
- A system step with ``extra.context_management`` is a recorded compaction: a ``history_edit``
  marker (everything before it summarized). Its ``subagent_trajectory_ref`` files (the calls
  that wrote the summary) are not read: counted as skipped.
- ``continued_trajectory_ref`` names the file the run goes on in (after a compaction). The run
  is one session: ATIF's ``session_id`` is the run's, shared by its continuation files, and the
  continuation's ``is_copied_context`` steps are what replaced the history at the compaction,
  so they are read as its ``compaction_summary`` and the replay crosses the compaction as the
  agent did. The continuation is read with the file that names it (a sidecar: a folder walk
  does not read it alone); named alone, with no such file beside it, it is a session of its own.
- Never misread: a step of another shape is skipped and counted by what is wrong with it; a
  ``schema_version`` that is not ``ATIF-v1.x`` is read (the steps decide) but said, and so is
  every other departure from the RFC (``metadata["atif_problems"]``): such a file is never
  "clean". ctxf's own export carries what ATIF has no field for in ``extra.ctxf`` (a message's
  kind, name, parts, a history edit's ranges), read back here so an export round-trips.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import (
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    KIND_HISTORY_EDIT,
    KIND_MESSAGE,
    KINDS,
    Message,
    Session,
    ToolCall,
    Usage,
    history_edit,
)
from ._sniffing import partial_json
from ._text import clip
from .base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_list,
    as_str,
    json_text,
    load_json,
    register,
    str_or_none,
)

VERSION_RE = re.compile(r"^ATIF-v1\.(\d+)$")
BARE_VERSION_RE = re.compile(r"^1\.\d+$")  # "1.4": a producer's shorthand, not the RFC's spelling
SOURCES = {"user": "user", "system": "system", "agent": "assistant"}
# extra.success of the trajectory (a dict lookup: 1 and 0 count as the booleans they equal)
_OUTCOME_OF_SUCCESS: dict[object, str] = {True: "success", False: "failure"}
MAX_CONTINUATIONS = 100
MAX_SIBLINGS = 2000  # JSON files of a folder looked at for the file a continuation continues
USAGE_EXTRA = ("cache_creation_tokens", "reasoning_tokens", "context_window", "prompt_tokens_error",
               "completion_tokens_error")  # ctxf's, in metrics.extra


def _is_trajectory(doc: Any) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("schema_version"), str):
        return False
    version = doc["schema_version"]
    steps = doc.get("steps")
    if not isinstance(steps, list) or not isinstance(doc.get("agent"), dict):
        return False
    if not (VERSION_RE.match(version) or BARE_VERSION_RE.match(version)):
        return False
    first = next((s for s in steps if isinstance(s, dict)), None)
    if first is None:
        return bool(VERSION_RE.match(version)) and not steps  # an empty trajectory of the RFC's
    return "step_id" in first and first.get("source") in SOURCES


@functools.lru_cache(maxsize=8)
def _continued_in(folder: str, stamp: float) -> dict[str, str]:
    """{continuation file: the file that names it} for the ATIF files of ``folder``."""
    out: dict[str, str] = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return out
    for name in [n for n in names if n.endswith(".json")][:MAX_SIBLINGS]:
        p = Path(folder, name)
        try:
            data = p.read_bytes() if p.is_file() and p.stat().st_size < 64 * 1024 * 1024 else b""
        except OSError:
            continue
        if b'"continued_trajectory_ref"' not in data or b'"schema_version"' not in data[:4096]:
            continue
        import json

        try:
            ref = json.loads(data).get("continued_trajectory_ref")
        except (ValueError, AttributeError, RecursionError):
            continue
        target = _ref_path(p, ref)
        if target is not None:
            out.setdefault(str(target), str(p.resolve()))
    return out


def _ref_path(path: Path, ref: Any) -> Path | None:
    """The file a ``continued_trajectory_ref`` names, relative to ``path``'s folder, or None.

    A trajectory copied under a prefixed name (``terminus_2_x.trajectory.json`` for Harbor's
    ``trajectory.json``: inspect_scout's fixtures) names its continuation by the unprefixed name:
    when that file is not there, the name with this file's prefix (up to a ``.``, ``_`` or ``-``)
    is looked for beside it."""
    if not isinstance(ref, str) or not ref or "://" in ref:
        return None
    try:
        target = (path.parent / ref)
        if target.is_file() or "/" in ref:
            return target.resolve()
        name = path.name
        for k in range(1, len(name)):
            if name[k - 1] in "._-" and (path.parent / (name[:k] + ref)).is_file():
                return (path.parent / (name[:k] + ref)).resolve()
        return target.resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def continued_by(path: Path) -> Path | None:
    """The file beside ``path`` whose ``continued_trajectory_ref`` names it, or None."""
    try:
        folder = path.resolve().parent
        parent = _continued_in(str(folder), folder.stat().st_mtime).get(str(path.resolve()))
    except OSError:
        return None
    return Path(parent) if parent and Path(parent) != path.resolve() else None


@register
class AtifImporter(Importer):
    name = "atif"
    description = "ATIF trajectories (Harbor RFC 0001, ATIF-v1.0..v1.8; continuations read as one run)"
    extensions = (".json",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        if b'"schema_version"' not in head or b'"steps"' not in head:
            return False
        if not _is_trajectory(partial_json(head)):
            return False
        # A continuation is read with the file that names it (see the module's decisions).
        return continued_by(path) is None

    def sidecars(self, path: Path) -> list[Path]:
        return [p for p, _ in _chain(path, None)][1:]

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        reader = _Reader(ctx)
        first: dict[str, Any] | None = None
        for p, doc in _chain(path, ctx):
            if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
                if first is None:
                    raise InputError("not an ATIF trajectory (no steps list)", where=str(path),
                                     hint="ATIF is one JSON object with schema_version, agent and steps[]")
                ctx.warn(f"continuation {p} is no ATIF trajectory: the run ends before it")
                reader.problem(f"continuation {p.name} unreadable")
                break
            if first is None:
                first = doc
            reader.document(doc, p, continuation=doc is not first)
        assert first is not None
        yield reader.session(first, path)


def _chain(path: Path, ctx: ImportContext | None) -> Iterator[tuple[Path, Any]]:
    """``path`` and the continuation files it names, in order (``ctx`` None: paths only, no
    reading beyond what the chain needs)."""
    seen: set[Path] = set()
    p: Path | None = path
    while p is not None and len(seen) <= MAX_CONTINUATIONS:
        try:
            key = p.resolve()
        except (OSError, RuntimeError):
            return
        if key in seen:
            if ctx is not None:
                ctx.warn(f"continued_trajectory_ref loops back to {p}; stopped there")
            return
        seen.add(key)
        if p is not path and not p.is_file():
            if ctx is not None:
                ctx.warn(f"continued_trajectory_ref names {p.name}, which is not beside this file: the run is "
                         "read up to its compaction")
            return
        try:
            doc = load_json(p, ctx if ctx is not None else ImportContext(path=p))
        except (InputError, OSError):
            if p is path:
                raise
            if ctx is not None:
                ctx.warn(f"continuation {p} cannot be read; the run is read up to it")
            return
        yield p, doc
        ref = doc.get("continued_trajectory_ref") if isinstance(doc, dict) else None
        p = _ref_path(p, ref)
        if p is not None and ctx is not None and isinstance(ref, str) and p.name != Path(ref).name and p.is_file():
            ctx.warn(f"continued_trajectory_ref names {ref}; read {p.name}, the file of that name with this "
                     "file's prefix beside it")


class _Reader:
    def __init__(self, ctx: ImportContext) -> None:
        self.ctx = ctx
        self.out: list[Message] = []
        self.problems: dict[str, int] = {}
        self.models: list[str] = []
        self.calls = 0  # agent steps with recorded usage
        self.compactions = 0
        self.files: list[str] = []
        self.versions: list[str] = []
        self.final_metrics: list[Any] = []  # each file's (a continuation's cover its own steps)

    def problem(self, what: str, n: int = 1) -> None:
        self.problems[what] = self.problems.get(what, 0) + n

    def document(self, doc: dict[str, Any], path: Path, *, continuation: bool) -> None:
        self.files.append(path.name)
        self.final_metrics.append(doc.get("final_metrics"))
        version = doc.get("schema_version")
        self.versions.append(str(version))
        if not (isinstance(version, str) and VERSION_RE.match(version)):
            self.problem(f"schema_version {version!r} is not ATIF-v1.x")
        agent = as_dict(doc.get("agent"))
        if "model_name" not in agent and isinstance(agent.get("model"), str):
            self.problem("agent.model instead of agent.model_name")
        self.default_model = as_str(agent.get("model_name")) or as_str(agent.get("model"))
        for i, step in enumerate(doc["steps"]):
            with self.ctx.record("step", index=i):
                self.step(step, i)

    def step(self, step: Any, index: int) -> None:
        if not isinstance(step, dict) or step.get("source") not in SOURCES:
            self.ctx.skip("malformed step (no source user|agent|system)")
            return
        ctxf = as_dict(as_dict(step.get("extra")).get("ctxf"))
        ts = str_or_none(step.get("timestamp"))
        extra = as_dict(step.get("extra"))
        role = "developer" if ctxf.get("role") == "developer" else SOURCES[step["source"]]
        text, parts = self.content(step.get("message"), f"step {step.get('step_id')} message")
        kind = k if (k := ctxf.get("kind")) in KINDS else KIND_MESSAGE
        meta: dict[str, Any] = dict(as_dict(ctxf.get("meta")))
        meta.setdefault("step_id", step.get("step_id"))
        if step.get("is_copied_context") is True:
            meta["is_copied_context"] = True
            if "kind" not in ctxf:
                kind = KIND_COMPACTION_SUMMARY
        if isinstance(ctxf.get("parts"), list):
            parts = tuple(p for p in ctxf["parts"] if isinstance(p, dict))
        elif isinstance(step.get("reasoning_content"), str) and step["reasoning_content"]:
            parts = ({"type": "thinking", "text": step["reasoning_content"]}, *parts)
        management = extra.get("context_management")
        if ctxf.get("kind") == "observation_only":  # ctxf's export: a tool result with no call before it
            pass
        elif kind == KIND_HISTORY_EDIT or (step["source"] == "system" and isinstance(management, dict)):
            self.compaction(step, text, as_dict(management), ts, meta, kind)
        elif step["source"] != "system" or text or parts or "kind" in ctxf or not step.get("observation"):
            calls = self.tool_calls(step.get("tool_calls"), ctxf)
            usage = self.usage(step.get("metrics")) if step["source"] == "agent" else None
            if step["source"] != "agent" and step.get("metrics"):
                self.ctx.skip("metrics on a non-agent step")
            cost = as_dict(step.get("metrics")).get("cost_usd")
            if usage is not None and isinstance(cost, (int, float)):
                meta["cost_usd"] = cost
            model = as_str(step.get("model_name")) or (self.default_model if step["source"] == "agent" else None)
            if model and model not in self.models:
                self.models.append(model)
            self.out.append(Message(role=role, text=text, kind=kind, name=str_or_none(ctxf.get("name")),
                                    tool_calls=calls, parts=parts, usage=usage, timestamp=ts, model=model,
                                    meta=meta))
            if usage is not None:
                self.calls += 1
        elif step.get("tool_calls"):
            self.ctx.skip("tool_calls on a system step")
        self.observation(step, ts)

    def compaction(self, step: dict, text: str, management: dict, ts: str | None, meta: dict, kind: str) -> None:
        edit = as_dict(meta.pop("history_edit", None))
        meta.pop("step_id", None)
        if kind == KIND_COMPACTION_BOUNDARY:  # ctxf's export of a boundary marker (Claude Code's, Codex's)
            self.out.append(Message(role="system", text=text, kind=kind, timestamp=ts, meta=meta))
            self.compactions += 1
            return
        if edit:  # ctxf's own export: the edit as it was recorded
            figures = {k: v for k, v in edit.items() if k not in ("type", "action", "ranges", "source")}
            msg = history_edit(str(edit.get("type") or "edit"), a if (a := edit.get("action")) in (
                "evicted", "summarized") else "evicted", [tuple(r) for r in as_list(edit.get("ranges"))],
                str(edit.get("source") or "atif"), text, **figures)
        else:
            kind = as_str(management.get("type")) or "compaction"
            msg = history_edit(kind, "summarized", [(0, len(self.out))] if self.out else [],
                               "atif:extra.context_management", text or "ATIF context management step",
                               boundary=management.get("boundary"), step_id=step.get("step_id"), timestamp=ts)
        self.out.append(Message(role="system", text=msg.text, kind=msg.kind, timestamp=ts,
                                meta={**meta, **msg.meta}))
        self.compactions += 1

    def observation(self, step: dict, ts: str | None) -> None:
        obs = step.get("observation")
        if obs is None:
            return
        if not isinstance(obs, dict) or not isinstance(obs.get("results"), list):
            self.ctx.skip("invalid observation (no results[])")
            self.problem("observation without results[]")
            return
        for i, result in enumerate(obs["results"]):
            if not isinstance(result, dict):
                self.ctx.skip("malformed observation result")
                continue
            refs = as_list(result.get("subagent_trajectory_ref"))
            if refs:
                self.ctx.skip("subagent_trajectory_ref (file not read)", len(refs))
            if "content" not in result and refs:
                continue
            text, parts = self.content(result.get("content"), f"step {step.get('step_id')} result {i}")
            ctxf = as_dict(as_dict(result.get("extra")).get("ctxf"))
            call = str_or_none(result.get("source_call_id")) or str_or_none(ctxf.get("tool_call_id"))
            meta = dict(as_dict(ctxf.get("meta")))
            if isinstance(ctxf.get("parts"), list):
                parts = tuple(p for p in ctxf["parts"] if isinstance(p, dict))
            kind = k if (k := ctxf.get("kind")) in KINDS else KIND_MESSAGE
            role = "tool" if call is not None or ctxf.get("role") == "tool" else "user"
            if role == "user":
                meta["atif_observation"] = step.get("step_id")
            self.out.append(Message(role=role, text=text, kind=kind, name=str_or_none(ctxf.get("name")),
                                    tool_call_id=call, parts=parts, timestamp=str_or_none(ctxf.get("timestamp")) or ts,
                                    meta=meta))

    def content(self, value: Any, where: str) -> tuple[str, tuple[dict[str, Any], ...]]:
        if value is None or isinstance(value, str):
            return value or "", ()
        if isinstance(value, list):
            texts: list[str] = []
            parts: list[dict[str, Any]] = []
            for p in value:
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
                    texts.append(p["text"])
                elif isinstance(p, dict) and p.get("type") in ("image", "audio") and isinstance(p.get("source"), dict):
                    src = p["source"]
                    parts.append({"type": p["type"], "media_type": src.get("media_type"), "path": src.get("path")})
                else:
                    self.ctx.skip("malformed content part")
            return "\n".join(texts), tuple(parts)
        self.problem(f"content that is neither text nor content parts ({type(value).__name__})")
        return json_text(value), ()

    def tool_calls(self, value: Any, ctxf: dict[str, Any]) -> tuple[ToolCall, ...]:
        out = []
        ids, texts = as_list(ctxf.get("tool_call_ids")), as_list(ctxf.get("arguments"))  # ctxf's export
        for i, c in enumerate(as_list(value)):
            if not isinstance(c, dict) or not isinstance(c.get("function_name"), str):
                shape = "id/name" if isinstance(c, dict) and "name" in c else "no function_name"
                self.ctx.skip(f"invalid tool_call ({shape}, not tool_call_id/function_name)")
                self.problem(f"tool_calls of another shape ({shape})")
                continue
            args = c.get("arguments")
            args = texts[i] if i < len(texts) and isinstance(texts[i], str) else (
                args if isinstance(args, str) else json_text(args))
            call_id = str_or_none(ids[i]) if i < len(ids) else str_or_none(c.get("tool_call_id"))
            out.append(ToolCall(name=c["function_name"], arguments=args, id=call_id))
        return tuple(out)

    def usage(self, metrics: Any) -> Usage | None:
        if not isinstance(metrics, dict):
            return None
        extra = as_dict(metrics.get("extra"))
        u = Usage(prompt_tokens=as_int(metrics.get("prompt_tokens")),
                  completion_tokens=as_int(metrics.get("completion_tokens")),
                  cache_read_tokens=as_int(metrics.get("cached_tokens")),
                  **{k: as_int(extra.get(k)) for k in USAGE_EXTRA})
        return None if u.is_empty() else u

    def session(self, doc: dict[str, Any], path: Path) -> Session:
        agent = as_dict(doc.get("agent"))
        ext = as_dict(doc.get("extra"))
        ctxf = as_dict(ext.get("ctxf"))
        for what, n in self.problems.items():
            self.ctx.warn(f"not conformant to ATIF: {what}" + (f" ({n}×)" if n > 1 else ""))
        sid = as_str(doc.get("trajectory_id")) or as_str(doc.get("session_id")) or path.stem
        metadata: dict[str, Any] = {
            "atif_schema_version": self.versions[0] if len(set(self.versions)) == 1 else self.versions,
            "agent": {k: agent.get(k) for k in ("name", "version", "model_name", "model", "provider")
                      if agent.get(k) is not None},
            "files": self.files,
            "recorded_calls": self.calls,
        }
        if self.problems:
            metadata["atif_problems"] = self.problems
        if isinstance(doc.get("final_metrics"), dict):
            metadata["final_metrics"] = doc["final_metrics"]
        if len(self.final_metrics) > 1 and any(isinstance(f, dict) for f in self.final_metrics):
            # a run continued in other files: each file's totals are of its own steps
            metadata["final_metrics_by_file"] = [{"file": name, "final_metrics": f if isinstance(f, dict) else None}
                                                 for name, f in zip(self.files, self.final_metrics)]
        if isinstance(ctxf.get("metadata"), dict):
            metadata.update({k: v for k, v in ctxf["metadata"].items() if k not in metadata})
        task = as_str(ctxf.get("task")) or as_str(ext.get("instruction"))
        outcome = o if (o := ctxf.get("outcome")) in ("success", "failure") else (
            _OUTCOME_OF_SUCCESS.get(ext.get("success"), "unknown"))
        first_user = next((m.text for m in self.out if m.role == "user" and m.text
                           and "atif_observation" not in m.meta), None)
        self.ctx.finish()
        return Session(
            external_id=sid,
            format="atif",
            messages=self.out,
            title=as_str(ctxf.get("title")) or clip(first_user or agent.get("name") or sid, 80),
            model=as_str(ctxf.get("model")) or self.default_or_first(agent),
            started_at=str_or_none(next((m.timestamp for m in self.out if m.timestamp), None)),
            task=clip(task, 2000) if task else None,
            outcome=outcome,
            metadata=metadata,
        )

    def default_or_first(self, agent: dict) -> str | None:
        return (as_str(agent.get("model_name")) or as_str(agent.get("model"))
                or (self.models[0] if self.models else None))


__all__ = ["AtifImporter", "RECORD_ERRORS"]
