"""The ``vcr_cassette`` importer: sniffs a cassette, and yields one session per chain of calls."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ...records import Session
from .._documents import first_model, first_user_title
from .._sniffing import partial_json
from ..base import ImportContext, Importer, head_text, register
from .calls import read_calls
from .chain import Chain, chain_calls

CASSETTE_HINT = re.compile(r"^(?:http_)?interactions:", re.M)  # a top-level YAML key
LLM_HINTS = (
    "/chat/completions", "/responses", "/v1/messages", "/messages", "generateContent", "/api/chat",
    "/completions", "rawPredict", "/invoke", '"messages"', '"contents"', "messages:", "contents:",
)


@register
class VCRCassette(Importer):
    """VCR.py / pytest-recording / Ruby VCR cassettes of LLM API calls: one session per chain of calls."""

    name = "vcr_cassette"
    description = "VCR.py / pytest-recording cassettes of OpenAI, Anthropic and Gemini API calls"
    extensions = (".yaml", ".yml", ".json")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if text.startswith("{"):
            doc = partial_json(head)
            items = doc.get("interactions", doc.get("http_interactions")) if isinstance(doc, dict) else None
            ok = isinstance(items, list) and bool(items) and isinstance(items[0], dict) and "request" in items[0]
        else:
            ok = bool(CASSETTE_HINT.search(text)) and "request:" in text
        return ok and any(h in text for h in LLM_HINTS)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        calls, info = read_calls(path, ctx)
        for chain in chain_calls(calls, ctx):
            session = None
            with ctx.record("chain of calls", index=chain.calls[0].index if chain.calls else None):
                session = chain_session(path, chain, self.name, {"cassette": info} if info else {})
            if session is not None:
                yield session



def chain_session(path: Path, chain: Chain, fmt: str, extra: dict[str, Any]) -> Session:
    """One chain of calls as a session of format ``fmt`` (``extra``: metadata of the file)."""
    first = chain.calls[0]
    msgs = chain.messages
    tools = next((c.params.get("tools") for c in reversed(chain.calls) if c.params.get("tools")), None)
    model = first.params.get("model") or first_model(msgs)
    metadata: dict[str, Any] = {
        "endpoint": sorted({c.endpoint for c in chain.calls}),
        "calls": [c.index for c in chain.calls],
        **extra,
    }
    if tools:
        metadata["tools"] = tools
    return Session(
        external_id=f"{path.stem}#{first.index}",
        format=fmt,
        messages=msgs,
        title=first_user_title(msgs),
        model=model if isinstance(model, str) else None,
        started_at=first.timestamp,
        metadata=metadata,
    )
