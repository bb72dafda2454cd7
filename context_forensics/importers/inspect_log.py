"""UK AISI Inspect eval logs: the ``.json`` log and the zipped ``.eval`` container.

One session per sample and epoch. The conversation is the sample's ``messages``; recorded
usage comes from the sample's ``model`` events.

How a model event is tied to the message it produced: each model event's output message
(``output.choices[0].message``) is matched to an assistant message of ``messages`` -
first by message ``id`` (logs since mid-2024 give both the same id), then by content (text
plus tool-call names and arguments), searching forward from the last match so repeated
answers ("Yes", "Yes") pair in order. The matched message gets the event's usage, its
timestamp, and ``meta["request"]`` = the event's model, tools, tool choice, generate config
and the number of messages sent (``input``, or since 2025 ``input_refs`` ranges into the
sample's ``events_data.messages`` pool). When the messages sent (``event.input``) are not exactly
the messages before the reply in ``messages`` (a solver trimmed or rewrote history), the
request also carries ``input_differs`` and the content hashes of what was sent, so a replay
can rebuild the real window.

A ``compaction`` event (Inspect's own history compaction, 2025-) becomes a
``compaction_boundary`` record placed before the reply of the first model call after it; the
compacted input that call was sent is in its ``input_hashes``.

Model events that produce no message in ``messages`` are not invented into the
conversation: scorer calls (inside a scorer step/span) are counted as skipped; other ones
(self-critique calls, sub-agents, history a solver reset) are counted, warned about once per
sample, and their usage totals kept in session metadata.

Layouts read: ``.json`` (``version`` 1 and 2: ``samples[]``; v1 samples keep events and
attachment text under ``transcript``), ``.eval`` with ``header.json`` (finished),
``_journal/start.json`` only (a run still in progress or killed), and the first ``.eval``
layout (``start.json`` + ``results.json``). Text moved out to ``attachments``
(``attachment://<hash>``, earlier ``tc://<hash>``) is resolved back in.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import InputError
from ..records import KIND_COMPACTION_BOUNDARY, Message, Session, ToolCall, Usage
from .base import (
    ImportContext, Importer, as_dict, as_int, as_list, as_str, decode, head_text, image_part, load_json, register,
)

ZIP_MAGIC = b"PK\x03\x04"
BASE64_REMOVED = "<base64-data-removed>"
_SCORER_TYPES = {"scorer", "scorers"}
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)
_SAMPLE_NAME = re.compile(r"^samples/(.+)_epoch_(\d+)\.json$")

# Score values read as an outcome. Anything else (partial credit "P", no-answer "N",
# a 0.5, a dict of metrics) leaves the outcome unknown; the raw values are in metadata.
_SUCCESS = {"C", "CORRECT", "PASS", "PASSED", "TRUE", "YES"}
_FAILURE = {"I", "INCORRECT", "FAIL", "FAILED", "FALSE", "NO"}


# ---------------------------------------------------------------- attachments


def _resolver(attachments: dict[str, Any]) -> Callable[[Any], Any]:
    """A function that puts attachment text back wherever a reference stands."""

    def one(s: str) -> str:
        if s.startswith("attachment://"):
            found = attachments.get(s[13:], s)
        elif s.startswith("tc://"):  # the v1 name for the same thing
            found = attachments.get(s[5:], s)
        else:
            return s
        return found if isinstance(found, str) else s

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return one(value) if "://" in value[:16] else value
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk


# ---------------------------------------------------------------- messages


def _content(content: Any, role: str) -> tuple[str, list[dict[str, Any]]]:
    """Text (text items joined by newlines, as Inspect's ``.text``) and non-text parts."""
    parts: list[dict[str, Any]] = []
    if content is None:
        return "", parts
    if isinstance(content, str):
        if role == "assistant":
            m = _THINK.match(content)
            if m:  # Inspect lifts a leading <think> block out as reasoning
                parts.append({"type": "thinking", "text": m.group(1).strip()})
                content = content[m.end():]
        return content, parts
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False), parts
    texts: list[str] = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
            continue
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            texts.append(str(item.get("text") or ""))
        elif kind == "reasoning":
            reasoning = str(item.get("reasoning") or "")
            if item.get("redacted"):
                part: dict[str, Any] = {"type": "redacted_thinking", "bytes": len(reasoning)}
                if item.get("summary"):
                    part["summary"] = item["summary"]
                parts.append(part)
            else:
                parts.append({"type": "thinking", "text": reasoning})
        elif kind == "image":
            image = item.get("image")
            image = image if isinstance(image, str) else ""
            if image.startswith("data:") or image.startswith("http"):
                parts.append(image_part(url=image, detail=item.get("detail")))
            else:  # removed from the log, or a local path
                part = image_part(detail=item.get("detail"))
                if image == BASE64_REMOVED:
                    part["removed"] = True
                elif image:
                    part["path"] = image
                parts.append(part)
        elif kind == "tool_use":  # a server-side tool the provider ran (web search, MCP)
            parts.append(
                {
                    "type": "server_tool_use",
                    "tool_type": item.get("tool_type"),
                    "name": item.get("name"),
                    "id": item.get("id"),
                    "arguments": item.get("arguments"),
                    "result": item.get("result"),
                    **({"error": item["error"]} if item.get("error") else {}),
                }
            )
        elif kind in ("audio", "video"):
            parts.append({"type": kind, "format": item.get("format")})
        elif kind == "document":
            parts.append(
                {"type": "document", "filename": item.get("filename"), "media_type": item.get("mime_type")}
            )
        else:  # "data" (provider-internal payloads) and future content types
            parts.append({"type": str(kind or "unknown")})
    return "\n".join(texts), parts


def _arguments(args: Any) -> str:
    if isinstance(args, str):
        return args
    return json.dumps(args if args is not None else {}, ensure_ascii=False)


def _message(raw: dict[str, Any]) -> Message | None:
    """One Inspect ChatMessage (attachments already resolved) as a Message."""
    role = raw.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        return None
    text, parts = _content(raw.get("content"), role)
    meta: dict[str, Any] = {}
    if raw.get("id"):
        meta["id"] = raw["id"]
    if raw.get("source"):
        meta["source"] = raw["source"]
    if not isinstance(role, str):
        return None
    tool_calls: list[ToolCall] = []
    name = None
    tool_call_id = None
    if role == "assistant":
        reasoning = raw.get("reasoning")  # the pre-2025 field for reasoning text
        if isinstance(reasoning, str) and reasoning:
            parts.insert(0, {"type": "thinking", "text": reasoning})
        for tc in as_list(raw.get("tool_calls")):
            if not isinstance(tc, dict):
                continue
            tool_calls.append(
                ToolCall(
                    name=str(tc.get("function") or ""),
                    arguments=_arguments(tc.get("arguments")),
                    id=as_str(tc.get("id")),
                )
            )
            if tc.get("parse_error"):
                meta.setdefault("parse_errors", []).append(tc["parse_error"])
    elif role == "tool":
        name = as_str(raw.get("function"))
        tool_call_id = as_str(raw.get("tool_call_id"))
        error = raw.get("error")
        if not error and raw.get("tool_error"):  # pre-0.3.40 logs
            error = {"type": "unknown", "message": raw["tool_error"]}
        if isinstance(error, dict):
            meta["error"] = error
            if not text.strip():  # what the providers send in place of an empty result
                text = f"Error: {error.get('message', '')}"
    elif role == "user" and raw.get("tool_call_id"):
        meta["tool_call_ids"] = raw["tool_call_id"]  # tool output sent as a user message
    return Message(
        role=role,
        text=text,
        name=name,
        tool_calls=tuple(tool_calls),
        tool_call_id=tool_call_id,
        parts=tuple(parts),
        model=as_str(raw.get("model")) if role == "assistant" else None,
        meta=meta,
    )


def _content_key(raw: dict[str, Any]) -> tuple:
    """What two copies of the same assistant message share, for matching without ids."""
    text, _ = _content(raw.get("content"), "assistant")
    calls = tuple(
        (tc.get("function"), _arguments(tc.get("arguments")))
        for tc in as_list(raw.get("tool_calls"))
        if isinstance(tc, dict)
    )
    return (text.strip(), calls)


# ---------------------------------------------------------------- usage and outcome


def _usage(u: Any, model: str | None) -> Usage | None:
    """Inspect's ModelUsage as a Usage whose prompt counts every token the call read.

    Providers fill ``input_tokens`` differently: OpenAI/Google include cached tokens,
    Anthropic excludes them (and then total_tokens = input + cache write + cache read +
    output). The total decides; the provider name is the tie-breaker.
    """
    if not isinstance(u, dict):
        return None
    inp = as_int(u.get("input_tokens"))
    out = as_int(u.get("output_tokens"))
    total = as_int(u.get("total_tokens"))
    cr = as_int(u.get("input_tokens_cache_read"))
    cw = as_int(u.get("input_tokens_cache_write"))
    cache = (cr or 0) + (cw or 0)
    prompt = inp
    if inp is not None and cache:
        if total is not None and total == inp + (out or 0) + cache:
            prompt = inp + cache
        elif total is not None and total == inp + (out or 0):
            prompt = inp
        elif (cr or 0) > inp or "anthropic" in (model or "") or "claude" in (model or ""):
            prompt = inp + cache
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=out,
        cache_read_tokens=cr,
        cache_creation_tokens=cw,
        reasoning_tokens=as_int(u.get("reasoning_tokens")),
    )
    return None if usage.is_empty() else usage


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


def _outcome(scores: dict[str, Any]) -> str:
    """success/failure when every scorer's value maps and they agree; else unknown."""
    found = set()
    for score in scores.values():
        value = score.get("value") if isinstance(score, dict) else score
        o = _score_outcome(value)
        if o is None:
            return "unknown"
        found.add(o)
    return found.pop() if len(found) == 1 else "unknown"


# ---------------------------------------------------------------- events


def _model_events(events: list[Any]) -> list[tuple[dict[str, Any], str]]:
    """Model events in order with where they ran: "main", "scorer" or "nested";
    compaction events are listed in their place too, as "compaction".

    Handles both event layouts: the flat span layout (span_begin/span_end with
    span_id/parent_id, 2025-) and the step layout (step begin/end, tool and subtask
    events with their own nested ``events``).
    """
    spans: dict[str, tuple[str | None, str | None]] = {}  # id -> (type, parent)
    out: list[tuple[dict[str, Any], str]] = []

    def in_scorer_span(span_id: Any) -> bool:
        seen = 0
        while isinstance(span_id, str) and span_id in spans and seen < 256:
            kind, parent = spans[span_id]
            if isinstance(kind, str) and kind in _SCORER_TYPES:
                return True
            span_id, seen = parent, seen + 1
        return False

    def walk(items: list[Any], nested: bool) -> None:
        steps: list[str | None] = []
        for ev in items:
            if not isinstance(ev, dict):
                continue
            kind = ev.get("event")
            if kind == "span_begin" and isinstance(ev.get("id"), str):
                spans[ev["id"]] = (ev.get("type"), ev.get("parent_id"))
            elif kind == "step":
                if ev.get("action") == "begin":
                    steps.append(ev.get("type"))
                elif steps:
                    steps.pop()
            elif kind == "compaction":
                out.append((ev, "compaction"))
            elif kind == "model":
                if any(isinstance(t, str) and t in _SCORER_TYPES for t in steps) or in_scorer_span(
                    ev.get("span_id")
                ):
                    out.append((ev, "scorer"))
                else:
                    out.append((ev, "nested" if nested else "main"))
            if kind in ("tool", "subtask") and isinstance(ev.get("events"), list):  # pre-span layout
                walk(ev["events"], True)

    walk(events, False)
    return out


def _output_message(ev: dict[str, Any]) -> dict[str, Any] | None:
    output = ev.get("output")
    if not isinstance(output, dict):
        return None
    choices = output.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    msg = choices[0].get("message")
    return msg if isinstance(msg, dict) else None


def _request(ev: dict[str, Any], resolve: Callable[[Any], Any], n_input: int) -> dict[str, Any]:
    request: dict[str, Any] = {"model": ev.get("model")}
    tools = ev.get("tools")
    if tools:
        request["tools"] = resolve(tools)
    if tools or (isinstance(ev.get("tool_choice"), (str, dict)) and ev.get("tool_choice") != "none"):
        request["tool_choice"] = ev.get("tool_choice")
    config = ev.get("config")
    if isinstance(config, dict):
        config = {k: v for k, v in config.items() if v is not None}
        if config:
            request["config"] = config
            if "max_tokens" in config:
                request["max_tokens"] = config["max_tokens"]
    request["input_messages"] = n_input
    if ev.get("cache"):
        request["cache"] = ev["cache"]
    return request


# ---------------------------------------------------------------- the importer


def _natural(name: str) -> tuple:
    m = _SAMPLE_NAME.match(name)
    if not m:
        return (2, name)
    sid, epoch = m.group(1), int(m.group(2))
    return (0, int(sid), "", epoch) if sid.isdigit() else (1, 0, sid, epoch)


@register
class InspectLog(Importer):
    name = "inspect"
    description = "UK AISI Inspect eval logs (.json and .eval), one session per sample and epoch"
    extensions = (".json", ".eval")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        if head[:4] == ZIP_MAGIC:
            if path.suffix.lower() == ".eval":
                return True
            # the first member's name sits at offset 30 of a zip's local file header
            n = int.from_bytes(head[26:28], "little")
            first = head[30 : 30 + n]
            return first in (b"_journal/start.json", b"header.json", b"start.json")
        text = head_text(head)
        if not text.startswith("{"):
            return False
        return (
            '"eval"' in text
            and '"task_id"' in text
            and ('"run_id"' in text or '"eval_id"' in text)
            and '"created"' in text
        )

    # -- reading

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic == ZIP_MAGIC:
            yield from self._parse_eval(path, ctx)
            return
        data = load_json(path, ctx)
        if not isinstance(data, dict) or not isinstance(data.get("eval"), dict):
            raise InputError(
                "not an Inspect log: expected an object with an 'eval' section",
                where=str(path),
                hint="force another format with --format",
            )
        samples = data.get("samples")
        if samples is None:
            ctx.warn(
                "log has no samples (a header-only log: the eval ran with samples not logged, or "
                "the file was written by read_eval_log(header_only=True)); imported 0 sessions"
            )
            return
        if not isinstance(samples, list):
            raise InputError("'samples' is not a list", where=str(path))
        for i, sample in enumerate(samples):
            if not isinstance(sample, dict):
                ctx.warn(f"samples[{i}] is not an object; skipped")
                ctx.skip("malformed sample")
                continue
            yield self._session(data, sample, ctx)

    def _parse_eval(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        try:
            zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as e:
            raise InputError(
                f"cannot open the .eval zip: {e}",
                where=str(path),
                hint="the log may be truncated; Inspect writes it at each flush, so a copy "
                "taken mid-write can be partial",
            ) from None
        with zf:
            names = set(zf.namelist())
            header = self._eval_header(zf, names, path, ctx)
            members = sorted(
                (n for n in names if n.startswith("samples/") and n.endswith(".json")), key=_natural
            )
            if not members:
                ctx.warn(
                    f"log has no samples (status {header.get('status', 'unknown')!r}: "
                    "header only, or no sample had finished); imported 0 sessions"
                )
                return
            for name in members:
                if name.count("/") > 1:  # the chunked .eval2 layout, not this one
                    ctx.skip("unsupported sample entry")
                    continue
                raw = self._read_member(zf, name, path)
                try:
                    sample = json.loads(decode(raw, ctx))
                except json.JSONDecodeError as e:
                    ctx.warn(f"{name}: malformed JSON ({e.msg}); sample skipped")
                    ctx.skip("malformed sample")
                    continue
                if not isinstance(sample, dict):
                    ctx.warn(f"{name}: not an object; sample skipped")
                    ctx.skip("malformed sample")
                    continue
                yield self._session(header, sample, ctx)

    def _read_member(self, zf: zipfile.ZipFile, name: str, path: Path) -> bytes:
        try:
            return zf.read(name)
        except NotImplementedError as e:  # zstd/deflate64 members need a newer zipfile
            raise InputError(
                f"{name}: {e}",
                where=str(path),
                hint="this .eval uses a zip compression Python's zipfile cannot read here; "
                "convert it with `inspect log convert --to json` and import the .json",
            ) from None
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise InputError(f"{name}: cannot read member: {e}", where=str(path)) from None

    def _eval_header(
        self, zf: zipfile.ZipFile, names: set[str], path: Path, ctx: ImportContext
    ) -> dict[str, Any]:
        def read(name: str) -> Any:
            try:
                return json.loads(decode(self._read_member(zf, name, path), ctx))
            except json.JSONDecodeError as e:
                raise InputError(f"{name}: malformed JSON: {e.msg}", where=str(path)) from None

        if "header.json" in names:
            header = read("header.json")
        elif "_journal/start.json" in names:  # never finished: no header.json written
            header = dict(read("_journal/start.json"))
            header.setdefault("status", "started")
            ctx.warn("no header.json (the eval did not finish); read _journal/start.json")
        elif "start.json" in names:  # the first .eval layout
            header = dict(read("start.json"))
            if "results.json" in names:
                results = read("results.json")
                if isinstance(results, dict):
                    header.update(results)
        else:
            raise InputError(
                "not an Inspect .eval log: no header.json or _journal/start.json in the zip",
                where=str(path),
                hint="force another format with --format",
            )
        if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
            raise InputError("Inspect header has no 'eval' section", where=str(path))
        return header

    # -- one sample

    def _session(self, header: dict[str, Any], sample: dict[str, Any], ctx: ImportContext) -> Session:
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
        resolve = _resolver(attachments)
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
        for raw in raw_messages:
            msg = _message(raw)
            if msg is None:
                ctx.skip(f"message role {raw.get('role')!r}")
                continue
            messages.append(msg)
            raws.append(raw)

        # -- tie model events to the assistant messages they produced
        model_events = _model_events(events)
        candidates = [(i, ev) for i, (ev, where) in enumerate(model_events) if where in ("main", "nested")]
        n_scorer = sum(1 for _, where in model_events if where == "scorer")
        n_calls = sum(1 for _, where in model_events if where != "compaction")
        replied: dict[int, int] = {}  # model event index -> position of the message it produced
        if n_scorer:
            ctx.skip("scorer model call", n_scorer)
        outputs: dict[int, dict[str, Any]] = {}
        by_id: dict[str, int] = {}
        for i, ev in candidates:
            out = _output_message(ev)
            if out is not None and not ev.get("pending"):
                out = resolve(out)
                outputs[i] = out
                if isinstance(out.get("id"), str):
                    by_id.setdefault(out["id"], i)
        order = [i for i, _ in candidates if i in outputs]
        keys = {i: _content_key(outputs[i]) for i in order}
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
                converted = _message(resolve(m))
                hash_cache[key] = converted.hash if converted is not None else None
            return hash_cache[key]

        for pos, (msg, raw) in enumerate(zip(messages, raws)):
            if msg.role != "assistant":
                continue
            hit = by_id.get(raw.get("id")) if isinstance(raw.get("id"), str) else None
            if hit is not None and hit in used:
                hit = None
            if hit is None:
                key = _content_key(raw)
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
            request = _request(ev, resolve, len(sent))
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
                usage=_usage(output.get("usage"), ev.get("model") or spec.get("model")),
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
            self._mark_compactions(messages, compactions, replied)
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
        for key in ("total_time", "working_time", "uuid", "limit", "error_retries"):
            if sample.get(key) not in (None, [], {}):
                metadata[key] = sample[key]
        error = sample.get("error")
        if isinstance(error, dict):
            metadata["error"] = str(error.get("message", ""))[:500]
        if isinstance(sample.get("model_usage"), dict):
            metadata["model_usage"] = sample["model_usage"]
        target = sample.get("target")
        if isinstance(target, (str, list)):
            metadata["target"] = target if len(json.dumps(target)) <= 500 else str(target)[:500]

        scores = sample.get("scores")
        if not isinstance(scores, dict):
            scores = {"score": sample["score"]} if isinstance(sample.get("score"), dict) else {}
        outcome = _outcome(scores) if scores else "unknown"
        if scores:
            metadata["scores"] = {
                k: (v.get("value") if isinstance(v, dict) else v) for k, v in scores.items()
            }

        task = spec.get("task") or spec.get("task_registry_name")
        run = spec.get("run_id") or spec.get("eval_id") or spec.get("task_id")
        return Session(
            external_id=f"{run}:{sid}:{epoch}",
            format=self.name,
            messages=messages,
            title=f"{task} {label}",
            model=as_str(spec.get("model")),
            started_at=as_str(spec.get("created")),
            task=f"{task}/{sid}" if task is not None else None,
            outcome=outcome,
            metadata={k: v for k, v in metadata.items() if v is not None},
        )

    @staticmethod
    def _mark_compactions(
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
