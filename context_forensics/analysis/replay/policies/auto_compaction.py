"""``auto_compaction``: summarize the history when it reaches a threshold (agent frameworks).

A simulation for what-if questions; for a log that recorded its own compactions use
``recorded``. At a step whose window reaches the threshold (or would not fit the budget),
the history is replaced by a summary: the old messages become SUMMARIZED, and the synthetic
content the model reads instead (summary, bridge) goes into ``eng.extra``, replaced at the
next compaction. A ``compaction`` event (``recorded: False``) gives the tokens before and after.

Presets (``preset``; each a dated entry of ``_compaction_presets.PRESETS`` with its source):
``claude_code_2_0`` / ``claude_code_2_1`` (``claude_code`` is 2.1), ``codex``, ``pi_0_13`` /
``pi_0_14`` (``pi``), ``cline``, ``gemini_cli`` / ``gemini_cli_0_1``, Inspect AI's strategies
``inspect_summary`` / ``inspect_native`` / ``inspect_auto`` (``inspect``) / ``inspect_edit`` /
``inspect_trim``, and ``generic``. ``auto`` is resolved from the session's agent and version before
a replay starts (``spec.resolve_replay``, ``_compaction_presets.pick_preset``), and the replay's
params say which preset it picked and why.

The trigger compares the quantity the agent itself compares (``Preset.quantity``): while the
window is still the one the log recorded (no simulated compaction yet) and the previous call was
answered under this replay's model, that is the previous call's recorded prompt plus its reply
(plus, for Claude Code, the messages added since); otherwise the replay's own count of the same
messages. Pi ≥ 0.14 and Gemini CLI look only once the agent's turn ended (``when="turn_end"``).
What fires then (``Preset.action``): a summary (Claude Code keeps nothing else; Codex keeps its
initial context and a bridge of user messages ≤ 20,000 tokens; Pi keeps the newest turns worth
≥ 20,000 tokens; Inspect's summary keeps its prefix), a truncation (Cline: the first user–assistant
pair and the newer half of the rest, evicted without a summary, unless its duplicate-file-read
rewrites saved ≥ 30%: ``_cline_context``, rebuilt from the task folder in ``cline_task`` on the recorded
history, so applied only while the window is the recorded one; the rewrites' own shrinking of the
window is not simulated), clearing old tool results
(``inspect_edit``: all but the newest 3 tool uses) or a trim (``inspect_trim``: the prefix and the
newest 80% of the messages). A compaction that does not bring the window under the budget is
followed by a full summary (summary presets) or reported as an overflow.

``threshold`` overrides a preset's trigger: an int is tokens, a float in (0, 1] a fraction of the
limit, or of the budget for generic and codex (whose window is the input window). The trigger never sits above the
budget: a window that would not fit is compacted too (Claude Code and Codex also compact when the
provider answers "prompt too long").

``summary_tokens`` is the summary's length (default 2,000; ``"recorded"`` takes the mean of the
log's own compaction summaries, 2,000 when there are none). A summary is never longer than
what it replaces, so a compaction never grows the window. Preserved system messages (and the
Codex initial context) stay KEPT; a tool call and its results are summarized together. If even
what stays does not fit, the overflow is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ._common import check_choice, check_int, report_overflow
from ._compaction_presets import (
    CLAUDE_CODE_2_0_RESERVED,
    CLAUDE_CODE_2_1_RESERVED_CAP,
    CLAUDE_CODE_BUFFER,
    CODEX_BRIDGE_MAX,
    NAMES,
    Preset,
    get_preset,
)
from .base import CLEARED, EVICTED, IN_WINDOW, KEPT, SUMMARIZED, Engine, Policy, ReplayInput, register_policy

if TYPE_CHECKING:  # pragma: no cover
    from ._cline_context import Decision

PRESETS = NAMES + ("auto",)
DEFAULT_SUMMARY = 2_000
MARKERS = ("history_edit", "compaction_boundary")
# Claude Code's roughTokenCountEstimation: characters / 4 for the messages after the last usage
# (tokenCountWithEstimation; its preTokens in this corpus is the last call's input + cache + output
# plus exactly that: 167,094 + 607 + round(120 / 4) = 167,731)
CHARS_PER_TOKEN = 4
RECORDED_COMPACTION = ("compaction_boundary", "compaction_summary", "history_edit")


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


def protected_messages(preset: str, inp: ReplayInput) -> set[int]:
    """The messages a preset never removes (besides preserved system messages): Codex's and
    Inspect's prefix (``initial_context``), Cline's first user–assistant pair."""
    pr = get_preset(preset)
    if pr.keep_prefix:
        return set(initial_context(inp))
    if pr.action == "truncate" or pr.keep_first:
        first = 1 if pr.keep_first else 2
        conv = [i for i in range(inp.n) if not inp.is_system(i) and inp.kinds[i] not in MARKERS]
        groups = {int(inp.group[i]) for i in conv[:first]}  # a tool call's results stay with it
        return {i for i in range(inp.n) if int(inp.group[i]) in groups}
    return set()


def _threshold_value(t: Any, base: int) -> int:
    return int(t * base) if isinstance(t, float) else int(t)


def preset_threshold(pr: Preset, p: dict, inp: ReplayInput) -> int:
    """The preset's trigger in tokens for this input (``threshold`` and the Claude Code
    ``reserved_output_tokens`` / ``buffer_tokens`` parameters override it)."""
    t = p["threshold"]
    if t is not None:
        return _threshold_value(t, inp.budget if pr.agent == "generic" or pr.of_budget else inp.limit)
    if pr.agent == "claude_code":
        reserved = p["reserved_output_tokens"]
        if pr.name == "claude_code_2_0":
            reserved = (inp.reserved or CLAUDE_CODE_2_0_RESERVED) if reserved is None else reserved
        else:  # 2.1.21+: min(the model's max output, 20,000); every Claude 4 model's is above 20k
            reserved = CLAUDE_CODE_2_1_RESERVED_CAP if reserved is None else min(reserved, CLAUDE_CODE_2_1_RESERVED_CAP)
        return inp.limit - reserved - p["buffer_tokens"]
    return pr.threshold(inp.limit, inp.budget)


def turn_ended(inp: ReplayInput, a: int, end: int) -> bool:
    """Whether the assistant message ``a`` ended the agent's turn: the next message (markers
    skipped) is the user's, not a tool result."""
    for i in range(a + 1, end):
        if inp.kinds[i] in MARKERS or inp.kinds[i] == "reasoning":
            continue
        return inp.roles[i] == "user"
    return False


def would_remove(eng: Engine, preset: str) -> list[int]:
    """The messages ``preset``'s rule would take out of the engine's window now, without moving
    any: the oldest half of the conversation (Cline's truncation), the oldest fifth (Inspect's
    trim), older tool results (Inspect's edit), or everything before the newest turns worth the
    preset's keep-recent tokens (a summary). Preserved system messages and the preset's protected
    prefix never; a tool call and its results together."""
    pr = get_preset(preset)
    inp = eng.inp
    keep = protected_messages(preset, inp)
    live = [i for i in range(eng.end) if eng.state[i] in IN_WINDOW and not eng.is_sys[i] and i not in keep
            and inp.kinds[i] not in MARKERS]
    if pr.action == "truncate":
        chosen = live[: len(live) // 4 * 2]
    elif pr.action == "trim":
        chosen = live[: len(live) - int(len(live) * pr.preserve)]
    elif pr.action == "clear_tool_results":
        calls = sorted({eng.group[i] for i in live if inp.roles[i] == "tool"})
        newest = set(calls[-pr.keep_tool_uses:]) if pr.keep_tool_uses else set()
        return [i for i in live if inp.roles[i] == "tool" and eng.group[i] not in newest]
    else:  # a summary: all but the newest whole groups worth the preset's keep-recent tokens
        budget = int(eng.total() * pr.keep_recent_fraction) if pr.keep_recent_fraction else pr.keep_recent_tokens or 0
        kept, cut = 0, len(live)
        while cut > 0 and kept + eng.cost(live[cut - 1]) <= budget:
            cut -= 1
            kept += eng.cost(live[cut])
        chosen = live[:cut]
    out = {m for i in chosen for m in eng.members(i) if eng.state[m] in IN_WINDOW and m not in keep}
    return sorted(out)


def _with_cline_task(p: dict[str, Any], session: dict[str, Any], picked: str) -> dict[str, Any]:
    """Point the cline preset at the task folder the session was ingested from, or say (in
    ``preset_picked``, which the replay prints) that its file-read check is not modelled because
    the folder is no longer readable."""
    from pathlib import Path

    folder = session.get("source")
    if folder and (Path(folder) / "ui_messages.json").is_file():
        p["cline_task"] = folder
    else:
        p["preset_picked"] = (f"{picked}; Cline's duplicate-file-read check (30% rule) not modelled: "
                              f"the task folder {folder!r} it is rebuilt from is not there")
    return p


@dataclass(slots=True)
class _CompactionState:
    preset: Preset
    threshold: int  # tokens: the trigger (``preset_threshold``, the budget when that is below zero)
    threshold_note: str | None  # why the trigger is the budget, if it is
    keep_recent: int  # tokens of the newest groups a summary keeps verbatim (0: none)
    summary_len: int  # tokens of a summary
    protected: set[int]  # messages the preset never removes (``protected_messages``)
    bridge_max: int  # the Codex bridge's cap (0: no bridge)
    bridge: int = 0  # tokens of the bridge in the window
    user_summarized: int = 0  # tokens of user messages summarized so far (the Codex bridge)
    cursor: int = 0  # messages before it are summarized or stay for good
    synced: bool = True  # the window is still the one the log recorded: its usage is the agent's figure
    cline_skips: dict[int, Decision] = field(default_factory=dict)  # Cline's steps its file-read rewrites saved


@register_policy
class AutoCompaction(Policy):
    name = "auto_compaction"
    description = "summarize, truncate or clear at an agent's threshold (dated presets per agent version)"
    as_of = "2026-02-08"
    source = ("per preset (_compaction_presets.PRESETS): Claude Code CHANGELOG and issues; openai/codex "
              "compact.rs; badlogic/pi-mono coding-agent compaction; cline/cline context-management; "
              "google-gemini/gemini-cli chatCompressionService; inspect_ai model/_compaction; LangChain "
              "SummarizationMiddleware")
    defaults: ClassVar[dict[str, Any]] = {
        "preset": "claude_code",
        "threshold": None,
        "summary_tokens": DEFAULT_SUMMARY,
        "reserved_output_tokens": None,
        "buffer_tokens": CLAUDE_CODE_BUFFER,
        "bridge_max_tokens": CODEX_BRIDGE_MAX,
        "keep_recent_tokens": None,
        "preset_picked": None,  # set by the replay when preset "auto" was resolved: which and why
        # Cline: the task folder the session was ingested from (set by for_session when it is still
        # there): its file-read optimisation is rebuilt from it (_cline_context); None: not modelled
        "cline_task": None,
        "first_step": 1,  # the session's step number of this input's first step (a replay from the middle)
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
        check_int("first_step", p["first_step"])
        if p["cline_task"] is not None and not isinstance(p["cline_task"], str):
            raise ValueError(f"parameter 'cline_task' must be a task folder's path, not {p['cline_task']!r}")
        return p

    def for_session(self, p: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
        """Preset ``auto``, or an agent's undated name (``claude_code``, ``pi``, ``gemini_cli``) on that
        agent's session: the preset of the session's agent and version (its date where the agent
        records none), named with why in ``preset_picked``."""
        from ._compaction_presets import ALIASES, get_preset, pick_preset, session_agent

        asked = p["preset"]
        agent, version, date = session_agent(session)
        if asked == "cline" and p["cline_task"] is None and session.get("format") == "cline":
            return _with_cline_task({**p}, session, "cline")
        if asked != "auto" and not (asked in ALIASES and get_preset(asked).agent == agent):
            return p
        name, why = pick_preset(agent, version, date)
        out = {**p, "preset": name, "preset_picked": f"{asked}: {name} ({why})"}
        if name == "cline" and p["cline_task"] is None and session.get("format") == "cline":
            out = _with_cline_task(out, session, out["preset_picked"])
        return out

    def start(self, eng: Engine, p: dict) -> None:
        inp = eng.inp
        if p["preset"] == "auto":
            raise ValueError("preset 'auto' is picked from a session's agent and version: replay a stored "
                             "session (ctxf replay), or name a preset")
        pr = get_preset(p["preset"])
        thr = preset_threshold(pr, p, inp)
        note = None
        if thr <= 0:  # the preset's reserve and buffer exceed this window (claude_code on an 8k model)
            note = (f"{pr.name}'s trigger ({thr:,}) is below zero on a window of {inp.limit:,} tokens: "
                    f"compacted only when the window would not fit the budget")
            thr = inp.budget
        keep = p["keep_recent_tokens"]
        if keep is None:
            keep = inp.budget // 4 if pr.agent == "generic" else (pr.keep_recent_tokens or 0)
        s = p["summary_tokens"]
        if s == "recorded":
            found = [int(inp.tokens[i]) for i in range(inp.n) if inp.kinds[i] == "compaction_summary"]
            s = round(sum(found) / len(found)) if found else DEFAULT_SUMMARY
        st = eng.set_policy_state(_CompactionState(
            preset=pr, threshold=thr, threshold_note=note, keep_recent=keep if pr.action == "summary" else 0,
            summary_len=s, protected=protected_messages(pr.name, inp),
            bridge_max=p["bridge_max_tokens"] if pr.bridge_max else 0))
        if pr.agent == "cline" and p["cline_task"]:
            from ._cline_context import load_task, skipped_requests
            from ._compaction_presets import cline_max_allowed

            task = load_task(p["cline_task"])
            if task is not None:
                st.cline_skips = skipped_requests(task[0], task[1], cline_max_allowed(inp.limit))

    def _stays(self, eng: Engine, st: _CompactionState, i: int, p: dict) -> bool:
        return i in st.protected or (p["preserve_system"] and eng.is_sys[i])

    def _cut(self, eng: Engine, st: _CompactionState, p: dict) -> int:
        """Start of the recent suffix kept verbatim: whole groups worth ≤ keep_recent_tokens (Roo:
        the last N messages, whole groups)."""
        cut, kept = eng.end, 0
        n_last = st.preset.keep_last_messages
        if n_last:
            live = [i for i in range(st.cursor,
                                     eng.end) if eng.state[i] in IN_WINDOW and not self._stays(eng, st, i, p)]
            if len(live) <= n_last:
                return st.cursor
            c = live[-n_last]
            while True:  # back to the start of every group reaching before c
                start = min(eng.members(j)[0] for j in range(c, eng.end))
                if start >= c:
                    return max(c, st.cursor)
                c = start
        while cut > st.cursor and st.keep_recent > 0:
            c = j = cut - 1
            while j >= c:  # extend back until no group reaches before c
                c = min(c, eng.members(j)[0])
                j -= 1
            if c < st.cursor:
                break
            cost = sum(eng.cost(m) for m in range(c, cut) if not self._stays(eng, st, m, p))
            if kept + cost > st.keep_recent:
                break
            kept, cut = kept + cost, c
        return cut

    def _compact(self, eng: Engine, st: _CompactionState, cut: int, p: dict) -> int:
        """Summarize the in-window messages in [cursor, cut) that do not stay; return how many."""
        inp = eng.inp
        replaced = eng.extra
        moved = 0
        for i in range(st.cursor, cut):
            if eng.state[i] in IN_WINDOW and not self._stays(eng, st, i, p) and eng.movable(i):
                replaced += eng.cost(i)
                if inp.roles[i] == "user" and inp.kinds[i] == "message":
                    st.user_summarized += int(eng.tokens[i])
                eng.move(i, SUMMARIZED)
                moved += 1
        st.cursor = cut
        bridge = min(st.bridge_max, st.user_summarized)
        eng.extra = bridge + min(st.summary_len, max(0, replaced - bridge))
        st.bridge = bridge
        return moved

    def _live(self, eng: Engine, st: _CompactionState, p: dict) -> list[int]:
        """In-window messages a truncation or trim may remove, oldest first."""
        inp = eng.inp
        return [i for i in range(eng.end) if eng.state[i] in IN_WINDOW and not self._stays(eng, st, i, p)
                and inp.kinds[i] not in MARKERS]

    def _evict_oldest(self, eng: Engine, st: _CompactionState, live: list[int], count: int) -> int:
        """Evict the oldest ``count`` of ``live`` (a tool call and its results together)."""
        moved = 0
        for i in live[:count]:
            if any(m in st.protected for m in eng.members(i)):
                continue
            for m in eng.members(i):
                if eng.state[m] in IN_WINDOW and m not in st.protected and eng.movable(m):
                    eng.move(m, EVICTED)
                    moved += 1
        return moved

    def _truncate(self, eng: Engine, st: _CompactionState, q: int, p: dict) -> int:
        """Cline: keep the first user–assistant pair; drop half the rest (a quarter kept when half
        the usage is still over the limit), an even number of messages."""
        live = self._live(eng, st, p)
        if q / 2 > st.threshold:
            count = (len(live) * 3 // 4 // 2) * 2
        else:
            count = (len(live) // 4) * 2
        return self._evict_oldest(eng, st, live, count)

    def _trim(self, eng: Engine, st: _CompactionState, p: dict) -> int:
        live = self._live(eng, st, p)
        keep = int(len(live) * st.preset.preserve)
        return self._evict_oldest(eng, st, live, len(live) - keep)

    def _clear(self, eng: Engine, st: _CompactionState, p: dict) -> int:
        """Inspect's CompactionEdit: clear tool results but those of the newest ``keep_tool_uses`` calls."""
        inp = eng.inp
        calls = sorted({eng.group[i] for i in range(eng.end) if inp.roles[i] == "tool"})
        keep = set(calls[-st.preset.keep_tool_uses:]) if st.preset.keep_tool_uses else set()
        moved = 0
        for i in range(eng.end):
            if inp.roles[i] == "tool" and eng.state[i] == KEPT and eng.group[i] not in keep:
                eng.move(i, CLEARED)
                moved += 1
        return moved

    def _quantity(self, eng: Engine, st: _CompactionState, step: int) -> tuple[int, str]:
        """What the agent compares with its threshold before this call (see the module docstring)."""
        inp, pr = eng.inp, st.preset
        prev = step - 2  # 0-based index of the previous call
        if pr.quantity == "window" or prev < 0:
            return eng.total(), "window"
        a = int(inp.steps[prev])
        rec = inp.recorded_prompt[prev] if prev < len(inp.recorded_prompt) else None
        if st.synced and rec and prev < len(inp.answered) and inp.answered[prev]:
            out = inp.recorded_output[prev] if prev < len(inp.recorded_output) else None
            q = int(rec)
            if pr.quantity != "last_prompt":
                q += int(out) if out is not None else eng.tokens[a]
            if pr.quantity == "usage_and_new":  # the messages since: Claude Code as characters / 4
                chars = inp.chars if pr.agent == "claude_code" else None
                for i in range(a + 1, eng.end):
                    if inp.kinds[i] in RECORDED_COMPACTION:
                        break  # the log's own compaction came here: what follows is after it
                    if eng.state[i] in IN_WINDOW:
                        q += round(int(chars[i]) / CHARS_PER_TOKEN) if chars is not None else eng.cost(i)
            return q, "recorded usage"
        if pr.quantity == "usage_and_new":
            return eng.total(), "window"
        since = a if pr.quantity == "last_prompt" else a + 1  # the last prompt leaves its reply out
        return eng.total() - sum(eng.cost(i) for i in range(since, eng.end)), "window"

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        budget = eng.inp.budget
        st = eng.policy_state(_CompactionState)
        pr = st.preset
        total = eng.total()
        q, basis = self._quantity(eng, st, step)
        # Pi (shouldCompact) and Inspect (total_tokens > threshold) fire above it; the others at it
        due = q > st.threshold if pr.agent in ("pi", "inspect") else q >= st.threshold
        if due and pr.when == "turn_end":
            due = step >= 2 and turn_ended(eng.inp, int(eng.inp.steps[step - 2]), eng.end)
        skip = st.cline_skips.get(step + p["first_step"] - 1) if due and st.synced else None
        if skip is not None:  # Cline's duplicate-file-read rewrites saved >= 30%: no truncation
            due = False
            saved = skip.fraction  # a request sent untruncated rewrote something: a figure, not None
            eng.event("cline_file_read_optimisation", policy=self.name, preset=pr.name, recorded=False,
                      trigger_tokens=q, threshold=st.threshold, rewritten=skip.rewritten,
                      saved_chars=skip.saved, counted_chars=skip.counted,
                      saved_fraction=None if saved is None else round(saved, 4))
        if not due and total <= budget:
            return 0
        inp = eng.inp
        if not due and st.synced and inp.answered and inp.answered[step - 1]:
            return 0  # the provider accepted this very window (as recorded.py): over budget is the estimate's error
        trigger = "threshold" if due else "budget"
        if pr.action == "summary":
            if pr.keep_recent_fraction and p["keep_recent_tokens"] is None:  # Gemini CLI: the newest 30%
                st.keep_recent = int(total * pr.keep_recent_fraction)
            cut = self._cut(eng, st, p)
            if not any(eng.state[i] in IN_WINDOW and not self._stays(eng, st, i, p) for i in range(st.cursor, cut)):
                if total <= budget:
                    return 0  # only the recent part is left, and it fits: nothing worth compacting
                cut = eng.end
            moved = self._compact(eng, st, cut, p)
        elif pr.action == "truncate":
            moved = self._truncate(eng, st, q, p)
        elif pr.action == "trim":
            moved = self._trim(eng, st, p)
        else:
            moved = self._clear(eng, st, p)
        if eng.total() > budget:  # what the preset keeps does not fit: what the agent does on "prompt too long"
            if pr.action in ("truncate", "trim"):
                moved += self._evict_oldest(eng, st, self._live(eng, st, p), eng.end)
            else:
                st.cursor = min(st.cursor, eng.end)
                moved += self._compact(eng, st, eng.end, p)
        if moved:
            st.synced = False
            eng.event("compaction", policy=self.name, preset=pr.name, action=pr.action, recorded=False,
                      trigger=trigger, threshold=st.threshold, trigger_tokens=q, trigger_basis=basis,
                      tokens_before=total, tokens_after=eng.total(), summarized=moved,
                      summary_tokens=eng.extra - st.bridge, bridge_tokens=st.bridge,
                      **({"note": st.threshold_note} if st.threshold_note else {}))
        return report_overflow(eng, "the summary and the messages that stay")
