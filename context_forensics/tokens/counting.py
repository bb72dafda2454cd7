"""Token counting: tokenizers by config name, chat-format overhead, cached counts, calibration.

Every figure carries one of four labels:

- ``exact``: the model's own tokenizer and a framing formula checked against recorded usage
  (OpenAI: 3 per message, +1 per name, 3 for reply priming, tool schemas and tool traffic as
  below);
- ``recorded``: read from the log's usage (not computed here);
- ``calibrated``: computed, then mapped through a per-session fit to the recorded usage
  (see :func:`fit_calibration` and ``fidelity.py``);
- ``estimated``: a stand-in tokenizer (Claude, Gemini: no offline tokenizer exists), the
  UTF-8-bytes/4 guess of ``approx``, or a part whose cost the log cannot tell (an image
  without dimensions). Each such part leaves a flag saying what was assumed.

Counting is split so the expensive part is cached: a message is *planned* into strings to
tokenize plus a structural constant (per-message overhead, images). Only the strings' token sum
is stored, keyed by the message's content hash and a scheme key
(``<tokenizer>/<chat format>/v<formula>``), in the store's ``token_counts`` table; the constant
is recomputed from the message's structure, which needs no tokenizer.

How OpenAI frames tool traffic, fitted to the corpus' Inspect logs and OpenAI cassettes, where
the exact request and the recorded ``prompt_tokens`` are both known (all 23 calls match to the
token), and to published API counts for nested schemas and ``tool_choice``:

- tool schemas: a ``namespace functions { ... }`` block (TypeScript-like types; nested objects
  unindented, with their descriptions), each description line as ``// line`` (stripped, blank
  lines ``//``); +9 tokens, -4 when the prompt has a system message; ``tool_choice`` "none" +1,
  a forced function +7 + its name (Chat Completions) or +4 (Responses);
- an assistant turn with one tool call: ``assistant to=functions.NAME`` as the role, the
  arguments as content, +1;
- with several calls: one ``assistant to=multi_tool_use.parallel`` message whose content is the
  compact JSON ``{"tool_uses":[{"recipient_name":"functions.NAME","parameters":{...}}, ...]}``;
- a tool result: ``functions.NAME`` as the role;
- a Responses-API reasoning item (Codex): as many tokens as its call recorded as reasoning.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from ..errors import UsageError
from ..hashing import content_hash
from ..config.models import CHAT_ANTHROPIC, CHAT_GENERIC, CHAT_OPENAI, ModelSpec
from ..records import (
    KIND_CLEARED_TOOL_RESULT,
    KIND_COMPACTION_BOUNDARY,
    KIND_REASONING,
    Message,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..store.db import Store

EXACT = "exact"
RECORDED = "recorded"
CALIBRATED = "calibrated"
ESTIMATED = "estimated"
FIGURE_KINDS = (EXACT, RECORDED, CALIBRATED, ESTIMATED)

# Bump when a framing formula changes: old cached sums then simply stop matching.
FORMULA_VERSION = 1

# --------------------------------------------------------------------------------------------
# tokenizers

# Config tokenizer name -> (encoding used, kind, scale). Claude's and Gemini's tokenizers are
# not published: they are counted with o200k_base, scaled by the recorded/computed ratio
# measured on the corpus (bench/fidelity.py: Claude 3.5 Sonnet in OpenHands 1.23-1.25,
# Claude 4.x in Claude Code 1.19-1.45 beside a hidden prefix; Gemini 3 Pro in mini-swe-agent
# 1.12-1.19). cl100k_base and llama3 fit no better once calibrated.
TOKENIZER_ENCODINGS: dict[str, tuple[str | None, str, float]] = {
    "o200k_base": ("o200k_base", EXACT, 1.0),
    "cl100k_base": ("cl100k_base", EXACT, 1.0),
    "llama3": ("llama3", EXACT, 1.0),
    "qwen3": ("qwen3", EXACT, 1.0),
    "claude": ("o200k_base", ESTIMATED, 1.2),
    "gemini": ("o200k_base", ESTIMATED, 1.15),
    "approx": (None, ESTIMATED, 1.0),
}


def _no_surrogates(text: str) -> str:
    # What tiktoken does with text it cannot encode: lone surrogates become U+FFFD.
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _approx_count(text: str) -> int:
    # ~4 bytes of UTF-8 per token: right for English prose, conservative for CJK.
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


class Tokenizer:
    """Counts tokens for one config tokenizer name; ``kind`` says whether counts are exact.

    A stand-in (``claude``, ``gemini``) scales its encoding's counts by ``scale``.
    ``count_batch`` is the only path to the encoder (quicktok's parallel counter when
    installed, tiktoken otherwise), which keeps caching testable: a spy on it sees every
    tokenizer call.
    """

    def __init__(self, name: str) -> None:
        if name not in TOKENIZER_ENCODINGS:
            raise UsageError(
                f"unknown tokenizer {name!r}", hint="known: " + ", ".join(TOKENIZER_ENCODINGS)
            )
        self.name = name
        self.encoding, self.kind, self.scale = TOKENIZER_ENCODINGS[name]
        self._lock = threading.Lock()
        self._fast: Any = None  # quicktok tokenizer
        self._slow: Any = None  # tiktoken Encoding

    @property
    def key(self) -> str:
        """Cache key part: the config name, plus the stand-in encoding when it is an estimate."""
        if self.encoding is None:
            return f"{self.name}~bytes4"
        if self.encoding == self.name:
            return self.name
        return f"{self.name}~{self.encoding}" + (f"*{self.scale:g}" if self.scale != 1 else "")

    @property
    def exact(self) -> bool:
        return self.kind == EXACT

    def _backend(self) -> tuple[Any, Any]:
        with self._lock:
            if self._fast is None and self._slow is None:
                try:
                    import quicktok

                    self._fast = quicktok.get_encoding(self.encoding)
                except Exception:  # noqa: BLE001 - not installed, or lacks this encoding: tiktoken
                    from .assets import get_encoding

                    self._slow = get_encoding(self.encoding)
            return self._fast, self._slow

    def count_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Token counts of many texts (special-token text counts as plain text), int64."""
        texts = list(texts)
        if not texts:
            return np.zeros(0, dtype=np.int64)
        if self.encoding is None:
            return np.fromiter((_approx_count(t) for t in texts), dtype=np.int64, count=len(texts))
        fast, slow = self._backend()
        if fast is not None:
            import quicktok

            try:
                counts = np.asarray(quicktok.count_batch(fast, texts), dtype=np.int64)
            except (TypeError, UnicodeError):  # lone surrogates (from \ud800-style JSON escapes)
                counts = np.asarray(quicktok.count_batch(fast, [_no_surrogates(t) for t in texts]),
                                    dtype=np.int64)
        else:
            counts = np.fromiter((len(slow.encode_ordinary(t)) for t in texts), dtype=np.int64,
                                 count=len(texts))
        if self.scale != 1:
            counts = np.rint(counts * self.scale).astype(np.int64)
        return counts

    def count(self, text: str) -> int:
        return int(self.count_batch([text])[0]) if text else 0

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r}, encoding={self.encoding!r}, kind={self.kind!r})"


@cache
def get_tokenizer(name: str) -> Tokenizer:
    """The shared ``Tokenizer`` for a config tokenizer name (see ``config.TOKENIZERS``)."""
    return Tokenizer(name)


# --------------------------------------------------------------------------------------------
# cache


def _has_json_each() -> bool:
    """Whether this process's SQLite has ``json_each`` (built in from 3.38; optional before)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("SELECT count(*) FROM json_each('[]')").fetchone()
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return True


_JSON_EACH = _has_json_each()


class TokenCache:
    """Token sums by (content hash, scheme key): in memory, and in the store when there is one.

    Reads and writes go in batches, one query per batch of hashes, never one per message.
    """

    CHUNK = 500

    def __init__(self, store: Store | None = None) -> None:
        self.store = store
        self.memory: dict[tuple[str, str], int] = {}

    def get_many(self, hashes: Iterable[str], key: str) -> dict[str, int]:
        want = list(dict.fromkeys(hashes))
        memory = self.memory
        found = {h: memory[(h, key)] for h in want if (h, key) in memory} if memory else {}
        missing = [h for h in want if h not in found] if found else want
        if missing and self.store is not None:
            conn = self.store.db.conn
            for i in range(0, len(missing), self.CHUNK):
                chunk = missing[i : i + self.CHUNK]
                rows = conn.execute(
                    f"SELECT hash, count FROM token_counts WHERE tokenizer = ? "
                    f"AND hash IN ({','.join('?' * len(chunk))})",
                    [key, *chunk],
                ).fetchall()
                for h, c in rows:
                    found[h] = int(c)
                    self.memory[(h, key)] = int(c)
        return found

    def put_many(self, counts: Mapping[str, int], key: str) -> None:
        if not counts:
            return
        counts = {h: int(c) for h, c in counts.items()}
        memory = self.memory
        for h, c in counts.items():
            memory[(h, key)] = c
        if self.store is None:
            return
        # A read-only or busy store only loses the persistent cache, never the count.
        if _JSON_EACH:  # one statement over a JSON object: about twice as fast as a row per hash
            self.store.write_rows("INSERT OR REPLACE INTO token_counts (hash, tokenizer, count) "
                                  "SELECT key, ?, value FROM json_each(?)", [(key, orjson.dumps(counts).decode())])
            return
        rows = [(h, key, c) for h, c in counts.items()]
        self.store.write_rows("INSERT OR REPLACE INTO token_counts (hash, tokenizer, count) VALUES (?, ?, ?)", rows)


# --------------------------------------------------------------------------------------------
# images

# OpenAI tile models: (base, per 512px tile) for high detail; low detail costs ``base``.
_OPENAI_TILE_COSTS: tuple[tuple[str, tuple[int, int]], ...] = (
    ("gpt-4o-mini", (2833, 5667)),
    ("gpt-5-mini", (0, 0)),  # patch model, below
    ("gpt-5-nano", (0, 0)),
    ("gpt-5", (70, 140)),
    ("o1", (75, 150)),
    ("o3", (75, 150)),
    ("computer-use", (65, 129)),
    ("gpt-4.1-mini", (0, 0)),
    ("gpt-4.1-nano", (0, 0)),
    ("o4-mini", (0, 0)),
)
_DEFAULT_TILE_COST = (85, 170)  # gpt-4o, gpt-4.1, gpt-4-turbo (vision)
# 32px-patch models: token multiplier; at most 1536 patches.
_OPENAI_PATCH_MULT = {"gpt-5-mini": 1.62, "gpt-5-nano": 2.46, "gpt-4.1-mini": 1.62,
                      "gpt-4.1-nano": 2.46, "o4-mini": 1.72}
UNKNOWN_IMAGE_OPENAI = 765  # a 1024x1024 image at high detail on gpt-4o (4 tiles)
UNKNOWN_IMAGE_ANTHROPIC = 1600  # the most one image can cost before Claude scales it down
UNKNOWN_IMAGE_OTHER = 258  # Gemini: one image up to 384px; larger ones are tiled


def _model_key(name: str | None) -> str:
    n = (name or "").lower()
    return n.rsplit("/", 1)[-1]


def openai_image_tokens(width: int, height: int, detail: str | None = "auto", model: str | None = None) -> int:
    """OpenAI's image cost: tiles (fit in 2048², shortest side 768, 512px tiles) or 32px patches."""
    m = _model_key(model)
    detail = (detail or "auto").lower()
    for prefix, mult in _OPENAI_PATCH_MULT.items():
        if m.startswith(prefix):
            return _patch_tokens(width, height, mult)
    base, per_tile = next((c for p, c in _OPENAI_TILE_COSTS if m.startswith(p) and c != (0, 0)),
                          _DEFAULT_TILE_COST)
    if detail == "low":
        return base
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    tiles = math.ceil(int(w) / 512) * math.ceil(int(h) / 512)
    return base + per_tile * tiles


def _patch_tokens(width: int, height: int, mult: float, cap: int = 1536) -> int:
    # OpenAI's worked example: 1800x2400 -> 1056x1408 -> 33x44 = 1452 patches.
    w, h = float(width), float(height)
    patches = math.ceil(w / 32) * math.ceil(h / 32)
    if patches > cap:
        s = math.sqrt(cap * 32 * 32 / (w * h))
        s *= min(math.floor(w * s / 32) / (w * s / 32), math.floor(h * s / 32) / (h * s / 32))
        w, h = int(w * s), int(h * s)
        patches = min(cap, math.ceil(w / 32) * math.ceil(h / 32))
    return math.ceil(patches * mult)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Claude's image cost, width·height/750, after scaling the long edge to at most 1568px."""
    w, h = float(width), float(height)
    if max(w, h) > 1568:
        s = 1568 / max(w, h)
        w, h = w * s, h * s
    return min(UNKNOWN_IMAGE_ANTHROPIC, math.ceil(int(w) * int(h) / 750))


def _dims(part: Mapping[str, Any]) -> tuple[int, int] | None:
    w, h = part.get("width"), part.get("height")
    if isinstance(w, (int, float)) and isinstance(h, (int, float)) and w > 0 and h > 0:
        return int(w), int(h)
    return None


# --------------------------------------------------------------------------------------------
# tool schemas


def normalize_tools(tools: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    """Function definitions ``{name, description, parameters}`` from any provider's tool list.

    Reads OpenAI Chat (``{"type": "function", "function": {...}}``), OpenAI Responses and
    Inspect (flat), Anthropic (``input_schema``) and Gemini (``functionDeclarations``) shapes.
    Returns (functions, others); others are non-function tools (web search, code interpreter,
    custom grammar tools) whose cost can only be estimated.
    """
    funcs: list[dict[str, Any]] = []
    others: list[Any] = []
    if isinstance(tools, Mapping):
        tools = [tools]
    if not isinstance(tools, list):
        return funcs, others
    for t in tools:
        if not isinstance(t, Mapping):
            others.append(t)
            continue
        if isinstance(t.get("functionDeclarations") or t.get("function_declarations"), list):
            f2, o2 = normalize_tools(t.get("functionDeclarations") or t.get("function_declarations"))
            funcs += f2
            others += o2
            continue
        fn = t.get("function") if isinstance(t.get("function"), Mapping) else t
        kind = t.get("type")
        if kind not in (None, "function") and fn is t:
            others.append(t)
            continue
        name = fn.get("name")
        if not isinstance(name, str):
            others.append(t)
            continue
        params = fn.get("parameters")
        if params is None:
            params = fn.get("input_schema")
        funcs.append({"name": name, "description": fn.get("description") or "",
                      "parameters": params if isinstance(params, Mapping) else {}})
    return funcs, others


def _comment(text: str) -> list[str]:
    # Each description line becomes its own "//" comment, stripped; blank lines stay as "//".
    return [f"// {ln.strip()}" if ln.strip() else "//" for ln in str(text).split("\n")]


def _ts_type(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_ts_type(s) for s in schema[key]) or "any"
    t = schema.get("type")
    if isinstance(t, list):
        return " | ".join(_ts_type({**schema, "type": x}) for x in t) or "any"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in enum)
    if t == "string":
        return "string"
    if t in ("number", "integer"):
        return "number"
    if t == "boolean":
        return "boolean"
    if t == "null":
        return "null"
    if t == "array":
        items = schema.get("items")
        return f"{_ts_type(items)}[]" if isinstance(items, Mapping) else "any[]"
    if t == "object" or "properties" in schema:
        if not schema.get("properties"):
            return "object"
        return "{\n" + _ts_props(schema) + "\n}"
    return "any"


def _ts_props(schema: Mapping[str, Any]) -> str:
    # Nested objects are not indented and keep their descriptions (fits the API's counts).
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return ""
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    lines: list[str] = []
    for name, prop in props.items():
        desc = prop.get("description") if isinstance(prop, Mapping) else None
        if desc:
            lines += _comment(desc)
        opt = "" if name in required else "?"
        lines.append(f"{name}{opt}: {_ts_type(prop)},")
    return "\n".join(lines)


def render_openai_functions(functions: Sequence[Mapping[str, Any]]) -> str:
    """The ``namespace functions { ... }`` block OpenAI renders tool schemas into."""
    lines = ["namespace functions {", ""]
    for f in functions:
        if f.get("description"):
            lines += _comment(f["description"])
        params = f.get("parameters") or {}
        if isinstance(params, Mapping) and params.get("properties"):
            lines += [f"type {f['name']} = (_: {{", _ts_props(params), "}) => any;"]
        else:
            lines.append(f"type {f['name']} = () => any;")
        lines.append("")
    lines.append("} // namespace functions")
    return "\n".join(lines)


# OpenAI constants (see module docstring).
OPENAI_PER_MESSAGE = 3
OPENAI_PER_NAME = 1
OPENAI_REPLY_PRIMING = 3
OPENAI_TOOLS_OVERHEAD = 9
OPENAI_TOOLS_WITH_SYSTEM = -4
OPENAI_SINGLE_CALL_EXTRA = 1
OPENAI_TOOL_CHOICE_NONE = 1
OPENAI_TOOL_CHOICE_FORCED = 7  # + the function name's tokens (Chat Completions)
OPENAI_TOOL_CHOICE_FORCED_RESPONSES = 4  # Responses API: one corpus call

# Anthropic: rough framing (the tokenizer is a stand-in anyway; calibration absorbs the rest).
ANTHROPIC_PER_MESSAGE = 4
ANTHROPIC_REPLY_PRIMING = 4
ANTHROPIC_PER_TOOL_USE = 12
ANTHROPIC_PER_TOOL_RESULT = 8
ANTHROPIC_TOOL_PROMPT = {"auto": 346, "none": 346, "any": 313, "tool": 313}  # Claude docs, 4.x models

# Open-weights chat templates: (per message besides role and text, per call).
TEMPLATE_OVERHEAD = {
    "llama3": (4, 5),  # <|start_header_id|>role<|end_header_id|>\n\n ... <|eot_id|>; <|begin_of_text|>
    "qwen3": (4, 3),  # <|im_start|>role\n ... <|im_end|>\n; <|im_start|>assistant\n
}
GENERIC_PER_MESSAGE = 4
GENERIC_REPLY_PRIMING = 3


# --------------------------------------------------------------------------------------------
# planning a message


@dataclass(slots=True)  # one per message per count
class _Plan:
    texts: list[str] = field(default_factory=list)  # tokenized; their sum is what is cached
    const: int = 0  # structure, images: recomputed on every count
    flags: list[str] = field(default_factory=list)  # what had to be assumed (makes it estimated)


def _compact_json(args: str) -> Any:
    try:
        return json.loads(args) if args.strip() else {}
    except (json.JSONDecodeError, AttributeError):
        return args


def _plan_openai(m: Message, model: str | None) -> _Plan:
    kind = m.kind
    if kind == KIND_COMPACTION_BOUNDARY:
        return _Plan()
    if kind == KIND_REASONING:
        # A reasoning item sent back to the Responses API: only its summary text is readable.
        return _Plan([m.text], 0, ["reasoning item: counted its readable summary only"])
    role = m.role
    if role == "tool" or kind == KIND_CLEARED_TOOL_RESULT:
        p = _Plan([f"functions.{m.name}" if m.name else "tool", m.text], OPENAI_PER_MESSAGE)
    elif m.tool_calls:
        p = _Plan()
        if m.text:  # text before the call travels as its own assistant message
            p.const += OPENAI_PER_MESSAGE
            p.texts += [role, m.text]
            p.flags.append("assistant text beside tool calls: framing estimated")
        p.const += OPENAI_PER_MESSAGE
        if len(m.tool_calls) == 1:
            c = m.tool_calls[0]
            p.texts += [f"{role} to=functions.{c.name}", c.arguments]
            p.const += OPENAI_SINGLE_CALL_EXTRA
        else:
            uses = [{"recipient_name": f"functions.{c.name}", "parameters": _compact_json(c.arguments)}
                    for c in m.tool_calls]
            p.texts += [f"{role} to=multi_tool_use.parallel",
                        json.dumps({"tool_uses": uses}, ensure_ascii=False, separators=(",", ":"))]
    elif m.name:
        p = _Plan([role, m.text, m.name], OPENAI_PER_MESSAGE + OPENAI_PER_NAME)
    else:
        p = _Plan([role, m.text], OPENAI_PER_MESSAGE)
    if m.parts:  # most messages have none
        _parts_openai(m, p, model)
    return p


def _parts_openai(m: Message, p: _Plan, model: str | None) -> None:
    for part in m.parts:
        t = part.get("type")
        if t == "image":
            detail = part.get("detail")
            dims = _dims(part)
            if dims:
                p.const += openai_image_tokens(*dims, detail=detail, model=model)
            elif (detail or "").lower() == "low" and not any(
                    _model_key(model).startswith(k) for k in _OPENAI_PATCH_MULT):
                p.const += openai_image_tokens(1, 1, detail="low", model=model)
            else:
                est = UNKNOWN_IMAGE_OPENAI
                p.const += est
                p.flags.append(f"image without dimensions: estimated {est}")
        elif t in ("thinking", "redacted_thinking", "refusal", "encrypted_reasoning"):
            continue  # not sent back to Chat Completions / already in the text
        elif t in ("audio", "file", "document", "video"):
            # Their cost depends on content the log does not keep (duration, pages).
            p.flags.append(f"{t} part: not counted")


def _plan_anthropic(m: Message) -> _Plan:
    p = _Plan()
    if m.kind == KIND_COMPACTION_BOUNDARY:
        return p
    if m.kind == KIND_REASONING:
        p.texts.append(m.text)
        return p
    p.const += ANTHROPIC_PER_MESSAGE
    p.texts.append(m.text)
    if m.role == "tool" or m.kind == KIND_CLEARED_TOOL_RESULT:
        p.const += ANTHROPIC_PER_TOOL_RESULT
    for c in m.tool_calls:
        p.texts += [c.name, c.arguments]
        p.const += ANTHROPIC_PER_TOOL_USE
    for part in m.parts:
        t = part.get("type")
        if t == "image":
            dims = _dims(part)
            if dims:
                p.const += anthropic_image_tokens(*dims)
            else:
                p.const += UNKNOWN_IMAGE_ANTHROPIC
                p.flags.append(f"image without dimensions: estimated {UNKNOWN_IMAGE_ANTHROPIC}")
        elif t == "thinking":
            p.texts.append(str(part.get("text") or ""))
        elif t in ("redacted_thinking", "encrypted_reasoning", "refusal"):
            continue
        elif t:
            blob = json.dumps(part, ensure_ascii=False, default=str)
            p.texts.append(blob)
    return p


def _plan_generic(m: Message, per_message: int) -> _Plan:
    p = _Plan()
    if m.kind == KIND_COMPACTION_BOUNDARY:
        return p
    p.const += per_message
    p.texts += [m.role, m.text]
    for c in m.tool_calls:
        p.texts.append(json.dumps({"name": c.name, "arguments": _compact_json(c.arguments)},
                                  ensure_ascii=False))
    for part in m.parts:
        t = part.get("type")
        if t == "image":
            p.const += UNKNOWN_IMAGE_OTHER
            p.flags.append(f"image: estimated {UNKNOWN_IMAGE_OTHER}")
        elif t == "thinking":
            p.texts.append(str(part.get("text") or ""))
    return p


# --------------------------------------------------------------------------------------------
# counting


@dataclass(frozen=True)
class MessageCounts:
    """Per-message token counts (overhead included) for one tokenizer and chat format."""

    tokens: np.ndarray  # int64[n]
    estimated: np.ndarray  # bool[n]: the figure is an estimate (stand-in tokenizer or a flag)
    flags: tuple[tuple[int, str], ...]  # (message index, what was assumed)
    tokenizer: str

    @property
    def kinds(self) -> list[str]:
        return [ESTIMATED if e else EXACT for e in self.estimated]

    @property
    def total(self) -> int:
        return int(self.tokens.sum())

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class CallOverhead:
    """Tokens a model call adds besides its messages: reply priming, tool schemas, tool choice.

    ``tools`` is the part that comes with the tool definitions (the schemas, the framing a
    provider wraps them in, tool choice); ``tokens - tools`` is the reply priming. A replay
    shows the two on rows of their own, so that a window's rows add up to its total.
    """

    tokens: int
    kind: str
    flags: tuple[str, ...] = ()
    tools: int = 0  # tokens of the tool definitions, included in ``tokens``
    n_tools: int = 0  # how many tool definitions the call sent (functions and others)


def _recorded_reasoning(messages: Sequence[Message], tokens: np.ndarray, plans: list[_Plan]) -> None:
    """Size reasoning items by the reasoning tokens their call recorded.

    A reasoning item sent back to the Responses API (Codex) is encrypted; the model reads the
    full reasoning, whose size the producing call's usage records (``reasoning_tokens`` of the
    assistant message that follows in the same call). The first item of a call gets that
    figure, later items of the same call 0. Without a recorded figure the readable summary
    stays as the (flagged) estimate.
    """
    n = len(messages)
    i = 0
    while i < n:
        if messages[i].kind != KIND_REASONING:
            i += 1
            continue
        j = i
        while j < n and messages[j].kind == KIND_REASONING:
            j += 1
        r = None
        k = j  # the call's usage sits on one of the assistant messages right after its reasoning
        while k < n and messages[k].role == "assistant" and messages[k].kind != KIND_REASONING:
            if messages[k].usage is not None:
                r = messages[k].usage.reasoning_tokens
                break
            k += 1
        if r is not None:
            for k in range(i, j):
                tokens[k] = r if k == i else 0
                plans[k].flags = ["reasoning item: sized by its call's recorded reasoning tokens"]
        i = j


def _request_tools(request: Mapping[str, Any], session_tools: Any) -> tuple[Any, list[str]]:
    """The tool schemas a call sent: its request's, else the session's when the request says it
    sent tools it does not list (``tools_count``, hash-checked) or says nothing at all."""
    if request.get("tools"):
        return request["tools"], []
    count = request.get("tools_count")
    if count:
        want = request.get("tools_hash")
        if session_tools and (not want or content_hash(session_tools) == want):
            return session_tools, []
        return None, [f"{count} tool schema(s) sent but not in the log: not counted"]
    if not request:
        return session_tools, []
    return None, []  # a recorded request without tools sent none


class TokenCounter:
    """Counts messages and per-call overhead for a model, with cached tokenization.

    >>> counter = TokenCounter(resolve_model("gpt-4o-mini"), store=store)
    >>> counts = counter.count_messages(messages)   # counts.tokens: int64 per message
    >>> fixed = counter.call_overhead(request=step.meta.get("request"), has_system=True)
    """

    def __init__(self, spec: ModelSpec, *, store: Store | None = None,
                 tokenizer: Tokenizer | None = None, cache: TokenCache | None = None) -> None:
        self.spec = spec
        self.tokenizer = tokenizer or get_tokenizer(spec.tokenizer)
        self.chat_format = spec.chat_format
        self.cache = cache or TokenCache(store)
        self.scheme = f"{self.tokenizer.key}/{self.chat_format}/v{FORMULA_VERSION}"
        self.tools_scheme = f"{self.tokenizer.key}/{self.chat_format}-tools/v{FORMULA_VERSION}"

    # -- messages

    def _per_message_generic(self) -> int:
        return TEMPLATE_OVERHEAD.get(self.tokenizer.name, (GENERIC_PER_MESSAGE, 0))[0]

    def plan(self, m: Message) -> _Plan:
        if self.chat_format == CHAT_OPENAI:
            return _plan_openai(m, self.spec.name)
        if self.chat_format == CHAT_ANTHROPIC:
            return _plan_anthropic(m)
        return _plan_generic(m, self._per_message_generic())

    def count_messages(self, messages: Sequence[Message], hashes: Sequence[str] | None = None) -> MessageCounts:
        """Count each message (tokens int64[n], estimated flags); each unique content once.

        ``hashes`` may pass precomputed ``Message.hash`` values (the store keeps them).
        """
        n = len(messages)
        hashes = list(hashes) if hashes is not None else [m.hash for m in messages]
        plans = [self.plan(m) for m in messages]
        cached = self.cache.get_many(hashes, self.scheme)
        todo: dict[str, int] = {}  # hash -> index of a message to tokenize
        for i, h in enumerate(hashes):
            if h not in cached and h not in todo:
                todo[h] = i
        if todo:
            unique = list(dict.fromkeys([t for i in todo.values() for t in plans[i].texts if t]))
            count_of = dict(zip(unique, self.tokenizer.count_batch(unique).tolist()))
            fresh = {h: sum([count_of[t] for t in plans[i].texts if t]) for h, i in todo.items()}
            self.cache.put_many(fresh, self.scheme)
            cached = {**cached, **fresh}
        tokens = np.array([cached[h] + p.const for h, p in zip(hashes, plans)], dtype=np.int64)
        if self.tokenizer.exact:
            estimated = np.array([bool(p.flags) for p in plans], dtype=bool)
        else:
            estimated = np.ones(n, dtype=bool)
        _recorded_reasoning(messages, tokens, plans)
        flags = tuple((i, f) for i, p in enumerate(plans) for f in p.flags)
        return MessageCounts(tokens, estimated, flags, self.tokenizer.name)

    def count_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Token counts of plain texts (no framing), cached by text hash."""
        hashes = [content_hash(t) for t in texts]
        key = f"{self.tokenizer.key}/text/v{FORMULA_VERSION}"
        cached = self.cache.get_many(hashes, key)
        todo = {h: t for h, t in zip(hashes, texts) if h not in cached}
        if todo:
            counts = self.tokenizer.count_batch(list(todo.values()))
            fresh = {h: int(c) for h, c in zip(todo, counts)}
            self.cache.put_many(fresh, key)
            cached = {**cached, **fresh}
        return np.fromiter((cached[h] for h in hashes), dtype=np.int64, count=len(hashes))

    # -- per call

    def _tools_tokens(self, functions: list[dict[str, Any]], others: list[Any]) -> tuple[int, list[str]]:
        flags: list[str] = []
        if self.chat_format == CHAT_OPENAI:
            blob = render_openai_functions(functions) if functions else ""
        else:
            blob = json.dumps(functions, ensure_ascii=False, separators=(",", ":")) if functions else ""
        if others:
            blob += json.dumps(others, ensure_ascii=False, separators=(",", ":"), default=str)
            flags.append(f"{len(others)} non-function tool(s): schema cost estimated")
        if not blob:
            return 0, flags
        h = content_hash(blob)
        got = self.cache.get_many([h], self.tools_scheme)
        if h not in got:
            got[h] = self.tokenizer.count(blob)
            self.cache.put_many({h: got[h]}, self.tools_scheme)
        return got[h], flags

    def call_overhead(self, request: Mapping[str, Any] | None = None, *, tools: Any = None,
                      has_system: bool = False) -> CallOverhead:
        """Fixed tokens of one call: reply priming, tool schemas (``request["tools"]`` or
        ``tools``), tool choice. ``has_system``: the prompt has a system/developer message."""
        request = request or {}
        raw_tools, flags = _request_tools(request, tools)
        functions, others = normalize_tools(raw_tools) if raw_tools else ([], [])
        choice = request.get("tool_choice")
        fmt = self.chat_format
        priming = 0
        if fmt == CHAT_OPENAI:
            total = priming = OPENAI_REPLY_PRIMING
            if functions or others:
                t, fl = self._tools_tokens(functions, others)
                flags += fl
                total += t + OPENAI_TOOLS_OVERHEAD + (OPENAI_TOOLS_WITH_SYSTEM if has_system else 0)
                if choice == "none":
                    total += OPENAI_TOOL_CHOICE_NONE
                elif isinstance(choice, Mapping) and choice.get("type") in ("function", "tool"):
                    if "responses" in str(request.get("endpoint", "")):
                        total += OPENAI_TOOL_CHOICE_FORCED_RESPONSES
                    else:
                        fn = choice.get("function") if isinstance(choice.get("function"), Mapping) else choice
                        total += OPENAI_TOOL_CHOICE_FORCED + int(self.count_texts([str(fn.get("name") or "")])[0])
                elif choice == "required":
                    flags.append("tool_choice=required: its overhead is not known")
        elif fmt == CHAT_ANTHROPIC:
            total = priming = ANTHROPIC_REPLY_PRIMING
            if functions or others:
                t, fl = self._tools_tokens(functions, others)
                flags += fl
                ctype = choice.get("type") if isinstance(choice, Mapping) else (choice or "auto")
                total += t + ANTHROPIC_TOOL_PROMPT.get(str(ctype), ANTHROPIC_TOOL_PROMPT["auto"])
        else:
            total = priming = TEMPLATE_OVERHEAD.get(self.tokenizer.name, (0, GENERIC_REPLY_PRIMING))[1]
            if functions or others:
                t, fl = self._tools_tokens(functions, others)
                flags += fl
                total += t
        known_framing = fmt == CHAT_OPENAI or (
            # open-weights templates are known, but render tools in model-specific ways
            fmt == CHAT_GENERIC and self.tokenizer.name in TEMPLATE_OVERHEAD and not (functions or others))
        kind = EXACT if self.tokenizer.exact and known_framing and not flags else ESTIMATED
        return CallOverhead(int(total), kind, tuple(flags), int(total - priming), len(functions) + len(others))

    def placeholder_tokens(self, text: str) -> int:
        """Tokens of a short placeholder (a cleared tool result) framed as a tool message."""
        return int(self.count_messages([Message(role="tool", text=text,
                                                kind=KIND_CLEARED_TOOL_RESULT)]).tokens[0])


# --------------------------------------------------------------------------------------------
# calibration

CAL_IDENTITY = "identity"
CAL_RATIO_MEDIAN = "ratio_median"
CAL_RATIO_LS = "ratio_ls"
CAL_OFFSET = "offset_median"
CAL_AFFINE = "affine_ls"
CAL_METHODS = (CAL_RATIO_MEDIAN, CAL_RATIO_LS, CAL_OFFSET, CAL_AFFINE)


def _fit(method: str, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(offset, ratio) of one method on points (x computed, y recorded)."""
    if method == CAL_RATIO_MEDIAN:
        ok = x > 0
        return 0.0, float(np.median(y[ok] / x[ok])) if ok.any() else 1.0
    if method == CAL_RATIO_LS:
        den = float(np.dot(x, x))
        return 0.0, float(np.dot(x, y) / den) if den else 1.0
    if method == CAL_OFFSET:
        return float(np.median(y - x)), 1.0
    if method == CAL_AFFINE:
        if len(x) < 2 or float(np.ptp(x)) == 0:
            return float(np.median(y - x)), 1.0
        b, a = np.polyfit(x.astype(float), y.astype(float), 1)
        return float(a), float(b)
    return 0.0, 1.0


# Fewest points each method needs before it is tried. A ratio is only fitted on 3 calls or
# more: one call's recorded/computed ratio (a compaction call whose log holds 2% of what it
# sent: 55x) multiplied into every message turned an 8,669-character prompt into 121,291
# tokens. With fewer calls the offset (what the recorded prompt adds over the tokenizer's
# count: a hidden system prompt, tools, a conversation the log does not hold) is the
# calibration, and it stays on its own row. An affine fit on 3 points is a guess.
MIN_RATIO_POINTS = 3
_MIN_POINTS = {CAL_RATIO_MEDIAN: MIN_RATIO_POINTS, CAL_RATIO_LS: MIN_RATIO_POINTS, CAL_OFFSET: 1, CAL_AFFINE: 4}


@dataclass(frozen=True, eq=False)
class Calibration:
    """recorded ≈ offset + ratio · computed, fitted on one session's recorded calls.

    ``holdout[i]`` predicts input point i from a fit on the *other* points (leave-one-out;
    NaN where a point was unusable or nothing could be held out), so the errors it gives say
    how well the calibration predicts a call it has not seen. ``method`` was chosen by the
    median of those errors.
    """

    offset: float
    ratio: float
    method: str
    n: int
    holdout: np.ndarray = field(default_factory=lambda: np.zeros(0))
    recorded: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def apply(self, computed: Any) -> np.ndarray:
        x = np.asarray(computed, dtype=float)
        return np.rint(self.offset + self.ratio * x).astype(np.int64)

    @property
    def holdout_errors(self) -> np.ndarray:
        """|held-out prediction − recorded| / recorded, for the points that have one."""
        ok = np.isfinite(self.holdout) & (self.recorded > 0)
        return np.abs(self.holdout[ok] - self.recorded[ok]) / self.recorded[ok]

    @property
    def median_error(self) -> float | None:
        e = self.holdout_errors
        return float(np.median(e)) if len(e) else None

    @property
    def rests_on(self) -> str:
        """What the calibration rests on, in words: how many calls, and its held-out error."""
        if self.n == 1:
            return "1 call: the difference at that call; not a fit"
        err = self.median_error
        return f"fitted on {self.n} calls, " + (
            f"held-out error {100 * err:.1f}%" if err is not None else "no held-out error")

    def to_dict(self) -> dict[str, Any]:
        return {"offset": round(self.offset, 1), "ratio": round(self.ratio, 4), "method": self.method,
                "n": self.n, "holdout_median_error": self.median_error, "rests_on": self.rests_on}


IDENTITY = Calibration(0.0, 1.0, CAL_IDENTITY, 0)


def _median_without_each(v: np.ndarray) -> np.ndarray:
    """For every i, the median of ``v`` without element i; O(n log n)."""
    n = len(v)
    order = np.argsort(v, kind="stable")
    srt = v[order]
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    m = n - 1  # size of what remains

    def at(pos: np.ndarray) -> np.ndarray:  # position in the remainder -> value
        return srt[np.where(pos < rank, pos, pos + 1)]

    if m % 2:
        return at(np.full(n, m // 2))
    return (at(np.full(n, m // 2 - 1)) + at(np.full(n, m // 2))) / 2


def _loo(method: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Leave-one-out predictions of ``method`` at every point, vectorised (O(n log n))."""
    n = len(x)
    x = x.astype(float)
    if n < 2:
        return np.full(n, np.nan)
    if method == CAL_RATIO_MEDIAN:
        return _median_without_each(y / x) * x
    if method == CAL_OFFSET:
        return _median_without_each(y - x) + x
    if method == CAL_RATIO_LS:
        sxy, sxx = float(np.dot(x, y)), float(np.dot(x, x))
        with np.errstate(divide="ignore", invalid="ignore"):
            b = (sxy - x * y) / (sxx - x * x)
        return np.where(np.isfinite(b), b, 1.0) * x
    if method == CAL_AFFINE and n > 2 and float(np.ptp(x)) > 0:
        # Least squares: the held-out residual is e_i / (1 - h_ii).
        X = np.column_stack([np.ones(n), x])
        try:
            XtX_inv = np.linalg.inv(X.T @ X)
        except np.linalg.LinAlgError:
            return _loo(CAL_OFFSET, x, y)
        resid = y - X @ (XtX_inv @ X.T @ y)
        h = np.einsum("ij,jk,ik->i", X, XtX_inv, X)
        with np.errstate(divide="ignore", invalid="ignore"):
            held = np.where(h < 1 - 1e-9, resid / (1 - h), np.nan)
        return y - held
    return _loo(CAL_OFFSET, x, y)


def fit_calibration(computed: Sequence[float], recorded: Sequence[float], *,
                    methods: Sequence[str] = CAL_METHODS) -> Calibration:
    """Fit recorded ≈ offset + ratio·computed on one session's recorded calls.

    Candidates: median ratio, least-squares ratio through the origin, median offset (an exact
    tokenizer with a hidden prefix, e.g. a harness system prompt), least-squares affine (a
    stand-in tokenizer *and* a hidden prefix). Each is scored by its leave-one-out error; the
    lowest median wins, the simpler (earlier) on ties. The ratios need ``MIN_RATIO_POINTS``
    calls and the affine fit 4: with one or two calls the offset is the calibration. With one
    usable call there is nothing to hold out: the offset is the difference at that call (not a
    fit) and ``holdout`` is all NaN.
    """
    x_all = np.asarray(computed, dtype=float)
    y_all = np.asarray(recorded, dtype=float)
    ok = (x_all > 0) & (y_all > 0)
    x, y = x_all[ok], y_all[ok]
    n = len(x)
    holdout = np.full(len(x_all), np.nan)
    if n == 0:
        return Calibration(0.0, 1.0, CAL_IDENTITY, 0, holdout, y_all)
    if n == 1:
        return Calibration(float(y[0] - x[0]), 1.0, CAL_OFFSET, 1, holdout, y_all)
    best: tuple[float, str, np.ndarray] | None = None
    tried = [m for m in methods if n >= _MIN_POINTS.get(m, 1)] or [CAL_OFFSET]
    for method in tried:
        pred = _loo(method, x, y)
        err = np.abs(pred - y) / y
        score = float(np.mean(np.where(np.isfinite(err), err, np.inf)))
        if best is None or score < best[0] - 1e-12:
            best = (score, method, pred)
    assert best is not None
    _, method, pred = best
    a, b = _fit(method, x, y)
    holdout[ok] = pred
    return Calibration(a, b, method, n, holdout, y_all)
