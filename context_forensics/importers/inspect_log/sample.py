"""One Inspect sample as a session: its ``messages``, with each model event tied to the
assistant message it produced (by message id, else by content, searching forward from the last
match), that message given the event's usage, time and request; compaction events placed as
boundaries; calls that produced no message counted, their usage totals kept; the scores read as
an outcome.
"""

from __future__ import annotations

import json
from typing import Any

from ...records import KIND_COMPACTION_BOUNDARY, Message, Session
from .._text import clip
from ..base import RECORD_ERRORS, ImportContext, as_dict, as_int, as_list, as_str
from .events import model_calls, model_usage, output_message, request_of
from .messages import attachment_resolver, chat_message, content_key

# Score values read as an outcome. Anything else (partial credit "P", no-answer "N",
# a 0.5, a dict of metrics) leaves the outcome unknown; the raw values are in metadata.
_SUCCESS = {"C", "CORRECT", "PASS", "PASSED", "TRUE", "YES"}
_FAILURE = {"I", "INCORRECT", "FAIL", "FAILED", "FALSE", "NO"}


def _score_outcome(value: Any) -> str | None:
    if isinstance(value, bool):
        return "success" if value else "failure"
    if isinstance(value, (int, float)):
        if value == 1:
            return "success"
        if value == 0:
            return "failure"
        return None
    if isinstance(value, str):
        v = value.strip().upper()
        if v in _SUCCESS:
            return "success"
        if v in _FAILURE:
            return "failure"
    return None


def outcome_of(scores: dict[str, Any]) -> str:
    """success/failure when every scorer's value maps and they agree; else unknown."""
    found = set()
    for score in scores.values():
        value = score.get("value") if isinstance(score, dict) else score
        o = _score_outcome(value)
        if o is None:
            return "unknown"
        found.add(o)
    return found.pop() if len(found) == 1 else "unknown"


def sample_session(fmt: str, header: dict[str, Any], sample: dict[str, Any], ctx: ImportContext) -> Session:
    """One sample (and epoch) of a log as a session of format ``fmt``."""
    spec = as_dict(header.get("eval"))
    sid = sample.get("id")
    epoch = sample.get("epoch", 1)
    label = f"sample {sid} epoch {epoch}"

    attachments = dict(as_dict(sample.get("attachments")))
    events = sample.get("events")
    transcript = sample.get("transcript")
    if events is None and isinstance(transcript, dict):  # v1 logs
        events = transcript.get("events")
        attachments.update(as_dict(transcript.get("content")))
    events = as_list(events)
    resolve = attachment_resolver(attachments)
    # Since 2025 a model event's input may be range refs into a per-sample message pool.
    pool = as_list(as_dict(sample.get("events_data")).get("messages"))

    def event_input(ev: dict[str, Any]) -> list[dict[str, Any]]:
        sent = as_list(ev.get("input"))
        refs = ev.get("input_refs")
        if not sent and isinstance(refs, list) and pool:
            sent = []
            for ref in refs:
                if isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, int) for x in ref):
                    sent.extend(pool[ref[0] : ref[1]])
        return [m for m in sent if isinstance(m, dict)]

    raw_messages = [resolve(m) for m in as_list(sample.get("messages")) if isinstance(m, dict)]
    messages: list[Message] = []
    raws: list[dict[str, Any]] = []
    for i, raw in enumerate(raw_messages):
        try:
            msg = chat_message(raw)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, what="message", index=f"{i} of {label}")
            continue
        if msg is None:
            ctx.skip(f"message role {raw.get('role')!r}", unknown=True)
            continue
        messages.append(msg)
        raws.append(raw)

    # -- tie model events to the assistant messages they produced
    model_events = model_calls(events)
    candidates = [(i, ev) for i, (ev, where) in enumerate(model_events) if where in ("main", "nested")]
    n_scorer = sum(1 for _, where in model_events if where == "scorer")
    n_calls = sum(1 for _, where in model_events if where != "compaction")
    replied: dict[int, int] = {}  # model event index -> position of the message it produced
    if n_scorer:
        ctx.skip("scorer model call", n_scorer)
    outputs: dict[int, dict[str, Any]] = {}
    by_id: dict[str, int] = {}
    for i, ev in candidates:
        out = output_message(ev)
        if out is not None and not ev.get("pending"):
            out = resolve(out)
            outputs[i] = out
            if isinstance(out.get("id"), str):
                by_id.setdefault(out["id"], i)
    order = [i for i, _ in candidates if i in outputs]
    keys = {i: content_key(outputs[i]) for i in order}
    used: set[int] = set()
    pointer = 0
    n_unmatched_msgs = 0
    n_differs = 0
    hashes = [m.hash for m in messages]
    ids = [raw.get("id") for raw in raws]
    hash_cache: dict[str, str | None] = {}

    def sent_hash(m: dict[str, Any]) -> str | None:
        # the same message is sent again with every later call: convert it once
        key = json.dumps(m, sort_keys=True, default=str)
        if key not in hash_cache:
            converted = chat_message(resolve(m))
            hash_cache[key] = converted.hash if converted is not None else None
        return hash_cache[key]

    for pos, (msg, raw) in enumerate(zip(messages, raws)):
        if msg.role != "assistant":
            continue
        hit = by_id.get(raw_id) if isinstance(raw_id := raw.get("id"), str) else None
        if hit is not None and hit in used:
            hit = None
        if hit is None:
            key = content_key(raw)
            hit = next((i for i in order[pointer:] if i not in used and keys[i] == key), None)
            if hit is None:
                hit = next((i for i in order if i not in used and keys[i] == key), None)
        if hit is None:
            if raw.get("source") != "input":
                n_unmatched_msgs += 1
            continue
        used.add(hit)
        replied[hit] = pos
        if hit in order:
            pointer = max(pointer, order.index(hit) + 1)
        ev = model_events[hit][0]
        sent = event_input(ev)
        request = request_of(ev, resolve, len(sent))
        sent_ids = [m.get("id") for m in sent]
        same_ids = len(sent) == pos and all(isinstance(x, str) for x in sent_ids) and sent_ids == ids[:pos]
        if sent and not same_ids:  # no ids (older logs) or a different list: compare content
            sent_hashes = [h for h in (sent_hash(m) for m in sent) if h is not None]
            if sent_hashes != hashes[:pos]:
                n_differs += 1
                request["input_differs"] = True
                request["input_hashes"] = sent_hashes
        meta = dict(msg.meta)
        meta["request"] = request
        output = as_dict(ev.get("output"))
        messages[pos] = Message(
            role=msg.role,
            text=msg.text,
            kind=msg.kind,
            tool_calls=msg.tool_calls,
            parts=msg.parts,
            usage=model_usage(output.get("usage"), ev.get("model") or spec.get("model"),
                              as_dict(spec.get("packages")).get("inspect_ai")),
            timestamp=as_str(ev.get("completed") or ev.get("timestamp")),
            model=msg.model or as_str(output.get("model") or ev.get("model")),
            meta=meta,
        )

    unattached = [model_events[i][0] for i, _ in candidates if i not in used]
    metadata: dict[str, Any] = {
        "inspect_version": as_dict(spec.get("packages")).get("inspect_ai"),
        "log_version": header.get("version"),
        "status": header.get("status"),
        "eval_id": spec.get("eval_id"),
        "run_id": spec.get("run_id"),
        "task_id": spec.get("task_id"),
        "sample_id": sid,
        "epoch": epoch,
        "model_calls": n_calls,
    }
    if n_scorer:
        metadata["scorer_model_calls"] = n_scorer
    if unattached:
        totals = {"input_tokens": 0, "output_tokens": 0}
        for ev in unattached:
            u = as_dict(as_dict(ev.get("output")).get("usage"))
            for k in totals:
                totals[k] += as_int(u.get(k)) or 0
        metadata["unattached_model_calls"] = len(unattached)
        metadata["unattached_usage"] = totals
        ctx.skip("model call without a message", len(unattached))
        ctx.warn(
            f"{label}: {len(unattached)} model call(s) produced no message in the sample's "
            "messages (solver-internal calls, a sub-agent, or history a solver reset); "
            "not added to the conversation, usage totals kept in session metadata"
        )
    compactions = [(i, ev) for i, (ev, where) in enumerate(model_events) if where == "compaction"]
    if compactions:
        metadata["compactions"] = len(compactions)
        mark_compactions(messages, compactions, replied)
    if n_unmatched_msgs and n_calls:
        ctx.warn(
            f"{label}: {n_unmatched_msgs} generated assistant message(s) have no model event; "
            "no usage for them"
        )
    if n_differs:
        metadata["calls_with_different_input"] = n_differs
        ctx.warn(
            f"{label}: {n_differs} model call(s) were sent messages that differ from the "
            "conversation before their reply (a solver edited history); the sent messages' "
            "hashes are in meta['request']['input_hashes']"
        )
    for name in ("total_time", "working_time", "uuid", "limit", "error_retries"):
        if sample.get(name) not in (None, [], {}):
            metadata[name] = sample[name]
    error = sample.get("error")
    if isinstance(error, dict):
        metadata["error"] = clip(str(error.get("message", "")), 500)
    if isinstance(sample.get("model_usage"), dict):
        metadata["model_usage"] = sample["model_usage"]
    target = sample.get("target")
    if isinstance(target, (str, list)):
        metadata["target"] = target if len(json.dumps(target)) <= 500 else clip(str(target), 500)

    scores = sample.get("scores")
    if not isinstance(scores, dict):
        scores = {"score": sample["score"]} if isinstance(sample.get("score"), dict) else {}
    outcome = outcome_of(scores) if scores else "unknown"
    if scores:
        metadata["scores"] = {
            k: (v.get("value") if isinstance(v, dict) else v) for k, v in scores.items()
        }

    task = spec.get("task") or spec.get("task_registry_name")
    run = spec.get("run_id") or spec.get("eval_id") or spec.get("task_id")
    return Session(
        external_id=f"{run}:{sid}:{epoch}",
        format=fmt,
        messages=messages,
        title=f"{task} {label}",
        model=as_str(spec.get("model")),
        started_at=as_str(spec.get("created")),
        task=f"{task}/{sid}" if task is not None else None,
        outcome=outcome,
        metadata={k: v for k, v in metadata.items() if v is not None},
    )


def mark_compactions(
    messages: list[Message], compactions: list[tuple[int, dict[str, Any]]], replied: dict[int, int]
) -> None:
    """Put a compaction boundary before the reply of the first model call after each
    compaction event (or at the end when no call followed)."""
    inserts = []
    for i, ev in compactions:
        later = [pos for hit, pos in replied.items() if hit > i]
        meta = {k: ev[k] for k in ("tokens_before", "tokens_after", "source") if ev.get(k) is not None}
        boundary = Message(
            role="system",
            text="Conversation compacted",
            kind=KIND_COMPACTION_BOUNDARY,
            timestamp=as_str(ev.get("timestamp")),
            meta=meta,
        )
        inserts.append((min(later) if later else len(messages), boundary))
    for pos, boundary in sorted(inserts, key=lambda x: x[0], reverse=True):
        messages.insert(pos, boundary)
