"""OpenHands ``llm_completions/`` folders: one JSON file per LLM call.

OpenHands (``log_completions``) writes ``<model>-<unix time>.json`` per call:
``{messages, response, args, kwargs, timestamp, cost}``; ``messages`` is the OpenAI-style chat
list the model was sent (content lists of ``{"type": "text", "text", "cache_control"}``,
assistant ``tool_calls``, ``role: tool`` results with ``name``), ``response`` the litellm
``chat.completion`` with ``usage`` (Anthropic cache fields via litellm), ``kwargs.tools`` the
tool schemas. With mocked function calling, ``messages``/``response`` are the text form that
was really sent and ``fncall_messages``/``fncall_response`` the tool-call form.

One session per folder of call files. The path may be the ``llm_completions`` folder, its
parent (the run or instance folder), an ``llm_completions/<instance_id>/`` subfolder (a run
folder with several instance subfolders yields one session each), or a single call file (a
one-call session).

Calls are ordered by the unix time in the file name (numerically), else the ``timestamp``
field. The conversation is the last call's ``messages`` plus its response; every earlier
call's messages must be a prefix of it (role + text), and its response must be the message
right after that prefix, which is where its usage goes. A call that breaks the prefix
(condensation, a retried call whose output was dropped) gets a warning and an entry in
``metadata["unattached_calls"]`` instead of a guessed position.

Task and outcome: the instance id is the per-instance folder name, an ancestor folder named
like a SWE-bench id, or the eval log's; ``eval_instance_<id>.log`` (or ``report.json``) next
to the folder or one or two levels above sets the outcome (its last ``resolved: True/False``).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ...hashing import content_hash
from ...records import Message, Session, Usage
from .._agent_calls import iso_time, scalar_params, tools_summary, usage_from
from .._agent_messages import convert_message, messages_equal_key
from .._swebench import Verdict, find_verdict, looks_like_instance_id
from ..base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    head_text,
    load_json,
    read_head,
    register,
    str_or_none,
)

CALL_NAME = re.compile(r"-(\d{9,11}(?:\.\d+)?)\.json$")
_SCAN_LIMIT = 200


def _name_time(path: Path) -> float | None:
    m = CALL_NAME.search(path.name)
    return float(m.group(1)) if m else None


def _name_model(path: Path) -> str | None:
    m = CALL_NAME.search(path.name)
    if not m or m.start() == 0:
        return None
    return path.name[: m.start()].replace("__", "/")


def _looks_like_call_head(head: bytes) -> bool:
    text = head_text(head)
    return text.startswith("{") and text[1:].lstrip().startswith('"messages"')


def _call_files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.is_file())
    except OSError:
        return []


def _has_call_files(folder: Path) -> bool:
    """Cheap: does this folder directly hold at least one call file?"""
    try:
        with os.scandir(folder) as it:
            for n, entry in enumerate(it):
                if n >= _SCAN_LIMIT:
                    break
                if entry.is_file() and CALL_NAME.search(entry.name):
                    try:
                        if _looks_like_call_head(read_head(Path(entry.path), 256)):
                            return True
                    except OSError:
                        continue
    except OSError:
        return False
    return False


def _session_folders(path: Path) -> list[Path]:
    """The folders under ``path`` that each hold one run's call files."""
    base = path
    if path.name != "llm_completions" and (path / "llm_completions").is_dir():
        base = path / "llm_completions"
    out = [base] if _has_call_files(base) else []
    try:
        subdirs = sorted(p for p in base.iterdir() if p.is_dir())
    except OSError:
        subdirs = []
    out += [d for d in subdirs if _has_call_files(d)]
    return out


def _instance_hint(folder: Path) -> str | None:
    for p in (folder, *list(folder.parents)[:3]):
        if p.name != "llm_completions" and looks_like_instance_id(p.name):
            return p.name
    return None


def _verdict_for(folder: Path, instance_id: str | None) -> Verdict | None:
    for d in (folder, *list(folder.parents)[:2]):
        verdict = find_verdict(d, instance_id)
        if verdict:
            return verdict
    return None


@dataclass
class _Call:
    """What we keep of one call file while reading the folder (not its messages)."""

    path: Path
    order: float
    keys: list[str]
    response: dict | None
    response_key: str | None
    usage: Usage | None
    request: dict[str, Any]
    tools: list | None
    cost: float | None
    timestamp: str | None
    mock_fncall: bool = False
    index: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _key(m: Any) -> str:
    if not isinstance(m, dict):
        return content_hash(["?", repr(m)])
    return content_hash(list(messages_equal_key(m)))


def _response_message(response: Any) -> dict | None:
    choices = response.get("choices") if isinstance(response, dict) else None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = choices[0].get("message")
        if isinstance(msg, dict):
            return {**msg, "role": "assistant"}
    return None


@register
class OpenHands(Importer):
    name = "openhands"
    description = "OpenHands llm_completions/ folders (one JSON per LLM call) or a single call file"
    extensions = (".json",)
    priority = 20
    handles_directories = True

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():
            if path.name == "llm_completions" or (path / "llm_completions").is_dir():
                return True
            return _has_call_files(path)
        if not _looks_like_call_head(head):
            return False
        if CALL_NAME.search(path.name):
            return True
        text = head_text(head)
        return '"response"' in text and '"kwargs"' in text and ('"cost"' in text or '"timestamp"' in text)

    def sidecars(self, path: Path) -> list[Path]:
        folders = _session_folders(path) if path.is_dir() else [path.parent]
        out: list[Path] = []
        for folder in folders:
            hint = _instance_hint(folder)
            verdict = _verdict_for(folder, hint)
            if verdict and verdict.source not in out:
                out.append(verdict.source)
        return out

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        if path.is_file():
            yield self._session(path.parent, [path], ctx, single=path)
            return
        folders = _session_folders(path)
        if not folders:
            raise InputError("no OpenHands call files (<model>-<unix time>.json) in this folder", where=str(path),
                             hint="point at an llm_completions/ folder, its parent, or one call file")
        for folder in folders:
            session = None
            with ctx.record("folder", index=folder.name):
                session = self._session(folder, _call_files(folder), ctx)
            if session is not None:
                yield session

    # ------------------------------------------------------------ one folder

    def _read_call(self, f: Path, ctx: ImportContext) -> tuple[_Call | None, dict | None]:
        try:
            data = load_json(f, ctx)
        except InputError as e:
            ctx.warn(f"{f.name}: {e.message}; skipped this call")
            ctx.skip("unreadable call file")
            return None, None
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            ctx.skip("non-call file")
            return None, None
        kwargs = as_dict(data.get("kwargs"))
        tools = kwargs.get("tools") if isinstance(kwargs.get("tools"), list) else None
        response = data.get("response") if isinstance(data.get("response"), dict) else None
        resp_msg = _response_message(response)
        model = (kwargs.get("model") if isinstance(kwargs.get("model"), str) else None) or _name_model(f)
        if model is None and response and isinstance(response.get("model"), str):
            model = response["model"]
        request: dict[str, Any] = {"model": model} if model else {}
        request.update(tools_summary(tools))
        request.update(scalar_params(kwargs))
        ts_field = data.get("timestamp")
        order = _name_time(f)
        if order is None:
            order = float(ts_field) if isinstance(ts_field, (int, float)) else math.inf
        call = _Call(
            path=f,
            order=order,
            keys=[_key(m) for m in data["messages"]],
            response=resp_msg,
            response_key=_key(resp_msg) if resp_msg else None,
            usage=usage_from(response.get("usage")) if response else None,
            request=request,
            tools=tools,
            cost=data.get("cost") if isinstance(data.get("cost"), (int, float)) else None,
            timestamp=iso_time(ts_field if ts_field is not None else _name_time(f)),
            mock_fncall="fncall_messages" in data,
            extra={"response_model": str_or_none(response.get("model")) if response else None},
        )
        return call, data

    def _session(self, folder: Path, files: list[Path], ctx: ImportContext, *, single: Path | None = None) -> Session:
        calls: list[_Call] = []
        last_data: dict | None = None
        for f in files:
            try:
                call, data = self._read_call(f, ctx)
            except RECORD_ERRORS as e:  # a call file of unexpected shape: skipped, the others kept
                ctx.bad_record(e, what="call file", index=f.name)
                continue
            if call is None:
                continue
            calls.append(call)
            if single is not None:
                last_data = data
        if not calls:
            raise InputError("no readable LLM call in this folder", where=str(single or folder),
                             hint="each call file must be {messages: [...], response: {...}, ...}")
        calls.sort(key=lambda c: (c.order, c.path.name))
        for i, c in enumerate(calls):
            c.index = i
        last = calls[-1]
        if last_data is None:
            last_data = load_json(last.path, ctx)
        raw: list[Any] = list(last_data["messages"])
        if last.response is not None:
            raw.append(last.response)
        final_keys = last.keys + ([last.response_key] if last.response_key else [])

        # which call produced the message at each position of the final list
        produced: dict[int, _Call] = {}
        unattached: list[dict[str, Any]] = []
        for c in calls:
            n = len(c.keys)
            reason = None
            if c.keys != final_keys[:n]:
                k = next((j for j, (a, b) in enumerate(zip(c.keys, final_keys)) if a != b), min(n, len(final_keys)))
                reason = f"messages differ from the final conversation at index {k}"
            elif c.response_key is None:
                reason = "no response message"
            elif n >= len(final_keys) or final_keys[n] != c.response_key:
                reason = "response is not the next message of the final conversation"
            elif n in produced:
                reason = f"another call already produced message {n}"
            if reason:
                entry: dict[str, Any] = {"call_index": c.index, "file": c.path.name, "messages": n, "reason": reason}
                if c.usage:
                    entry["usage"] = c.usage.to_dict()
                unattached.append(entry)
                continue
            produced[n] = c
        if unattached:
            ctx.warn(f"{folder.name}: {len(unattached)} of {len(calls)} calls do not extend the final "
                     "conversation (condensation or a dropped retry?); their usage is kept in "
                     "metadata['unattached_calls'], not attached to a message")

        messages: list[Message] = []
        names: dict[str, str] = {}
        for i, m in enumerate(raw):
            try:
                if not isinstance(m, dict):
                    ctx.skip("malformed message")
                    continue
                made = produced.get(i)
                if made is not None and m.get("role") == "assistant":
                    meta: dict[str, Any] = {"call_index": made.index, "request": dict(made.request),
                                            "file": made.path.name}
                    if made.cost is not None:
                        meta["cost"] = made.cost
                    messages.extend(convert_message(m, ctx, names=names, usage=made.usage, meta=meta,
                                                    model=made.extra.get("response_model"), timestamp=made.timestamp))
                else:
                    messages.extend(convert_message(m, ctx, names=names, meta={}))
            except RECORD_ERRORS as e:  # a message of unexpected shape: skipped, the rest kept
                ctx.bad_record(e, what="message", index=i)

        instance_id = _instance_hint(folder)
        verdict = _verdict_for(folder, instance_id)
        if verdict and verdict.task and not instance_id:
            instance_id = verdict.task
        ext_name = folder.name if folder.name != "llm_completions" else folder.parent.name
        external_id = instance_id or (single.stem if single else ext_name)
        tools = next((c.tools for c in reversed(calls) if c.tools), None)
        metadata: dict[str, Any] = {
            "calls": len(calls),
            "attached_calls": len(produced),
            "folder": folder.name,
        }
        costs = [c.cost for c in calls if c.cost is not None]
        if costs:
            metadata["cost"] = round(sum(costs), 6)
        if tools:
            metadata["tools"] = tools
            hashes = {c.request.get("tools_hash") for c in calls if c.tools}
            if len(hashes) > 1:
                metadata["tools_variants"] = len(hashes)
        if any(c.mock_fncall for c in calls):
            metadata["mock_function_calling"] = True
        if unattached:
            metadata["unattached_calls"] = unattached
        if verdict:
            metadata["verdict_source"] = verdict.source.name
        model = last.request.get("model") or last.extra.get("response_model")
        return Session(
            external_id=external_id,
            format=self.name,
            messages=messages,
            title=instance_id or external_id,
            model=model,
            started_at=calls[0].timestamp,
            task=instance_id,
            outcome=verdict.outcome if verdict else "unknown",
            metadata=metadata,
        )
