"""``auto_compaction``: summarize the history when it reaches a threshold (agent frameworks).

A simulation for what-if questions; for a log that recorded its own compactions use
``recorded``. At a step whose window reaches the threshold (or would not fit the budget),
the history is replaced by a summary: the old messages become SUMMARIZED, and the synthetic
content the model reads instead (summary, bridge) goes into ``eng.extra``, replaced at the
next compaction. A ``compaction`` event (``recorded: False``) gives the tokens before and after.

Presets (``preset``):

``claude_code`` (Claude Code 2.0, as of 2025-11): auto-compact fires when the context reaches
    window − reserved output − buffer. Claude Code reserves 32,000 output tokens and keeps a
    13,000-token buffer ("Autocompact buffer: 45.0k" in ``/context`` on a 200k window), so it
    fires at about 155,000 tokens on a 200k window. ``reserved_output_tokens`` defaults to the
    model's configured reserved output when set, else 32,000; ``buffer_tokens`` to 13,000.
    Nothing of the old conversation is kept except the summary (system messages are sent
    separately and stay). The files Claude Code re-reads after compacting are not modelled.
``codex`` (OpenAI Codex CLI, codex-rs ``compact.rs``, as of 2025-11): fires at
    ``auto_compact_limit``, by default 0.9 × the context window. The rebuilt history is the
    initial context (the leading system/developer messages and the first user message: developer
    instructions, AGENTS.md user instructions), then a bridge holding the earlier user messages,
    newest first, up to 20,000 tokens (``bridge_max_tokens``; the one that crosses the limit is
    truncated), then the summary. User messages of earlier compactions are carried along, so the
    bridge is min(20,000, all user tokens summarized so far).
``generic``: fires at ``threshold`` (default 0.8 of the budget) and keeps the most recent
    whole groups that fit in ``keep_recent_tokens`` (default a quarter of the budget) verbatim,
    as LangChain's ``SummarizationMiddleware`` or a hand-written agent loop does.

``threshold`` overrides a preset's trigger: an int is tokens, a float in (0, 1] a fraction of the
limit (claude_code, codex) or of the budget (generic). The trigger never sits above the budget:
a window that would not fit is compacted too (Claude Code and Codex also compact when the
provider answers "prompt too long").

``summary_tokens`` is the summary's length (default 2,000; ``"recorded"`` takes the mean of the
log's own compaction summaries, 2,000 when there are none). A summary is never longer than
what it replaces, so a compaction never grows the window. Preserved system messages (and the
Codex initial context) stay KEPT; a tool call and its results are summarized together. If even
what stays does not fit, the overflow is reported.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._common import check_choice, check_int, report_overflow
from .base import IN_WINDOW, SUMMARIZED, Engine, Policy, ReplayInput, register_policy

PRESETS = ("claude_code", "codex", "generic")
CLAUDE_CODE_RESERVED_OUTPUT = 32_000
CLAUDE_CODE_BUFFER = 13_000
CODEX_FRACTION = 0.9
CODEX_BRIDGE_MAX = 20_000
GENERIC_FRACTION = 0.8
DEFAULT_SUMMARY = 2_000


def initial_context(inp: ReplayInput) -> list[int]:
    """Codex's initial context: the leading system/developer messages and the first user message."""
    out = []
    i = 0
    while i < inp.n and inp.is_system(i):
        out.append(i)
        i += 1
    if i < inp.n and inp.roles[i] == "user" and inp.kinds[i] == "message":
        out.append(i)
    return out


def _threshold_value(t: Any, base: int) -> int:
    return int(t * base) if isinstance(t, float) else int(t)


@register_policy
class AutoCompaction(Policy):
    name = "auto_compaction"
    description = "summarize the history at a threshold (Claude Code, Codex, generic presets)"
    as_of = "2025-11-01"
    source = ("Claude Code 2.0 auto-compact (/context 'Autocompact buffer'); "
              "openai/codex codex-rs core/src/codex/compact.rs (auto_compact_token_limit, "
              "COMPACT_USER_MESSAGE_MAX_TOKENS); LangChain SummarizationMiddleware")
    defaults: ClassVar[dict[str, Any]] = {
        "preset": "claude_code",
        "threshold": None,
        "summary_tokens": DEFAULT_SUMMARY,
        "reserved_output_tokens": None,
        "buffer_tokens": CLAUDE_CODE_BUFFER,
        "bridge_max_tokens": CODEX_BRIDGE_MAX,
        "keep_recent_tokens": None,
    }

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        p = super().params(given)
        check_choice("preset", p["preset"], PRESETS)
        t = p["threshold"]
        if isinstance(t, float):
            if not 0 < t <= 1:
                raise ValueError(f"parameter 'threshold' as a fraction must be in (0, 1], not {t!r}")
        else:
            check_int("threshold", t, optional=True)
        if p["summary_tokens"] != "recorded":
            check_int("summary_tokens", p["summary_tokens"])
        check_int("reserved_output_tokens", p["reserved_output_tokens"], optional=True)
        check_int("buffer_tokens", p["buffer_tokens"])
        check_int("bridge_max_tokens", p["bridge_max_tokens"])
        check_int("keep_recent_tokens", p["keep_recent_tokens"], optional=True)
        return p

    def start(self, eng: Engine, p: dict) -> None:
        inp = eng.inp
        preset = p["preset"]
        t = p["threshold"]
        if preset == "claude_code":
            reserved = p["reserved_output_tokens"]
            if reserved is None:
                reserved = inp.reserved or CLAUDE_CODE_RESERVED_OUTPUT
            thr = _threshold_value(t, inp.limit) if t is not None else inp.limit - reserved - p["buffer_tokens"]
        elif preset == "codex":
            thr = _threshold_value(t if t is not None else CODEX_FRACTION, inp.limit)
        else:
            thr = _threshold_value(t if t is not None else GENERIC_FRACTION, inp.budget)
        eng.threshold = max(0, thr)
        keep = p["keep_recent_tokens"]
        eng.keep_recent = (inp.budget // 4 if preset == "generic" else 0) if keep is None else keep
        s = p["summary_tokens"]
        if s == "recorded":
            found = [int(inp.tokens[i]) for i in range(inp.n) if inp.kinds[i] == "compaction_summary"]
            s = round(sum(found) / len(found)) if found else DEFAULT_SUMMARY
        eng.summary_len = s
        eng.protected = set(initial_context(inp)) if preset == "codex" else set()
        eng.bridge_max = p["bridge_max_tokens"] if preset == "codex" else 0
        eng.bridge = 0
        eng.user_summarized = 0  # tokens of user messages summarized so far (the Codex bridge)
        eng.cursor = 0  # messages before it are summarized or stay for good

    def _stays(self, eng: Engine, i: int, p: dict) -> bool:
        return i in eng.protected or (p["preserve_system"] and eng.is_sys[i])

    def _cut(self, eng: Engine, p: dict) -> int:
        """Start of the recent suffix kept verbatim: whole groups worth ≤ keep_recent_tokens."""
        cut, kept = eng.end, 0
        while cut > eng.cursor and eng.keep_recent > 0:
            c = j = cut - 1
            while j >= c:  # extend back until no group reaches before c
                c = min(c, eng.members(j)[0])
                j -= 1
            if c < eng.cursor:
                break
            cost = sum(eng.cost(m) for m in range(c, cut) if not self._stays(eng, m, p))
            if kept + cost > eng.keep_recent:
                break
            kept, cut = kept + cost, c
        return cut

    def _compact(self, eng: Engine, cut: int, p: dict) -> int:
        """Summarize the in-window messages in [cursor, cut) that do not stay; return how many."""
        inp = eng.inp
        replaced = eng.extra
        moved = 0
        for i in range(eng.cursor, cut):
            if eng.state[i] in IN_WINDOW and not self._stays(eng, i, p):
                replaced += eng.cost(i)
                if inp.roles[i] == "user" and inp.kinds[i] == "message":
                    eng.user_summarized += int(eng.tokens[i])
                eng.move(i, SUMMARIZED)
                moved += 1
        eng.cursor = cut
        bridge = min(eng.bridge_max, eng.user_summarized)
        eng.extra = bridge + min(eng.summary_len, max(0, replaced - bridge))
        eng.bridge = bridge
        return moved

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        budget = eng.inp.budget
        total = eng.total()
        if total < eng.threshold and total <= budget:
            return 0
        trigger = "threshold" if total >= eng.threshold else "budget"
        cut = self._cut(eng, p)
        if not any(eng.state[i] in IN_WINDOW and not self._stays(eng, i, p) for i in range(eng.cursor, cut)):
            if total <= budget:
                return 0  # only the recent part is left, and it fits: nothing worth compacting
            cut = eng.end
        moved = self._compact(eng, cut, p)
        if eng.total() > budget and cut < eng.end:
            moved += self._compact(eng, eng.end, p)  # the recent part kept verbatim does not fit
        if moved:
            eng.event("compaction", policy=self.name, preset=p["preset"], recorded=False, trigger=trigger,
                      threshold=eng.threshold, tokens_before=total, tokens_after=eng.total(),
                      summarized=moved, summary_tokens=eng.extra - eng.bridge, bridge_tokens=eng.bridge)
        return report_overflow(eng, "the summary and the messages that stay")
