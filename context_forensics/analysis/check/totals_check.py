"""``totals``: the totals a log records for the whole run beside ctxf's own figures.

Some logs record aggregates besides the calls themselves; the importers keep them in the session
metadata (``log_totals`` reads them):

- SWE-agent: ``info.model_stats``: ``api_calls`` and ``tokens_sent`` (the prompt tokens of every
  call, counted by SWE-agent with the model's tokenizer; 0 in its demo trajectories: not recorded);
- mini-swe-agent: ``info.model_stats.api_calls``;
- OpenHands: its ``llm_completions`` records (one per call);
- Codex: the last ``token_count`` event's ``total_token_usage.input_tokens`` (the running sum);
- Copilot CLI: the ``session.shutdown`` event's ``modelMetrics`` per model (``requests.count``,
  ``usage.inputTokens``: every token the calls read) and its split of the context at shutdown
  (system prompt, conversation, tool definitions);
- Copilot CLI's legacy layout: two records of one conversation, ``chatMessages`` and the
  ``timeline``, which must hold the same calls and replies;
- Aider's chat history: one ``Tokens: N sent`` line per call, rounded (``3.2k``);
- Inspect: the sample's ``model_usage`` per model and its model calls (a scorer's apart);
- Gemini CLI stream-json: the ``result`` event's ``stats``: ``input_tokens`` (the prompt tokens of
  every model call of the run, the CLI's own side calls too, per model in ``models`` when the CLI
  writes it) and ``tool_calls`` (the tools the run called).
- ATIF: ``final_metrics.total_prompt_tokens``, by the RFC the sum of every step's ``prompt_tokens``
  (0 or absent: not recorded).

Each is set beside what ctxf makes of the log: the number of model calls (the steps), the sum of the
prompt sizes the log records per call, the sum of the rebuilt windows. Each comparison states its
tolerance and why (``Comparison.why``): a count is exact (every call the log counts is a reply ctxf
keeps, or a format-error message the log records in place of a reply it dropped); a sum of
per-call figures of the same log is exact but for Aider's rounding; the sum of the rebuilt windows
is exact where they are exact counts of the model's own tokenizer as the agent counts them
(SWE-agent's ``tokens_sent`` of pydicom-1458 in the corpus: 122,612 both sides) and within 25% where
they are calibrated or estimated (``PROMPT_TOLERANCE``, the bound ``prompt_vs_window`` sets per
call: a sum of figures each within it is within it), after adding what the log is known to lack
when the log itself measures it (Copilot CLI's tool definitions, from its shutdown split). Where
the total holds more than the steps and the log does not say how much (an Inspect scorer's calls of
the same model; the system prompt, repo map and files Aider sends but its chat history does not
hold), the bound is one-sided: ctxf's figure must not exceed it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...records import KIND_MESSAGE, stored_time
from .base import Inconsistency, NotApplicable
from .replay_checks import PROMPT_TOLERANCE

EXACT_TOLERANCE = 0.0  # the sum of windows counted with the model's own tokenizer and the agent's framing: exact
NO_TOTALS = "the log records no totals for the run (calls, prompt tokens) to compare with"


@dataclass(frozen=True)
class Total:
    """One figure a log records for the whole run (or one model of it)."""

    what: str  # calls | prompt_tokens | context_at_end | tool_calls
    recorded: int
    source: str  # the log's field, for a person
    model: str | None = None  # the model it counts (None: every call of the session)
    rounding: int = 0  # ± tokens: the log rounds its figure(s)
    lacks_per_call: int = 0  # tokens each call read that the log does not hold, as the log itself measures them
    lacks: str | None = None  # what the log is known to lack (said with lacks_per_call, or the one-sided bound)
    at_most: bool = False  # the total holds more than the steps, by an amount the log does not give
    accounted: str | None = None  # where ctxf already says why it differs (an ingest warning)
    stand_ins: int = 0  # calls whose reply the log drops but marks (mini-swe-agent's format-error messages)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def log_totals(fmt: str, metadata: Mapping[str, Any], messages: Sequence[Any] = ()) -> list[Total]:
    """The totals the session's log records (see the module docstring), from the importer's
    metadata (and, for Aider's chat history, each reply's ``usage_rounded``)."""
    md = metadata or {}
    out: list[Total] = []
    stats = md.get("model_stats") if isinstance(md.get("model_stats"), Mapping) else {}
    if fmt in ("swe_agent", "mini_swe_agent") and stats:
        calls = _int(stats.get("api_calls"))
        if calls is not None:
            # a call whose reply failed to parse leaves only the harness's format-error message
            stand_ins = sum(1 for sm in messages
                            if (getattr(sm, "message", sm).meta or {}).get("interrupt_type") == "FormatError")
            out.append(Total("calls", calls, "info.model_stats.api_calls", stand_ins=stand_ins))
        sent = _int(stats.get("tokens_sent"))
        if sent:  # 0: not recorded (SWE-agent's demo trajectories zero their stats)
            out.append(Total("prompt_tokens", sent, "info.model_stats.tokens_sent"))
    elif fmt == "openhands" and _int(md.get("calls")) is not None:
        unattached = md.get("unattached_calls")
        out.append(Total("calls", md["calls"], "llm_completions records",
                         accounted="ingest warned: some completion records are attached to no message of the "
                                   "trajectory" if unattached else None))
    elif fmt == "codex" and isinstance(md.get("total_token_usage"), Mapping):
        inp = _int(md["total_token_usage"].get("input_tokens"))
        if inp is not None:
            out.append(Total("prompt_tokens", inp, "the last token_count event's total_token_usage.input_tokens"))
    elif fmt == "copilot_cli" and isinstance(md.get("shutdown"), Mapping):
        out.extend(_copilot(md["shutdown"]))
    elif fmt == "aider_chat":
        lines = [u for sm in messages if (u := (getattr(sm, "message", sm).meta or {}).get("usage_rounded"))]
        if _int(md.get("usage_lines")) is not None:
            out.append(Total("calls", md["usage_lines"], "the chat history's Tokens lines (one per call)"))
        if lines:
            out.append(Total("prompt_tokens", sum(int(u.get("prompt_tokens") or 0) for u in lines),
                             f"the chat history's Tokens: N sent ({len(lines)} line(s), rounded)",
                             rounding=sum(int(u.get("prompt_tokens_error") or 0) for u in lines),
                             lacks="the chat history holds neither the system prompt, the repo map nor the files' "
                                   "contents Aider sends with every call",
                             at_most=True))
    elif fmt == "inspect" and isinstance(md.get("model_usage"), Mapping):
        out.extend(_inspect(md))
    elif fmt == "gemini_cli_stream" and isinstance(md.get("stream_stats"), Mapping):
        out.extend(_gemini_stream(md["stream_stats"]))
    elif fmt == "atif" and isinstance(md.get("final_metrics"), Mapping):
        out.extend(_atif(md))
    return out


def _atif(md: Mapping[str, Any]) -> list[Total]:
    """ATIF's ``final_metrics.total_prompt_tokens``: the sum of every step's ``prompt_tokens`` (0: not
    recorded); a run continued in other files sums each file's, when every file records one."""
    parts = md.get("final_metrics_by_file")
    if isinstance(parts, list) and parts:
        each = [_int((p.get("final_metrics") or {}).get("total_prompt_tokens")) if isinstance(p, Mapping) else None
                for p in parts]
        recorded = [n for n in each if n]
        if len(recorded) < len(each):
            return []  # a file of the run records none: no total for the whole run
        return [Total("prompt_tokens", sum(recorded),
                      f"the {len(each)} files' final_metrics.total_prompt_tokens, summed (ATIF: the sum of each "
                      "file's steps' prompt_tokens)")]
    total = _int(md["final_metrics"].get("total_prompt_tokens"))
    if not total:
        return []
    return [Total("prompt_tokens", total, "final_metrics.total_prompt_tokens (ATIF: the sum of every step's "
                                          "prompt_tokens)")]


GEMINI_STREAM_LACKS = ("the stream holds no system prompt, no tool definitions and only the terminal's display of "
                       "each tool result, and the total counts the CLI's own side calls (routing, next-speaker "
                       "checks, compression) too")


def _gemini_stream(stats: Mapping[str, Any]) -> list[Total]:
    """Gemini CLI's stream-json ``result.stats``: the run's prompt tokens (per model when it says) and
    tool calls. The prompt total holds more than the rebuilt windows by an amount the stream does not
    give: one-sided."""
    out: list[Total] = []
    models = ms if isinstance(ms := stats.get("models"), Mapping) else {}
    per_model = [(m, _int(v.get("input_tokens"))) for m, v in models.items() if isinstance(v, Mapping)]
    known = [(m, n) for m, n in per_model if n is not None]
    if per_model and len(known) == len(per_model):
        for model, n in known:
            out.append(Total("prompt_tokens", n, f"result.stats.models[{model}].input_tokens",
                             model=model, lacks=GEMINI_STREAM_LACKS, at_most=True))
    elif _int(stats.get("input_tokens")) is not None:
        out.append(Total("prompt_tokens", stats["input_tokens"], "result.stats.input_tokens", lacks=GEMINI_STREAM_LACKS,
                         at_most=True))
    if _int(stats.get("tool_calls")) is not None:
        out.append(Total("tool_calls", stats["tool_calls"], "result.stats.tool_calls"))
    return out


def _copilot(shutdown: Mapping[str, Any]) -> list[Total]:
    """Copilot CLI's shutdown record: per model, the requests and the tokens they read; its context
    split at shutdown, whose tool definitions no message of the log holds."""
    out: list[Total] = []
    raw = shutdown.get("context_at_shutdown")
    ctx: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    tools = _int(ctx.get("tool_definitions")) or 0
    for model, m in (shutdown.get("model_metrics") or {}).items():
        if not isinstance(m, Mapping):
            continue
        req = _int((m.get("requests") or {}).get("count")) if isinstance(m.get("requests"), Mapping) else None
        if req is not None:
            out.append(Total("calls", req, f"modelMetrics[{model}].requests.count", model=model))
        inp = _int((m.get("usage") or {}).get("inputTokens")) if isinstance(m.get("usage"), Mapping) else None
        if inp is not None:
            out.append(Total("prompt_tokens", inp, f"modelMetrics[{model}].usage.inputTokens", model=model,
                             lacks_per_call=tools,
                             lacks=(f"the log holds no tool definitions: {tools:,} tokens a call by the shutdown "
                                    "split (taken as the same for every call)") if tools else None))
    held = [v for k in ("system", "conversation") if (v := _int(ctx.get(k))) is not None]
    if len(held) == 2:
        out.append(Total("context_at_end", sum(held),
                         "the shutdown split's system + conversation (its tool definitions aside)"))
    return out


def _inspect(md: Mapping[str, Any]) -> list[Total]:
    """Inspect's sample: its model calls (a scorer's are no steps) and ``model_usage`` (the scorer's
    calls of the same model are in it, by an amount the sample does not give apart)."""
    from ...importers.inspect_log.events import model_usage

    out: list[Total] = []
    scorer = _int(md.get("scorer_model_calls")) or 0
    calls = _int(md.get("model_calls"))
    if calls is not None:
        unattached = _int(md.get("unattached_model_calls"))
        out.append(Total("calls", calls - scorer, "the sample's model events" + (" (its scorer's apart)" if scorer
                                                                                 else ""),
                         accounted=(f"ingest warned: {unattached} model call(s) produced no message of the sample"
                                    if unattached else None)))
    total = 0
    for model, u in md["model_usage"].items():
        usage = model_usage(u, model, md.get("inspect_version"))
        total += (usage.prompt_tokens or 0) if usage is not None else 0
    if total:
        out.append(Total("prompt_tokens", total, "the sample's model_usage input tokens (every model)",
                         lacks=f"the total includes the scorer's {scorer} call(s)" if scorer else None,
                         at_most=bool(scorer)))
    return out


@dataclass(frozen=True)
class Comparison:
    """One recorded total against ctxf's figure, with the tolerance and why."""

    what: str  # ctxf's figure, said with ``{n}``
    recorded: int
    ctxf: int
    tolerance: int  # tokens or calls
    why: str
    at_most: bool = False

    @property
    def agrees(self) -> bool:
        if self.at_most:
            return self.ctxf <= self.recorded + self.tolerance
        return abs(self.ctxf - self.recorded) <= self.tolerance


def totals(inp: Any) -> list[Inconsistency]:
    """Every recorded total ctxf's figures disagree with, beyond the stated tolerance; and a log
    whose two records of one conversation disagree (Copilot CLI's legacy chatMessages and timeline)."""
    md = inp.session.get("metadata") or {}
    fmt = inp.session.get("format") or ""
    out = _two_records(inp, md)
    totals = log_totals(fmt, md, inp.messages)
    if not totals and not out:
        raise NotApplicable(NO_TOTALS)
    for t in totals:
        for c in _compare(inp, t):
            if c.agrees:
                continue
            label = f" of {t.model}" if t.model else ""
            said = {"calls": f"{c.recorded:,} model call(s){label}",
                    "prompt_tokens": f"{c.recorded:,} prompt tokens{label} over its calls",
                    "context_at_end": f"{c.recorded:,} tokens of context at its end",
                    "tool_calls": f"{c.recorded:,} tool call(s)"}[t.what]
            rel = (c.ctxf - c.recorded) / c.recorded if c.recorded else 0.0
            bound = (f"it can only be lower, +{c.tolerance:,} allowed" if c.at_most else f"±{c.tolerance:,} allowed")
            first = _first_step(inp, t) if t.what == "prompt_tokens" else None
            at = (f"; from step {first[0]} on: the log records {first[1]:,} for that call, ctxf's window is "
                  f"{first[2]:,}" if first else "")
            out.append(Inconsistency(
                "totals",
                f"the log records {said} ({t.source}); {c.what.format(n=c.ctxf)} ({rel:+.1%}; {bound}: {c.why}){at}",
                step=first[0] if first else None,
                figures={"total": t.what, "model": t.model, "source": t.source, "recorded": c.recorded,
                         "ctxf": c.ctxf, "compared": c.what, "tolerance": c.tolerance, "why": c.why,
                         "at_most": c.at_most, "error": round(rel, 4),
                         **({"step_recorded": first[1], "step_window": first[2]} if first else {})},
                accounted=t.accounted))
    return out


def _first_step(inp: Any, t: Total) -> tuple[int, int, int] | None:
    """The first step (1-based) whose own recorded prompt size the rebuilt window misses beyond
    ``PROMPT_TOLERANCE`` (above it only, for a one-sided total), with both figures; None when the
    log records the total only (SWE-agent's ``tokens_sent``) or no call stands out."""
    msgs = inp.messages
    for k, st in enumerate(inp.replay.steps, 1):
        seq = st["message_seq"]
        rounded = (msgs[seq].message.meta or {}).get("usage_rounded") if 0 <= seq < len(msgs) else None
        rec = st.get("recorded_prompt_tokens") or (_int(rounded.get("prompt_tokens")) if rounded else None)
        if not rec:
            continue
        err = int(rounded.get("prompt_tokens_error") or 0) if rounded else 0
        win = int(st["window_tokens"]) + t.lacks_per_call
        over = win - (rec + err)
        if over > rec * PROMPT_TOLERANCE or (not t.at_most and rec - err - win > rec * PROMPT_TOLERANCE):
            return k, rec, win
    return None


def _steps_of(inp: Any, model: str | None) -> list[dict[str, Any]]:
    """The replay's steps of ``model`` (every step when None, or when no step names it: a log
    that names its models otherwise, as Inspect's ``openai/gpt-4o-mini`` for ``gpt-4o-mini-…``)."""
    steps = inp.replay.steps
    if model is None:
        return steps
    models = inp.step_models()
    mine = [s for s, m in zip(steps, models) if m == model]
    return mine if mine or model in models else steps


def _compare(inp: Any, t: Total) -> list[Comparison]:
    steps = _steps_of(inp, t.model)
    n = len(steps)
    if t.what == "calls":
        if t.stand_ins:
            return [Comparison(f"ctxf counts {n:,} step(s) and the log {t.stand_ins:,} format-error message(s) "
                               "standing for a call whose reply it dropped: {n:,} call(s)",
                               t.recorded, n + t.stand_ins, 0,
                               "every call the log counts is a reply ctxf keeps or a format error the log records")]
        return [Comparison("ctxf counts {n:,} step(s) (model calls)", t.recorded, n, 0,
                           "every call the log counts is a reply ctxf keeps")]
    if t.what == "tool_calls":
        held = sum(len(inp.messages[s["message_seq"]].message.tool_calls) for s in steps)
        return [Comparison("the replies of ctxf's steps ask for {n:,} tool call(s)", t.recorded, held, 0,
                           "every tool the run called is a tool call of a reply")]
    if t.what == "context_at_end":
        end = _context_at_end(inp)
        if end is None:
            return []
        return [Comparison("the history ctxf rebuilds at the end (the last window, the reply and what follows) is "
                           "{n:,} tokens",
                           t.recorded, end[0], round(t.recorded * end[1][0]), end[1][1])]
    out = []
    recorded = [rp for s in steps if (rp := s.get("recorded_prompt_tokens"))]
    if steps and len(recorded) == len(steps):
        # the log's own per-call figures count what each call read, whatever the log's messages lack
        out.append(Comparison("the prompt sizes the log records per call add up to {n:,}", t.recorded,
                              sum(recorded), t.rounding,
                              "figures of the same log" + (", rounded" if t.rounding else "")
                              + (f"; {t.lacks}" if t.lacks and t.at_most else ""), t.at_most))
    share, why = _window_tolerance(steps)
    wins = sum(int(s["window_tokens"]) for s in steps) + t.lacks_per_call * n
    lacks = f"; with {t.lacks}" if t.lacks and t.lacks_per_call else f"; {t.lacks}" if t.lacks else ""
    out.append(Comparison("the rebuilt windows add up to {n:,}", t.recorded, wins,
                          round(t.recorded * share) + t.rounding,
                          why + (" and the log's rounding" if t.rounding else "") + lacks, t.at_most))
    return out


def _window_tolerance(steps: Sequence[Mapping[str, Any]]) -> tuple[float, str]:
    kinds = {s.get("window_tokens_kind") for s in steps}
    if kinds <= {"exact"}:
        return EXACT_TOLERANCE, "none: exact counts with the model's own tokenizer, as the agent counts"
    return PROMPT_TOLERANCE, (f"{PROMPT_TOLERANCE:.0%}: the windows are {'/'.join(sorted(k for k in kinds if k))}, "
                              "each within prompt_vs_window's bound")


def _context_at_end(inp: Any) -> tuple[int, tuple[float, str]] | None:
    """The history at the end as ctxf rebuilds it: the last step's window and the messages from its
    reply on (what a next call would read, tool definitions aside), and the tolerance."""
    from ..replay import prepare

    steps = inp.replay.steps
    if not steps:
        return None
    prep = prepare(inp.store, inp.sid, None, config=inp.config, policy="recorded")
    per = prep.counted.per_message
    last = steps[-1]
    tail = sum(int(per[sm.seq]) for sm in prep.messages[last["message_seq"]:] if sm.message.kind == KIND_MESSAGE)
    return int(last["window_tokens"]) + tail, _window_tolerance(steps)


def _two_records(inp: Any, md: Mapping[str, Any]) -> list[Inconsistency]:
    """Copilot CLI's legacy log keeps one conversation twice: ``chatMessages`` (what the model was
    sent, which ctxf reads) and the ``timeline`` (what the terminal showed); the importer counts what
    the timeline holds beyond chatMessages, and warns."""
    extra = md.get("timeline_not_in_chat")
    if not isinstance(extra, Mapping) or not (extra.get("tool_calls") or extra.get("reply_texts")):
        return []
    calls, texts = int(extra.get("tool_calls") or 0), int(extra.get("reply_texts") or 0)
    shown = [e for e in extra.get("entries") or () if isinstance(e, Mapping)]
    what = "; ".join(_entry(e) for e in shown[:4]) + ("; …" if len(shown) > 4 else "")
    first = min((str(e["timestamp"]) for e in shown if e.get("timestamp")), default=None)
    step = _step_after(inp, first)
    replies = [inp.messages[st["message_seq"]].message for st in inp.replay.steps]
    held = sum(len(m.tool_calls) for m in replies)
    where = ("" if not first else f"; the first at {first}, "
             + (f"during step {step}" if step else f"after step {len(replies)}, the last chatMessages holds"))
    return [Inconsistency(
        "totals",
        step=step,
        message=f"the log's two records disagree: chatMessages (what ctxf reads) holds {len(replies)} replies with "
        f"{held} tool call(s); its timeline holds {calls} tool call(s) and {texts} reply text(s) more"
        + (f" ({what})" if what else "") + where,
        figures={"total": "records", "chat_replies": len(replies), "chat_tool_calls": held,
                 "timeline_tool_calls": calls, "timeline_reply_texts": texts, "first_at": first,
                 "entries": list(shown)},
        accounted=(f"ingest warned: the timeline shows {calls} tool call(s) and {texts} reply text(s) that are not in "
                   "chatMessages (what the model was sent); read chatMessages only"))]


def _step_after(inp: Any, ts: str | None) -> int | None:
    """The first step (1-based) whose reply is recorded at or after ``ts`` (an ISO timestamp): the
    call that was answering when the timeline recorded the entry chatMessages lacks."""
    if not ts:
        return None
    at = str(stored_time(ts)[0])  # the timeline's time as the store keeps the messages' (one shape, UTC)
    msgs = inp.messages
    for k, st in enumerate(inp.replay.steps, 1):
        when = msgs[st["message_seq"]].message.timestamp
        if when and str(stored_time(when)[0]) >= at:
            return k
    return None


def _entry(e: Mapping[str, Any]) -> str:
    if e.get("type") == "tool_call":
        return " ".join(str(x) for x in (e.get("name"), e.get("command"), e.get("path")) if x)
    return f"reply “{str(e.get('text') or '')[:40]}”"


__all__ = ["Comparison", "NO_TOTALS", "Total", "log_totals", "totals"]
