"""ChatGPT data export: ``conversations.json``.

The export is a JSON list of conversations (a single conversation object is accepted too).
Each conversation is a tree: ``mapping`` {node id: {message, parent, children}} and
``current_node``, the leaf the user last saw. The session is the path from the root to
``current_node``; messages on other branches (edits, regenerations) are counted as skipped.

Message mapping:

- ``author.role`` system/user/assistant/tool; ``metadata.is_visually_hidden_from_conversation``
  messages are kept with ``meta["hidden"]``. Custom instructions (``user_editable_context``, or
  the 2023 ``user_context_message_data``) become the text the model was given.
- An assistant message addressed to a tool (``recipient`` not ``all``: ``python``, ``browser``,
  ``dalle.text2im``, ``web.run`` ...) is a tool call: ``ToolCall(name=recipient, arguments=<the
  code or command text>, id=<message id>)``. The tool's reply (``author.role == "tool"``,
  ``author.name`` the tool) is a tool message answering the latest open call to that tool.
- ``thoughts`` (o-series reasoning) are stand-alone ``kind="reasoning"`` items; ``reasoning_recap``
  ("Thought for 10 seconds") is UI chrome and is skipped.
- ``multimodal_text`` image pointers become image placeholders with their width and height.

There is no token usage in this format.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from ..records import KIND_REASONING, Message, Session, ToolCall
from ._images import image_part
from ._stream import iter_json_array
from .base import (
    RECORD_ERRORS,
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_list,
    as_str,
    epoch_iso,
    head_text,
    register,
    text_of,
)

ROLES = {"system": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


# ---------------------------------------------------------------- content


def _content(content: dict[str, Any], metadata: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str]:
    """(text, parts, kind) for one message's ``content``."""
    ct = content.get("content_type")
    parts: list[dict[str, Any]] = []
    kind = "message"
    if ct in ("text", None):
        text = "\n".join(p if isinstance(p, str) else text_of(p) for p in as_list(content.get("parts")))
        ctx_data = metadata.get("user_context_message_data")
        if not text.strip() and isinstance(ctx_data, dict):  # 2023 custom instructions
            text = "\n\n".join(str(v) for v in ctx_data.values() if isinstance(v, str) and v.strip())
        return text, parts, kind
    if ct == "multimodal_text":
        texts: list[str] = []
        for p in as_list(content.get("parts")):
            if isinstance(p, str):
                texts.append(p)
            elif isinstance(p, dict):
                pct = p.get("content_type")
                if pct == "image_asset_pointer":
                    part = image_part(width=as_int(p.get("width")), height=as_int(p.get("height")))
                    part["asset_pointer"] = p.get("asset_pointer")
                    if as_int(p.get("size_bytes")):
                        part["bytes"] = p["size_bytes"]
                    parts.append(part)
                elif pct == "audio_transcription":
                    texts.append(str(p.get("text") or ""))
                elif pct in ("audio_asset_pointer", "real_time_user_audio_video_asset_pointer"):
                    audio = p.get("audio_asset_pointer") if pct != "audio_asset_pointer" else p
                    audio = audio if isinstance(audio, dict) else {}
                    parts.append(
                        {
                            "type": "audio",
                            "format": audio.get("format"),
                            "bytes": audio.get("size_bytes"),
                            "duration": as_dict(audio.get("metadata")).get("end"),
                        }
                    )
                elif isinstance(p.get("text"), str):
                    texts.append(p["text"])
                else:
                    parts.append({"type": str(pct or "unknown")})
        return "\n".join(t for t in texts if t), parts, kind
    if ct in ("code", "execution_output", "tether_browsing_code"):
        text = str(content.get("text") or "")
        if ct == "execution_output":
            agg = metadata.get("aggregate_result")
            for m in as_list(as_dict(agg).get("messages")):
                if isinstance(m, dict) and m.get("message_type") == "image":
                    # a chart shown to the user; the model itself read "<<ImageDisplayed>>"
                    parts.append({"type": "image_output", "url": m.get("image_url")})
        return text, parts, kind
    if ct == "thoughts":
        for t in as_list(content.get("thoughts")):
            if isinstance(t, dict):
                body = "\n".join(
                    s for s in (t.get("summary"), t.get("content")) if isinstance(s, str) and s
                )
                parts.append({"type": "thinking", "text": body})
        return "", parts, KIND_REASONING
    if ct == "user_editable_context":
        text = "\n\n".join(
            str(content[k]) for k in ("user_profile", "user_instructions") if content.get(k)
        )
        return text, parts, kind
    if ct == "model_editable_context":
        return str(content.get("model_set_context") or ""), parts, kind
    if ct == "tether_browsing_display":
        text = content.get("result") or content.get("summary") or ""
        return str(text), parts, kind
    if ct in ("tether_quote", "sonic_webpage"):
        bits = [content.get("title"), content.get("url"), content.get("text")]
        return "\n".join(str(b) for b in bits if b), parts, kind
    if ct == "system_error":
        return f"{content.get('name') or 'Error'}: {content.get('text') or ''}", parts, kind
    if ct == "computer_output":
        shot = content.get("screenshot")
        if isinstance(shot, dict):
            part = image_part(width=as_int(shot.get("width")), height=as_int(shot.get("height")))
            part["asset_pointer"] = shot.get("asset_pointer")
            parts.append(part)
        return "", parts, kind
    # Unknown content types: keep whatever text they carry (the caller drops them if none).
    if isinstance(content.get("parts"), list):
        text = text_of(content["parts"])
    else:
        text = str(content.get("text") or "")
    return text, parts, "unknown"


# ---------------------------------------------------------------- the importer


def _path(mapping: dict[str, Any], current: Any, ctx: ImportContext, label: str) -> list[str]:
    """Node ids from the root to ``current`` (or, without it, to the newest leaf)."""
    if not isinstance(current, str) or current not in mapping:
        leaves = [k for k, v in mapping.items() if isinstance(v, dict) and not v.get("children")]
        if not leaves:
            return []

        def created(k: str) -> float:
            msg = (mapping[k] or {}).get("message") or {}
            t = msg.get("create_time") if isinstance(msg, dict) else None
            return t if isinstance(t, (int, float)) else 0.0

        current = max(leaves, key=created)
        ctx.warn(f"{label}: no valid current_node; followed the newest leaf {current}")
    path: list[str] = []
    seen: set[str] = set()
    node: Any = current
    while isinstance(node, str) and node in mapping and node not in seen:
        seen.add(node)
        path.append(node)
        entry = mapping[node]
        node = entry.get("parent") if isinstance(entry, dict) else None
    if isinstance(node, str) and node in seen:
        ctx.warn(f"{label}: parent links form a cycle at {node}; stopped there")
    path.reverse()
    return path


def _match_call(open_calls: list[ToolCall], tool: str | None) -> ToolCall | None:
    """The open call a tool's reply answers: same name, then same namespace, then the latest."""
    if not open_calls:
        return None
    for pick in (
        lambda c: c.name == tool,
        lambda c: tool is not None and c.name.split(".")[0] == tool.split(".")[0],
    ):
        for call in reversed(open_calls):
            if pick(call):
                open_calls.remove(call)
                return call
    return open_calls.pop()


@register
class ChatGPTExport(Importer):
    name = "chatgpt_export"
    description = "ChatGPT data export conversations.json (mapping tree, current_node)"
    extensions = (".json",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if text[:1] not in ("[", "{") or '"mapping"' not in text:
            return False
        if '"chat_messages"' in text:
            return False
        return '"children"' in text or '"current_node"' in text or '"author"' in text

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        for index, conv in iter_json_array(path, ctx):
            if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
                ctx.warn(f"item {index} is not a conversation with a 'mapping'; skipped")
                ctx.skip("malformed conversation")
                continue
            session = None
            with ctx.record("conversation", index=index):
                session = self._session(index, conv, ctx)
            if session is not None:
                yield session

    def _session(self, index: int, conv: dict[str, Any], ctx: ImportContext) -> Session:
        mapping: dict[str, Any] = conv["mapping"]
        conv_id = as_str(conv.get("id")) or as_str(conv.get("conversation_id"))
        label = f"conversation {conv_id or index}"
        path_ids = _path(mapping, conv.get("current_node"), ctx, label)
        on_path = set(path_ids)
        off_branch = sum(
            1 for k, v in mapping.items() if k not in on_path and isinstance(v, dict) and v.get("message")
        )
        if off_branch:
            ctx.skip("message on another branch", off_branch)

        messages: list[Message] = []
        open_calls: list[ToolCall] = []
        models: Counter = Counter()
        for node_id in path_ids:
            try:
                node = mapping.get(node_id)
                msg = node.get("message") if isinstance(node, dict) else None
                if not isinstance(msg, dict):
                    continue  # the synthetic root node
                author = as_dict(msg.get("author"))
                role = ROLES.get(author_role) if isinstance(author_role := author.get("role"), str) else None
                if role is None:
                    ctx.skip(f"author role {author.get('role')!r}", unknown=True)
                    continue
                content = msg.get("content")
                if not isinstance(content, dict):
                    ctx.skip("message without content")
                    continue
                metadata = as_dict(msg.get("metadata"))
                ct = content.get("content_type")
                if ct == "reasoning_recap":
                    ctx.skip("reasoning_recap")
                    continue
                text, parts, kind = _content(content, metadata)
                if kind == "unknown":
                    if not text.strip():
                        ctx.skip(f"content type {ct!r}", unknown=True)
                        continue
                    ctx.skip(f"content type {ct!r} (text kept)")
                    kind = "message"
                meta: dict[str, Any] = {"id": msg.get("id") or node_id}
                if ct not in ("text", None):
                    meta["content_type"] = ct
                if metadata.get("is_visually_hidden_from_conversation"):
                    meta["hidden"] = True
                if metadata.get("is_user_system_message"):
                    meta["custom_instructions"] = True
                if msg.get("weight") == 0:
                    meta["weight"] = 0
                if msg.get("status") not in (None, "finished_successfully"):
                    meta["status"] = msg.get("status")
                model = as_str(metadata.get("model_slug")) if role in ("assistant", "tool") else None
                if role == "assistant" and model:
                    models[model] += 1

                name = None
                tool_calls: tuple[ToolCall, ...] = ()
                tool_call_id = None
                recipient = msg.get("recipient")
                if role == "assistant" and recipient not in (None, "all", "assistant") and kind == "message":
                    call = ToolCall(name=str(recipient), arguments=text, id=meta["id"])
                    open_calls.append(call)
                    tool_calls, text = (call,), ""
                    if content.get("language") not in (None, "unknown"):
                        meta["language"] = content["language"]
                elif role == "tool":
                    name = as_str(author.get("name"))
                    answered = _match_call(open_calls, name)
                    tool_call_id = answered.id if answered else None
                elif role == "user" and as_str(author.get("name")):
                    name = author["name"]
                messages.append(
                    Message(
                        role=role,
                        text=text,
                        kind=kind,
                        name=name,
                        tool_calls=tool_calls,
                        tool_call_id=tool_call_id,
                        parts=tuple(parts),
                        timestamp=epoch_iso(msg.get("create_time")),
                        model=model,
                        meta=meta,
                    )
                )
            except RECORD_ERRORS as e:  # one message of unexpected shape: skipped, the rest kept
                ctx.bad_record(e, what="message", index=node_id)

        branch_points = sum(
            1 for v in mapping.values() if isinstance(v, dict) and len(as_list(v.get("children"))) > 1
        )
        metadata_out: dict[str, Any] = {
            "nodes": len(mapping),
            "branch_points": branch_points,
            "off_branch_messages": off_branch,
            "update_time": epoch_iso(conv.get("update_time")),
            "default_model_slug": conv.get("default_model_slug"),
            "gizmo_id": conv.get("gizmo_id"),
            "conversation_template_id": conv.get("conversation_template_id"),
            "is_archived": conv.get("is_archived"),
            "plugin_ids": conv.get("plugin_ids"),
        }
        model = as_str(conv.get("default_model_slug")) or (models.most_common(1)[0][0] if models else None)
        return Session(
            external_id=str(conv_id) if conv_id else f"{index}",
            format=self.name,
            messages=messages,
            title=as_str(conv.get("title")),
            model=model,
            started_at=epoch_iso(conv.get("create_time")),
            global_id=bool(conv_id),
            metadata={k: v for k, v in metadata_out.items() if v not in (None, [], {})},
        )
