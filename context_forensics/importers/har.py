"""HAR captures of LLM API requests: exact windows.

A HAR file (HTTP Archive 1.2: ``{"log": {"version", "creator", "entries": [{"request",
"response", "startedDateTime", ...}]}}``) written by a recorder (Polly.JS's ``persister:fs``), a
browser's developer tools, or mitmproxy's ``savehar`` holds each HTTP exchange whole. Where an
entry is a POST to a model endpoint (OpenAI ``/chat/completions`` and ``/v1/responses``,
Anthropic ``/v1/messages``, Gemini ``:generateContent``), its request body IS the window the model
read, and its response's usage is the recorded usage: the replay of such a call is exact, not
estimated.

The entries are read as the ``vcr_cassette`` importer reads a cassette's interactions (the same
request and response parsing, streams included, and the same chaining: a call whose request
repeats an earlier call's request plus that call's answer continues its session; any other call
starts a session of its own). Response bodies are plain text (JSON, SSE), or base64
(``content.encoding``): the whole body, or, as Polly.JS stores a binary body, a JSON array of
base64 chunks; a gzip body is inflated through the bounded ``_inflate``. Entries of other URLs (a
page, an auth or model-listing call) are skipped and counted; a HAR file none of whose first
entries (its first 64 KiB) calls a model endpoint (a browser's capture of web pages) is not
claimed.

``metadata["captures"]`` lists per captured call what its request sent beside the conversation:
its system prompt (messages, characters, content hash) and tool definitions (count, names,
content hash), the recorded prompt size, and the ``User-Agent`` with the agent and version it
names (``agent_of_user_agent``); a session of a known agent's requests names it in
``metadata["agent"]``. A replay of a transcript of the same agent version takes the capture's
system prompt and tools as its unlogged overhead (``analysis/replay/captures.py``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..hashing import content_hash
from ..records import Session
from ._json import parse_json
from ._sniffing import partial_json
from .base import ImportContext, Importer, as_dict, as_str, head_text, load_json, register
from .cassette.calls import Call, calls_of
from .cassette.chain import Chain, chain_calls
from .cassette.importer import chain_session

# a model endpoint's path (an Azure deployment's or a proxy's prefix allowed before it)
ENDPOINT = re.compile(r"(?:/v1/messages|/chat/completions|/v1/responses|/openai/responses"
                      r"|:generateContent|:streamGenerateContent)/?$")
# a ``"url": "..."`` key of the head (not one quoted inside a recorded body, whose quotes are escaped)
_URL = re.compile(r'(?<!\\)"url"\s*:\s*"(https?://[^"\\]*)"')


# A User-Agent's product token -> the agent (``store/agents.FORMAT_AGENTS``' names), from the
# agents' source: Claude Code's ``claude-cli/<version> (external, cli)``, codex-rs's
# ``get_codex_user_agent`` (``<originator>/<version> (<os>; <arch>) <terminal>``, the originator
# ``codex_cli_rs``, ``codex_exec`` ...), Gemini CLI's ``GeminiCLI/<version>/<model> (<platform>;
# <arch>)``, OpenCode's ``opencode/<version>``.
_PRODUCTS = (
    (re.compile(r"claude-cli/([0-9][\w.+-]*)"), "claude-code"),
    (re.compile(r"codex_[a-z_]+/([0-9][\w.+-]*)"), "codex"),
    (re.compile(r"GeminiCLI/([0-9][\w.+-]*)"), "gemini-cli"),
    (re.compile(r"opencode/([0-9][\w.+-]*)"), "opencode"),
)


def agent_of_user_agent(ua: str | None) -> tuple[str | None, str | None]:
    """(agent, version) a request's User-Agent names at its start, or (None, None).

    >>> agent_of_user_agent("codex_cli_rs/0.58.0 (Ubuntu 22.4.0; x86_64) xterm-256color")
    ('codex', '0.58.0')
    >>> agent_of_user_agent("python-httpx/0.27.0")
    (None, None)
    """
    for rx, agent in _PRODUCTS:
        m = rx.match((ua or "").strip())
        if m:
            return agent, m.group(1)
    return None, None


def is_endpoint(url: str) -> bool:
    """Whether ``url``'s path is a model endpoint (its query string aside)."""
    path = re.sub(r"^https?://[^/]+", "", url).split("?", 1)[0].split("#", 1)[0]
    return bool(ENDPOINT.search(path))


@register
class HarCapture(Importer):
    """HAR 1.2 captures of provider API requests (Polly.JS, browser dev tools, mitmproxy)."""

    name = "har"
    description = ("HAR 1.2 captures (Polly.JS, dev tools, mitmproxy savehar) of OpenAI, Anthropic and Gemini API "
                   "requests")
    extensions = (".har", ".json")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if not text.startswith("{"):
            return False
        doc = partial_json(head)
        log = doc.get("log") if isinstance(doc, dict) else None
        if not isinstance(log, dict) or not isinstance(log.get("entries"), list):
            return False
        return any(is_endpoint(u) for u in _URL.findall(text))

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        doc = load_json(path, ctx)
        log = doc.get("log") if isinstance(doc, dict) else None
        entries = log.get("entries") if isinstance(log, dict) else None
        if not isinstance(log, dict) or not isinstance(entries, list):  # a list of entries is in a dict log
            raise InputError("expected a HAR file: {\"log\": {\"entries\": [...]}}", where=str(path),
                             hint="force another format with --format")
        items = [_interaction(e, i, ctx) for i, e in enumerate(entries)]
        calls = calls_of(items, ctx, noun="entry")
        info = _info(log)
        for chain in chain_calls(calls, ctx):
            session = None
            with ctx.record("chain of calls", index=chain.calls[0].index if chain.calls else None):
                caps = _captures(chain)
                extra: dict[str, Any] = {"har": info, "captures": caps}
                agent = next((c["agent"] for c in caps if c.get("agent")), None)
                if agent:
                    extra["agent"] = agent
                session = chain_session(path, chain, self.name, extra)
            if session is not None:
                yield session


def _info(log: dict[str, Any]) -> dict[str, Any]:
    """The HAR version and its creator (Polly.JS writes its version and persister)."""
    out: dict[str, Any] = {}
    if isinstance(log.get("version"), str):
        out["version"] = log["version"]
    creator = log.get("creator")
    if isinstance(creator, dict):
        out["creator"] = {k: creator[k] for k in ("name", "version", "comment") if isinstance(creator.get(k), str)}
    return out


def _headers(h: Any) -> dict[str, list[str]]:
    """HAR headers (a list of ``{name, value}``) as a cassette holds them: name -> values."""
    out: dict[str, list[str]] = {}
    for x in h if isinstance(h, list) else []:
        if isinstance(x, dict) and isinstance(x.get("name"), str):
            out.setdefault(x["name"], []).append(str(x.get("value") or ""))
    return out


def _content(content: Any, ctx: ImportContext, what: str) -> bytes | None:
    """A response body's bytes: ``content.text``, base64-decoded when ``content.encoding`` says so
    (Polly.JS: a JSON array of base64 chunks of the body)."""
    if not isinstance(content, dict) or not isinstance(content.get("text"), str):
        return None
    text = content["text"]
    if str(content.get("encoding") or "").lower() != "base64":
        return text.encode("utf-8", errors="replace")
    stripped = text.strip()
    try:
        if stripped.startswith("["):
            try:
                chunks = parse_json(stripped)
            except json.JSONDecodeError:
                chunks = None
            if isinstance(chunks, list) and all(isinstance(c, str) for c in chunks):
                return b"".join(base64.b64decode(c, validate=True) for c in chunks)
        return base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        ctx.warn(f"{what}: response body marked base64 does not decode; body ignored")
        return None


def _interaction(entry: Any, i: int, ctx: ImportContext) -> Any:
    """A HAR entry in the shape of a cassette interaction (``cassette.calls.calls_of``)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
        return entry  # calls_of warns and counts it
    req, res = entry["request"], as_dict(entry.get("response"))
    post = as_dict(req.get("postData"))
    return {
        "request": {"uri": as_str(req.get("url")) or "", "method": as_str(req.get("method")) or "GET",
                    "headers": _headers(req.get("headers")), "body": post.get("text")},
        "response": {"status": {"code": res.get("status")}, "headers": _headers(res.get("headers")),
                     "body": _content(res.get("content"), ctx, f"entry {i}")},
        "recorded_at": entry.get("startedDateTime"),
    }


def _captures(chain: Chain) -> list[dict[str, Any]]:
    """Per captured call: what its request sent beside the conversation (system prompt, tools)."""
    return [_capture(c) for c in chain.calls]


def _capture(call: Call) -> dict[str, Any]:
    system = [m for m in call.request if m.role in ("system", "developer")]
    tools = call.params.get("tools")
    answer = next((m for m in call.response if m.usage is not None), None)
    out: dict[str, Any] = {
        "entry": call.index,
        "endpoint": call.params.get("endpoint"),
        "model": call.params.get("model"),
        "request_messages": len(call.request),
        "system": {"messages": len(system), "chars": sum(len(m.text) for m in system),
                   "hash": content_hash([m.text for m in system]) if system else None},
        "tools": {"count": len(tools) if isinstance(tools, list) else 0,
                  "names": [n for t in tools if (n := _tool_name(t))] if isinstance(tools, list) else [],
                  "hash": content_hash(tools) if tools else None},
    }
    if answer is not None and answer.usage is not None:
        out["recorded_prompt_tokens"] = answer.usage.prompt_tokens
    if call.user_agent:
        out["user_agent"] = call.user_agent
        agent, version = agent_of_user_agent(call.user_agent)
        if agent:
            out.update(agent=agent, agent_version=version)
    return out


def _tool_name(t: Any) -> str | None:
    if not isinstance(t, dict):
        return None
    fn = f if isinstance(f := t.get("function"), dict) else t
    return as_str(fn.get("name"))
