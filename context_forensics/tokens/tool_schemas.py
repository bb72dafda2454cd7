"""Tool schemas: which ones a call sent, read from any provider's shape, rendered as the
provider renders them for the model.

OpenAI renders function schemas into a ``namespace functions { ... }`` block of TypeScript-like
types before it counts them (``render_openai_functions``); Anthropic lists each one as a JSON
schema line in the tool-use system prompt (``render_anthropic_functions``); ``framing.py`` gives
the constants around them. Other chat formats are counted on the schemas' compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..hashing import content_hash


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
        fn = f if isinstance(f := t.get("function"), Mapping) else t
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
    required = r if isinstance(r := schema.get("required"), list) else []
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


def render_anthropic_functions(functions: Sequence[Mapping[str, Any]]) -> str:
    """Tool definitions as Anthropic's tool-use system prompt lists them, one per line:
    ``<function>{"description": ..., "name": ..., "parameters": {...}}</function>``.

    Anthropic documents the prompt's layout ("Here are the functions available in JSONSchema
    format:" then the definitions; docs.anthropic.com/en/docs/build-with-claude/tool-use,
    "Tool use system prompt"); the line format, JSON with sorted keys and ", "/": " separators,
    is the one Claude's own published system prompts show (github.com/asgeirtj/
    system_prompts_leaks, Anthropic/). The ``<functions>`` wrapper is left to the documented
    prompt size: counting it too overshot the corpus' cassettes.
    """
    lines = []
    for f in functions:
        body = {"description": f.get("description") or "", "name": f.get("name") or "",
                "parameters": f.get("parameters") or {}}
        lines.append("<function>" + json.dumps(body, ensure_ascii=False, sort_keys=True, default=str) + "</function>")
    return "\n".join(lines)


def request_tools(request: Mapping[str, Any], session_tools: Any) -> tuple[Any, list[str]]:
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
