"""Given inputs: the system prompt, the task and the tool definitions two runs were given,
compared as text (whitespace normalized, nothing masked).

The tool definitions are the session's recorded ``tools``. When two runs of one harness were
given different tools, that is a divergence of its own (``tool_definitions``), before any
event; between harnesses they differ by construction and are listed under ``preexisting``.
"""

from __future__ import annotations

import json
from typing import Any

from .alignment import Alignment, preamble_end
from .compare import line_overlap
from .display import cap, line_diff, word_diff
from .events import TEXT_LIMIT, RunEvents
from .normalize import content_key, given_text


def _tools_text(tools: Any) -> str:
    """Tool definitions as one comparable text (sorted keys, whitespace collapsed)."""
    return given_text(json.dumps(tools, indent=1, sort_keys=True, ensure_ascii=False))


def _tool_names(tools: Any) -> list[str]:
    """The names of the tools defined (``?`` for one without a name)."""
    out = []
    for t in tools if isinstance(tools, list) else []:
        fn = t.get("function") if isinstance(t, dict) and isinstance(t.get("function"), dict) else t
        name = fn.get("name") if isinstance(fn, dict) else None
        out.append(name if isinstance(name, str) else "?")
    return out


def given_inputs(al: Alignment, a: RunEvents, b: RunEvents, a_row: dict[str, Any] | None,
                 b_row: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """How the given inputs compare (all as text, whitespace normalized): the system prompt,
    the task (the first user input) and the tool definitions (the session's recorded ``tools``);
    and the ``tool_definitions`` divergence when one run of the same harness was given other
    tools (between harnesses they differ by construction: ``preexisting``)."""
    out: dict[str, Any] = {}
    for cause, etype in (("system_prompt", "system"), ("user_input", "user")):
        ea = next((e for e in a.aligned() if e.type == etype and e.index < preamble_end(a.events)), None)
        eb = next((e for e in b.aligned() if e.type == etype and e.index < preamble_end(b.events)), None)
        out[cause] = {"method": "text", "equal": None if ea is None or eb is None else ea.key == eb.key,
                      "a_seq": ea.seq if ea else None, "b_seq": eb.seq if eb else None,
                      "note": None if ea is not None and eb is not None else "missing in " +
                      " and ".join(s for s, e in (("A", ea), ("B", eb)) if e is None)}
    ma, mb = (a_row or {}).get("metadata") or {}, (b_row or {}).get("metadata") or {}
    ta, tb = ma.get("tools"), mb.get("tools")
    inferred = [s for s, m in (("A", ma), ("B", mb)) if m.get("tools_inferred")]
    entry: dict[str, Any] = {"method": "text", "equal": None, "a_tools": _tool_names(ta) if ta else None,
                             "b_tools": _tool_names(tb) if tb else None, "inferred": inferred}
    out["tool_definitions"] = entry
    if not ta or not tb:
        entry["note"] = ("not recorded in " + " and ".join(s for s, t in (("A", ta), ("B", tb)) if not t)
                         + ": not compared")
        return out, None
    xa, xb = _tools_text(ta), _tools_text(tb)
    entry["equal"] = xa == xb
    if inferred:
        entry["note"] = f"{' and '.join(inferred)}: the harness's fixed schema (the log does not record it)"
    if xa == xb:
        return out, None
    if al.cross_harness:
        al.preexisting.append({"cause": "tool_definitions", "a_seq": None, "b_seq": None,
                               "similarity": round(line_overlap(xa, xb), 4), "measure": "lines", "method": "text",
                               "note": f"differs between harnesses by construction ({a.harness} vs {b.harness}); "
                                       "not counted as the divergence"})
        return out, None

    def pseudo(tools: Any, text: str) -> dict[str, Any]:
        names = _tool_names(tools)
        return {"type": "tools", "seq": None, "step": 0, "key": content_key(text),
                "display": f"{len(names)} tool(s): {', '.join(names)}", "text": cap(text, TEXT_LIMIT), "tool": None,
                "returncode": None}

    div = {"cause": "tool_definitions", "a_step": 0, "b_step": 0, "a_seq": None, "b_seq": None, "similarity": None,
           "measure": "text", "method": "text",
           "reason": "given inputs compared as text, whitespace normalized: differ", "threshold": None,
           "a_event": pseudo(ta, xa), "b_event": pseudo(tb, xb), "row": None,
           "diff": line_diff(xa.split("\n"), xb.split("\n")),
           "word_diff": word_diff(xa, xb), "detail": {"read_at_step": {"a": 1 if a.step_seqs else None,
                                                                       "b": 1 if b.step_seqs else None}},
           "explanation": "the two runs were given different tool definitions"}
    return out, div
