"""What a window's tokens are made of: messages, placeholders, tool definitions, framing, and
what calibration adds, as parts that add up to the step's ``window_tokens`` exactly."""

from __future__ import annotations

from typing import Any

from .policies import StepResult

# What each part of a window is, in the order a window lists them (``step_dicts``' "parts").
PART_KINDS = ("messages", "cleared_placeholders", "compaction_summary", "tool_definitions", "framing",
              "not_in_log", "calibration_scale")


def step_parts(r: StepResult, j: int, counted: Any) -> dict[str, int]:
    """Step j+1's window tokens split into its parts; they add up to ``window_tokens`` exactly.

    Messages and placeholders are the tokenizer's figures (the engine sums them beside its
    own, possibly calibrated, total); the fixed part splits into tool definitions, framing and
    the calibration's offset; what is left is the calibration's scale (0 when no ratio is
    applied).
    """
    tools, framing, hidden = counted.fixed_parts(j)
    parts = {"messages": r.kept_tokens, "cleared_placeholders": r.cleared_tokens, "compaction_summary": r.extra,
             "tool_definitions": tools, "framing": framing, "not_in_log": hidden}
    parts["calibration_scale"] = r.window_tokens - sum(parts.values())
    return parts


def _offset_words(cal: Any) -> str:
    from ...tokens.calibration import CAL_OFFSET

    if cal.n == 1:
        return cal.rests_on
    if cal.method == CAL_OFFSET:
        return "offset " + cal.rests_on
    return f"offset + ×{cal.ratio:.3g} " + cal.rests_on


def window_parts(parts: dict[str, int], j: int, counted: Any, policy: str, counts: dict[str, int],
                 message_figure: str) -> list[dict[str, Any]]:
    """A step's parts as labelled rows: kind, label, tokens and the kind of figure each is."""
    step = counted.steps[j] if counted is not None and counted.steps else None
    cal = counted.calibration_at(j) if counted is not None else None
    fixed_kind = step.fixed_kind if step is not None else message_figure
    n_kept = counts.get("kept", 0) + counts.get("outside_local", 0)
    labels = {
        "messages": f"{n_kept} message(s) in the window",
        "cleared_placeholders": f"{counts.get('cleared', 0)} cleared tool result(s): the placeholder the model sees",
        "compaction_summary": f"restated goal and constraints (simulated by {policy})" if policy == "goal_anchoring"
        else f"compaction summary (simulated by {policy})",
        "tool_definitions": f"tool definitions ({step.n_tools if step else 0} tools, in the log)",
        "framing": "framing / reply priming",
    }
    figures = {"messages": message_figure, "cleared_placeholders": message_figure,
               "compaction_summary": "estimated", "tool_definitions": fixed_kind, "framing": fixed_kind,
               "not_in_log": "calibrated", "calibration_scale": "calibrated"}
    rows = []
    for kind in PART_KINDS:
        tokens = parts[kind]
        if not tokens and kind != "messages":
            continue
        overhead = getattr(counted, "overhead", None) if counted is not None else None
        if kind == "not_in_log":
            if overhead and overhead.get("capture"):
                rest = tokens - int(overhead["tokens"])
                label = (f"not in the log (the agent's system prompt / tools), {tokens:,}: {overhead['rests_on']}"
                         + (f"; {rest:+,} by calibration ({_offset_words(cal)})" if cal is not None and rest else ""))
            elif overhead:
                label = (f"not in the log (harness system prompt / tools), ≈{tokens:,} estimated: "
                         f"{overhead['rests_on']}")
            elif cal is None:
                label = "not in the log"
            elif tokens >= 0:
                label = (f"not in the log (harness system prompt / tools), ≈{tokens:,} by calibration "
                         f"({_offset_words(cal)})")
            else:
                label = (f"calibration offset: the log's recorded prompt is {-tokens:,} below the "
                         f"tokenizer's count ({_offset_words(cal)})")
        elif kind == "calibration_scale":
            counted_here = sum(parts.values()) - tokens - max(parts.get("not_in_log", 0), 0)
            if cal is not None and cal.offset < 0 and cal.ratio != 1 and counted_here > 0:
                # a negative offset is no hidden prompt: the fit is applied as the ratio it implies here
                label = (f"calibration scale ×{1 + tokens / counted_here:.3g} at this call (the fit "
                         f"{cal.offset:,.0f} + ×{cal.ratio:.3g} the count; {cal.rests_on})")
            else:
                label = (f"calibration scale ×{cal.ratio:.3g} ({cal.rests_on})" if cal is not None and cal.ratio != 1
                         else "calibration scale (the ratio the fit implies at this call)" if cal is not None
                         else "not accounted for")
        else:
            label = labels[kind]
        figure = "estimated" if kind == "not_in_log" and overhead else figures[kind]
        rows.append({"kind": kind, "label": label, "tokens": int(tokens), "figure": figure})
    return rows


# Formats whose log holds the very messages each call was sent, system message included when there
# was one (Inspect's sample messages and model events): no system message there means none was sent.
SYSTEM_AS_SENT = frozenset({"inspect"})


def window_lacks(session: dict[str, Any], messages: Any, counted: Any) -> list[dict[str, Any]]:
    """What every window of a replay lacks that the model was sent: parts of an agent's request the
    log does not record and nothing stands in for (no calibration on recorded prompts fits them, no
    what-if carries an estimate of them). Each: ``part`` (``system_prompt`` / ``tool_definitions``),
    ``why``, and ``tokens`` where the log states their size elsewhere (Copilot CLI's own count of its
    context at shutdown), else None. Empty for a session with no agent (a chat export, a dataset:
    a missing system prompt may be none) and wherever the figures already hold these parts."""
    from ...store.agents import agent_of
    from ...tokens.labels import CALIBRATED
    from ...tokens.overhead import has_system_prompt

    if not agent_of(session.get("format"), session.get("metadata")) or counted is None \
            or counted.kind == CALIBRATED or (counted.overhead and not counted.overhead.get("capture")):
        return []
    # a capture's overhead stands in for the parts it supplied (``tokens/overhead.py``)
    supplied = set(counted.overhead.get("parts") or ()) if counted.overhead else set()
    msgs = [getattr(m, "message", m) for m in messages]
    meta = md if isinstance(md := session.get("metadata"), dict) else {}
    shutdown = sd if isinstance(sd := meta.get("shutdown"), dict) else {}
    ctx = c if isinstance(c := shutdown.get("context_at_shutdown"), dict) else {}

    def size(key: str) -> int | None:
        v = ctx.get(key)
        return v if type(v) is int and v > 0 else None

    out: list[dict[str, Any]] = []
    if session.get("format") not in SYSTEM_AS_SENT and not has_system_prompt(msgs):
        out.append({"part": "system_prompt", "why": "the log records no system prompt", "tokens": size("system")})
    if any(m.tool_calls for m in msgs) and not any(s.n_tools for s in counted.steps or ()):
        out.append({"part": "tool_definitions", "why": "the log records the tool calls, not the tool definitions sent",
                    "tokens": size("tool_definitions")})
    return [x for x in out if x["part"] not in supplied]


def lacks_words(lacks: list[dict[str, Any]], agent: str | None = None) -> str:
    """``window_lacks`` as one sentence: what every window figure leaves out."""
    names = {"system_prompt": "the system prompt", "tool_definitions": "the tool definitions"}
    said = []
    for x in lacks:
        w = f"{names.get(x['part'], x['part'])} ({x['why']}"
        if x.get("tokens"):
            w += f"; {agent or 'the agent'} counted {x['tokens']:,} tokens of them when the session ended"
        said.append(w + ")")
    return ("every window lacks " + " and ".join(said) + ": its figures are below what the model read, "
            "and nothing recorded calibrates them")
