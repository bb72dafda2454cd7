"""Claude.ai data export: ``conversations.json``.

A JSON list of ``{uuid, name, created_at, chat_messages: [...]}``; each chat message has
``sender`` (human/assistant), a legacy flat ``text`` and, in exports since 2024, ``content``
blocks: ``text``, ``thinking``, ``tool_use``, ``tool_result``. One session per conversation,
keyed by its uuid. ``projects.json`` and ``users.json`` from the same export are not session
logs and are not claimed.

Mapping:

- ``content`` wins over ``text`` when present: the flat ``text`` runs thinking and answer
  together with no separator.
- Claude.ai runs its tools (web search, artifacts, analysis) server-side and records call and
  result inside one assistant chat message. That message is split at each ``tool_result``:
  assistant (text, thinking, tool calls) -> tool message(s) -> assistant (what follows), so a
  window holds the call and its result in order. Exports often give the blocks no ids; calls
  then get ``<message uuid>:<n>`` ids and results pair with the oldest open call of the same
  tool name.
- A human message's ``attachments`` carry ``extracted_content``, the text Claude read: it is
  appended to the message text under a ``[attachment: name]`` line. ``files`` (uploads
  without extracted text, e.g. images) become parts.
- When messages carry ``parent_message_uuid`` (edited / regenerated branches), the session
  follows the chain ending at ``current_leaf_message_uuid`` (else the last message).

There is no token usage in this format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from ..records import Message, Session, ToolCall
from ._images import image_part
from ._stream import iter_json_array
from ._text import clip
from .base import (
    ImportContext,
    Importer,
    as_dict,
    as_int,
    as_list,
    as_str,
    head_text,
    register,
    text_of,
)

SENDERS = {"human": "user", "user": "user", "assistant": "assistant"}


def _chain(
    messages: list[dict[str, Any]], leaf: Any, ctx: ImportContext, label: str
) -> list[dict[str, Any]]:
    """The messages on the current branch, oldest first."""
    if not any(isinstance(m.get("parent_message_uuid"), str) for m in messages):
        return messages
    by_id = {m["uuid"]: m for m in messages if as_str(m.get("uuid"))}
    if not isinstance(leaf, str) or leaf not in by_id:
        leaf = as_str(messages[-1].get("uuid"))
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    node = leaf
    while isinstance(node, str) and node in by_id and node not in seen:
        seen.add(node)
        chain.append(by_id[node])
        node = by_id[node].get("parent_message_uuid")
    chain.reverse()
    if len(chain) < len(messages):
        ctx.skip("message on another branch", len(messages) - len(chain))
    if not chain:
        ctx.warn(f"{label}: parent links lead nowhere; kept the messages in file order")
        return messages
    return chain


def _image(block: dict[str, Any]) -> dict[str, Any]:
    """An image content block (base64 or url source) as a placeholder."""
    src = as_dict(block.get("source"))
    return image_part(
        base64_data=src.get("data") if src.get("type") == "base64" else None,
        url=src.get("url"),
        media_type=src.get("media_type"),
    )


def _result_text(block: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    content = block.get("content")
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        texts = []
        for item in content:
            if not isinstance(item, dict):
                if isinstance(item, str):
                    texts.append(item)
                continue
            t = item.get("type")
            if t == "text":
                texts.append(str(item.get("text") or ""))
            elif t == "knowledge":  # a web search hit
                texts.append(
                    "\n".join(str(item[k]) for k in ("title", "url", "text") if item.get(k))
                )
            elif t == "image":
                parts.append(_image(item))
            else:
                texts.append(text_of([item]) if isinstance(item.get("text"), str) else "")
        return "\n\n".join(t for t in texts if t), parts
    if isinstance(content, str):
        return content, parts
    if content is None:
        return "", parts
    return json.dumps(content, ensure_ascii=False), parts


def _file_part(f: dict[str, Any]) -> dict[str, Any]:
    kind = f.get("file_kind")
    thumb = as_dict(f.get("preview_asset") or f.get("thumbnail_asset"))
    if kind == "image" or str(f.get("file_type", "")).startswith("image/"):
        part = image_part(width=as_int(thumb.get("image_width")), height=as_int(thumb.get("image_height")))
    else:
        part = {"type": "file"}
    if f.get("file_name"):
        part["file_name"] = f["file_name"]
    if f.get("file_uuid"):
        part["file_uuid"] = f["file_uuid"]
    return part


@register
class ClaudeAIExport(Importer):
    name = "claude_ai_export"
    description = "Claude.ai data export conversations.json (chat_messages with content blocks)"
    extensions = (".json",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if text[:1] not in ("[", "{") or '"mapping"' in text:
            return False
        return '"chat_messages"' in text and '"uuid"' in text

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        for index, conv in iter_json_array(path, ctx):
            if not isinstance(conv, dict) or not isinstance(conv.get("chat_messages"), list):
                ctx.warn(f"item {index} is not a conversation with 'chat_messages'; skipped")
                ctx.skip("malformed conversation")
                continue
            if not conv["chat_messages"]:
                ctx.skip("empty conversation")
                continue
            session = None
            with ctx.record("conversation", index=index):
                session = self._session(index, conv, ctx)
            if session is not None:
                yield session

    def _session(self, index: int, conv: dict[str, Any], ctx: ImportContext) -> Session:
        uuid = as_str(conv.get("uuid"))
        label = f"conversation {uuid or index}"
        raw = [m for m in conv["chat_messages"] if isinstance(m, dict)]
        if len(raw) < len(conv["chat_messages"]):
            ctx.skip("malformed message", len(conv["chat_messages"]) - len(raw))
        messages: list[Message] = []
        for m in _chain(raw, conv.get("current_leaf_message_uuid"), ctx, label):
            role = SENDERS.get(m["sender"].lower()) if isinstance(m.get("sender"), str) else None
            if role is None:
                ctx.skip(f"sender {m.get('sender')!r}", unknown=True)
                continue
            with ctx.record("message", index=as_str(m.get("uuid")) or len(messages)):
                messages.extend(self._convert(m, role, ctx))
        project = conv.get("project")
        metadata = {
            "updated_at": conv.get("updated_at"),
            "summary": conv.get("summary") or None,
            "project_uuid": as_str(conv.get("project_uuid")) or as_str(as_dict(project).get("uuid")),
            "chat_messages": len(raw),
        }
        first_user = next((x.text for x in messages if x.role == "user"), "")
        return Session(
            external_id=str(uuid) if uuid else f"{index}",
            format=self.name,
            messages=messages,
            title=as_str(conv.get("name")) or clip(first_user, 80) or None,
            model=as_str(conv.get("model")),
            started_at=as_str(conv.get("created_at")),
            global_id=bool(uuid),
            metadata={k: v for k, v in metadata.items() if v is not None},
        )

    def _convert(self, m: dict[str, Any], role: str, ctx: ImportContext) -> list[Message]:
        uuid = as_str(m.get("uuid"))
        ts = as_str(m.get("created_at"))
        blocks = m.get("content")
        if not isinstance(blocks, list) or not blocks:
            blocks = [{"type": "text", "text": m.get("text") or ""}]
        base_meta: dict[str, Any] = {"uuid": uuid} if uuid else {}

        out: list[Message] = []
        texts: list[str] = []
        parts: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        open_calls: list[ToolCall] = []
        n_calls = 0

        def flush() -> None:
            nonlocal texts, parts, calls
            if texts or parts or calls:
                out.append(
                    Message(
                        role=role,
                        text="\n\n".join(t for t in texts if t),
                        tool_calls=tuple(calls),
                        parts=tuple(parts),
                        timestamp=ts,
                        meta=dict(base_meta),
                    )
                )
            texts, parts, calls = [], [], []

        for block in blocks:
            if not isinstance(block, dict):
                ctx.skip("malformed content block")
                continue
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "thinking":
                parts.append({"type": "thinking", "text": str(block.get("thinking") or "")})
            elif kind == "redacted_thinking":
                parts.append({"type": "redacted_thinking", "bytes": len(str(block.get("data") or ""))})
            elif kind == "tool_use":
                n_calls += 1
                call = ToolCall(
                    name=str(block.get("name") or ""),
                    arguments=json.dumps(block.get("input") or {}, ensure_ascii=False),
                    id=as_str(block.get("id")) or f"{uuid}:{n_calls}",
                )
                calls.append(call)
                open_calls.append(call)
            elif kind == "tool_result":
                if role == "assistant":
                    flush()  # what came before the result was said before the tool ran
                name = as_str(block.get("name"))
                call_id = as_str(block.get("tool_use_id"))
                if call_id:
                    open_calls[:] = [c for c in open_calls if c.id != call_id]
                else:
                    match = next((c for c in open_calls if c.name == name), None) or (
                        open_calls[0] if open_calls else None
                    )
                    if match is not None:
                        open_calls.remove(match)
                        call_id = match.id
                text, rparts = _result_text(block)
                meta = dict(base_meta)
                if block.get("is_error"):
                    meta["is_error"] = True
                tool_msg = Message(
                    role="tool",
                    text=text,
                    name=name,
                    tool_call_id=call_id,
                    parts=tuple(rparts),
                    timestamp=ts,
                    meta=meta,
                )
                # (a user turn flushes its own text only at the end, after its results)
                out.append(tool_msg)
            elif kind == "image":
                parts.append(_image(block))
            else:
                ctx.skip(f"content block {kind!r}", unknown=True)
                if isinstance(block.get("text"), str) and block["text"]:
                    texts.append(block["text"])
        if role == "user":
            for a in as_list(m.get("attachments")):
                if not isinstance(a, dict):
                    continue
                extracted = a.get("extracted_content")
                name = a.get("file_name") or "attachment"
                if isinstance(extracted, str) and extracted:
                    texts.append(f"[attachment: {name}]\n{extracted}")
                parts.append(
                    {
                        "type": "attachment",
                        "file_name": name,
                        "file_type": a.get("file_type"),
                        "file_size": a.get("file_size"),
                    }
                )
            for f in as_list(m.get("files_v2") or m.get("files")):
                if isinstance(f, dict):
                    parts.append(_file_part(f))
        flush()
        return out
