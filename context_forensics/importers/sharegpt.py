"""ShareGPT conversations (``from``/``value`` turns) and DialogStudio's unified ``log`` schema.

ShareGPT: a JSON list (or JSONL) of ``{"id", "conversations": [{"from", "value"}]}``. ``from``
is ``human``/``gpt`` in the original dumps; FastChat-style files also use ``system``,
``user``, ``assistant``, ``bing``, ``chatgpt``, ``function_call``/``observation`` (glaive).
DialogStudio: ``{dialog_key: {"original dialog id", "log": [{"user utterance",
"system response"}]}}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import Message, Session
from ._text import clip
from .base import RECORD_ERRORS, ImportContext, Importer, as_str, head_text, iter_jsonl, load_json, register

FROM_ROLE = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "system": "system",
    "function_call": "assistant",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
}


def _conversations(path: Path, ctx: ImportContext) -> Iterator[tuple[int | None, Any]]:
    if path.suffix == ".jsonl":
        yield from iter_jsonl(path, ctx)
        return
    data = load_json(path, ctx)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise InputError("expected a list of conversations", where=str(path))
    for item in data:
        yield None, item


@register
class ShareGPT(Importer):
    name = "sharegpt"
    description = "ShareGPT / FastChat conversations ({from, value} turns)"
    extensions = (".json", ".jsonl")
    priority = 60

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        return '"conversations"' in text and '"from"' in text and '"value"' in text

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        for index, (line, conv) in enumerate(_conversations(path, ctx)):
            try:
                if not isinstance(conv, dict) or not isinstance(conv.get("conversations"), list):
                    ctx.warn("entry has no 'conversations' list; skipped", line=line)
                    ctx.skip("malformed conversation")
                    continue
                messages = []
                for turn in conv["conversations"]:
                    if not isinstance(turn, dict):
                        ctx.skip("malformed turn")
                        continue
                    source = str(turn.get("from", "")).lower()
                    role = FROM_ROLE.get(source)
                    if role is None:  # whose turn it is decides what it was to the model: no guess
                        ctx.warn(f"unknown speaker {source!r}: turn not read", line=line)
                        ctx.skip(f"turn of speaker {source!r}", unknown=True)
                        continue
                    value = turn.get("value")
                    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                    meta = {"from": source} if source not in ("human", "gpt") else {}
                    messages.append(Message(role=role, text=text, meta=meta))
                ext = str(conv.get("id") or f"{index}")
                first_user = next((m.text for m in messages if m.role == "user"), "")
                yield Session(
                    external_id=ext,
                    format=self.name,
                    messages=messages,
                    title=as_str(conv.get("title")) or clip(first_user, 80) or None,
                    model=as_str(conv.get("model")),
                    metadata={"index": index},
                )
            except RECORD_ERRORS as e:  # a conversation of unexpected shape: skipped, the rest kept
                ctx.bad_record(e, what="conversation", index=index, line=line)


@register
class DialogStudio(Importer):
    name = "dialogstudio"
    description = "Salesforce DialogStudio unified dialogs (log[] of user utterance / system response)"
    extensions = (".json",)
    priority = 60

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        return text.startswith("{") and '"user utterance"' in text and '"log"' in text

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        data = load_json(path, ctx)
        if not isinstance(data, dict):
            raise InputError("expected an object of dialogs keyed by id", where=str(path))
        for key, dialog in data.items():
            try:
                if not isinstance(dialog, dict) or not isinstance(dialog.get("log"), list):
                    ctx.skip("malformed dialog")
                    continue
                messages = []
                for turn in dialog["log"]:
                    if not isinstance(turn, dict):
                        ctx.skip("malformed turn")
                        continue
                    if turn.get("user utterance"):
                        messages.append(Message(role="user", text=str(turn["user utterance"])))
                    if turn.get("system response"):
                        messages.append(Message(role="assistant", text=str(turn["system response"])))
                info = dialog.get("original dialog info") or {}
                yield Session(
                    external_id=str(key),
                    format=self.name,
                    messages=messages,
                    title=clip(messages[0].text, 80) if messages else None,
                    model=as_str(info.get("model")) if isinstance(info, dict) else None,
                    metadata={"original_id": dialog.get("original dialog id")},
                )
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="dialog", index=str(key))
