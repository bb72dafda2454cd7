"""``recorded``: the log's own records are the ground truth; nothing is simulated.

Frameworks that manage their context write down what they did, and importers normalise it:

- Claude Code writes a ``compact_boundary`` system record followed by the summary user
  message (``isCompactSummary``); Codex rollouts write a ``compacted`` item / ``context_compacted``
  event followed by the rebuilt history. These arrive as messages of kind
  ``compaction_boundary`` and ``compaction_summary``.
- Claude Code (and Anthropic context editing, when the client logs the edited prompt) blank out
  old tool results; these arrive as kind ``cleared_tool_result``.

When the history passes a compaction (a boundary; or a summary with no boundary before it
since the last model call) every older in-window message becomes SUMMARIZED, except preserved
system messages and a tool call whose results come after the boundary (the pair stays
together, KEPT). The boundary and the summary themselves are ordinary history from then on.
A ``compaction`` event (``recorded: True``) gives the window up to the boundary before and after
it (like Claude Code's ``compactMetadata.preTokens``), and how many messages it summarized. A
``cleared_tool_result`` becomes CLEARED in the step it appears, at its own recorded size (a
``clearing`` event, ``recorded: True``).

- Cline, Roo, Gemini CLI and Pi record edits of the history itself (a truncation, a rewind, a
  condensing that keeps a tail; Claude Code's microcompact, which clears tool results): a
  ``history_edit`` marker lists the earlier messages that left (``records.HistoryEdit``). At the
  marker they become EVICTED, SUMMARIZED or CLEARED (action ``cleared``), exactly those,
  even when that parts a tool call from its result (the event counts such pairs: the log says
  the model saw it so). A ``history_edit`` event (``recorded: True``) gives its type, source,
  how many messages left and the window before and after; a summary right after the marker is
  that edit's, not a compaction of its own. Simulated policies leave the markers alone (they
  count no tokens) and manage the whole history themselves.

Nothing else is removed. A call the log shows accepted and answered under the replay's model
(``ReplayInput.answered``) is never an overflow: the provider took it, so an estimate over the
budget is the estimate's error (and the replay bounds the reserved output by such calls in the
first place). Otherwise, if the window is over the budget, that is what the log says the model
was sent (or the limit in the config is wrong, or the call failed): an ``overflow`` event is
reported and nothing moves. The replay layer compares ``window_tokens`` with the recorded
prompt sizes (``ReplayInput.recorded_prompt``), which beat any estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._common import report_overflow
from .base import CLEARED, EVICTED, IN_WINDOW, KEPT, OUTSIDE_LOCAL, SUMMARIZED, Engine, Policy, register_policy


@dataclass(slots=True)
class _RecordedState:
    group_end: dict[int, int] = field(default_factory=dict)  # group -> its last member's seq (future members too)
    scan: int = 0  # the records up to here are applied
    cursor: int = 0  # messages before it were covered by a compaction
    straddling: list[int] = field(default_factory=list)  # older messages kept: their group reached past a boundary
    open_boundary: bool = False  # a boundary seen and no model call since


@register_policy
class Recorded(Policy):
    name = "recorded"
    description = "replay the log's own compaction and clearing records (ground truth)"
    as_of = "2025-11-01"
    source = ("Claude Code session JSONL (compact_boundary, isCompactSummary, cleared tool results); "
              "Codex rollout JSONL (compacted, context_compacted); recorded history edits (Cline deleted "
              "ranges, Roo condense and truncation, Gemini CLI rewinds, Pi compactions); provider usage records")

    def start(self, eng: Engine, p: dict) -> None:
        inp = eng.inp
        st = eng.set_policy_state(_RecordedState())
        for i in range(inp.n):
            st.group_end[int(inp.group[i])] = i

    def _compact(self, eng: Engine, st: _RecordedState, at: int, p: dict) -> None:
        inp = eng.inp
        later = sum(eng.cost(i) for i in range(at, eng.end))  # already in the history, after it
        before = eng.total() - later
        candidates = st.straddling + list(range(st.cursor, at))
        st.straddling = []
        moved = 0
        for i in candidates:
            if eng.state[i] not in IN_WINDOW or (p["preserve_system"] and inp.is_system(i)) or not eng.movable(i):
                continue
            if st.group_end[int(inp.group[i])] >= at:
                st.straddling.append(i)
                continue
            eng.move(i, SUMMARIZED)
            moved += 1
        st.cursor = at
        eng.event("compaction", policy=self.name, recorded=True, at=at, record=inp.kinds[at],
                  tokens_before=before, tokens_after=eng.total() - later, summarized=moved,
                  **({"recorded_tokens_before": inp.recorded_before[at]} if at in inp.recorded_before else {}))

    def _edit(self, eng: Engine, at: int) -> None:
        inp = eng.inp
        edit = inp.edits.get(at)
        if edit is None:
            return
        later = sum(eng.cost(i) for i in range(at, eng.end))
        before = eng.total() - later
        state = {"summarized": SUMMARIZED, "cleared": CLEARED}.get(edit.action, EVICTED)
        moved: list[int] = []
        for a, b in edit.ranges:
            for i in range(a, b):
                if eng.state[i] in IN_WINDOW and eng.movable(i):
                    eng.move(i, state)
                    moved.append(i)
        gone = set(moved)
        parted = set() if state == CLEARED else {  # a cleared result stays, with its call
            int(inp.group[i]) for i in moved
            if any(j not in gone and eng.state[j] in IN_WINDOW for j in eng.members(i))}
        eng.event("history_edit", policy=self.name, recorded=True, at=at, edit=edit.type, action=edit.action,
                  source=edit.source, removed=len(moved), tokens_before=before, tokens_after=eng.total() - later,
                  parted_pairs=len(parted),
                  **({"recorded_tokens_before": edit.figures["tokens_before"]}
                     if type(edit.figures.get("tokens_before")) is int else {}),
                  **({"rests_on": edit.figures["rests_on"]} if isinstance(edit.figures.get("rests_on"), str) else {}))

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        inp = eng.inp
        self._scan(eng, p)
        if step in inp.inferred:
            self._unrecorded(eng, step)
        if inp.answered and inp.answered[step - 1]:
            return 0  # the provider accepted this very window: whatever the estimate says, it fit
        # The call is in the log, so it did not fail for size: the token estimate or the
        # configured limit is off (or the provider accepted more than the config says).
        return report_overflow(eng, "the recorded window would", would_fail=False, recorded=True)

    def _unrecorded(self, eng: Engine, step: int) -> None:
        """What the log did not record before this call (``unrecorded.Inferred``): the agent's own
        policy's drops and in-place rewrites where it is modelled exactly (Cline), and an
        ``unrecorded_truncation`` event wherever the recorded prompt fell with no edit recorded."""
        inp = eng.inp
        e = inp.inferred[step]
        total = eng.total()
        dropped: list[int] = []
        rewritten: list[int] = []
        if e.applied:
            for i in e.drop:
                if eng.state[i] in IN_WINDOW:
                    eng.move(i, EVICTED)
                    dropped.append(i)
            for i, _ in e.rewrite:
                if eng.state[i] in (KEPT, OUTSIDE_LOCAL):
                    eng.move(i, CLEARED)
                    rewritten.append(i)
        if e.shrink is None:  # the edit itself is recorded: only the agent's rewrites are inferred
            if rewritten:
                eng.event("clearing", policy=e.policy, recorded=False, inferred=True, count=len(rewritten),
                          first=rewritten[0],
                          last=rewritten[-1], reason="duplicate file reads rewritten to a notice (not recorded)",
                          basis=e.basis)
            return
        prev, before, after = e.shrink
        added = sum(eng.tokens[i] for i in range(int(inp.steps[prev - 1]), int(inp.steps[step - 1])))
        if e.applied:
            would = dropped
            would_tokens = total - eng.total()
        else:
            from .auto_compaction import would_remove

            would = would_remove(eng, e.policy) if e.policy else []
            would_tokens = sum(eng.cost(i) for i in would)
        # would_drop_tokens beside tokens_gone says whether the policy can be what happened
        eng.event("unrecorded_truncation", policy=e.policy, recorded=False, applied=e.applied,
                  recorded_before=before, recorded_after=after, previous_step=prev, tokens_added=added,
                  tokens_gone=before + added - after, would_drop=would, would_drop_tokens=would_tokens,
                  rewritten=rewritten, tokens_before=total, tokens_after=eng.total(), basis=e.basis,
                  figures=e.figures)

    def after_last_call(self, eng: Engine, p: dict) -> None:
        """The records after the last call (a compaction written after the final answer): their
        events, though no window shows them."""
        eng.advance(eng.inp.n)
        self._scan(eng, p)

    def _scan(self, eng: Engine, p: dict) -> None:
        """Apply the records that joined the history since the last scan, in order."""
        inp = eng.inp
        st = eng.policy_state(_RecordedState)
        cleared = []
        for i in range(st.scan, eng.end):
            kind = inp.kinds[i]
            if kind == "compaction_boundary":
                self._compact(eng, st, i, p)
                st.open_boundary = True
            elif kind == "compaction_summary":
                if not st.open_boundary:
                    self._compact(eng, st, i, p)
            elif kind == "history_edit":
                self._edit(eng, i)
                st.open_boundary = True  # a summary that follows is this edit's
            elif kind == "cleared_tool_result" and eng.state[i] == KEPT:
                eng.move(i, CLEARED)
                cleared.append(i)
            if inp.roles[i] == "assistant" and kind != "compaction_summary":
                # a model call closes the boundary; an assistant turn of the summary itself (an ATIF
                # handoff's questions and answers) is the same compaction, not a second one
                st.open_boundary = False
        st.scan = eng.end
        if cleared:
            eng.event("clearing", policy=self.name, recorded=True, count=len(cleared),
                      first=cleared[0], last=cleared[-1])
