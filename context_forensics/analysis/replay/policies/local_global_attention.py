"""``local_global_attention``: sliding-window (local) attention layers, as in Mistral 7B and Gemma.

Local attention evicts nothing: every token of the prompt is still in the KV cache and still
reachable by the global-attention layers. What changes is *how* it is reachable, so messages
that lie wholly before the last ``local_window`` tokens of the prompt (counted back from the
point where the model starts generating, over the in-window messages; the fixed per-call
overhead is not counted) are marked OUTSIDE_LOCAL, a state of their own that still counts
toward the window total. A message partly inside the local window stays KEPT. The mark is
positional and recomputed at every step: when ``overflow: "left_truncation"`` drops newer
messages, an older preserved system message can be back inside the local window (KEPT again).

Presets (checked against the model cards / configs and papers):

``mistral-7b``  Mistral 7B v0.1 (Sept 2023): every one of the 32 layers uses sliding-window
                attention with a 4,096-token window; there are no global layers, so tokens
                beyond the window are reached only indirectly, layer over layer (a theoretical
                span of about 32 × 4,096 ≈ 131k tokens). Pattern ``1:0``. Later Mistral 7B
                versions (v0.2+) dropped the sliding window.
``gemma-2``     Gemma 2 (June 2024): local (4,096) and global (8,192 context) layers
                alternate, ``1:1``.
``gemma-3``     Gemma 3 (March 2025): five local layers (1,024-token window) for every global
                layer, ``5:1``; 128k context (32k for the 1B model).

``pattern`` is ``"L:G"``: L local layers for every G global ones (``"1:0"``: all local). It
does not change which messages are marked; it is reported with the marks (how the model can
still reach them). A preset fills ``local_window`` and ``pattern`` unless they are given.

The window total is still bounded by the model's context limit. These models are usually
served with a hard limit, so by default (``overflow: "reject"``) an oversize prompt is reported
as a call that would fail, with nothing removed; ``overflow: "left_truncation"`` drops the
oldest non-system messages (whole tool-call groups) instead, like a client trimming history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ._common import check_choice, check_int, evict_oldest, eviction_event, report_overflow
from .base import IN_WINDOW, KEPT, OUTSIDE_LOCAL, Engine, Policy, register_policy

PRESETS = {
    "mistral-7b": {"local_window": 4096, "pattern": "1:0"},
    "gemma-2": {"local_window": 4096, "pattern": "1:1"},
    "gemma-3": {"local_window": 1024, "pattern": "5:1"},
}


def parse_pattern(pattern: Any) -> tuple[int, int]:
    """``"5:1"`` -> (5, 1); ``"all_local"`` is ``"1:0"``. ValueError otherwise."""
    if pattern == "all_local":
        return 1, 0
    try:
        local, glob = (int(x) for x in str(pattern).split(":"))
    except ValueError:
        local, glob = -1, -1
    if local < 1 or glob < 0:
        raise ValueError(f"parameter 'pattern' must look like 'L:G' (local:global layers, e.g. '5:1', "
                         f"'1:0' for all-local), not {pattern!r}")
    return local, glob


@dataclass(slots=True)
class _LocalState:
    reach: str  # how the model still reaches an OUTSIDE_LOCAL message (the pattern's global layers)
    cursor: int = 0  # left-truncation cursor
    lo: int = 0  # messages before it are out of the window or OUTSIDE_LOCAL
    head: int = 0  # tokens of the OUTSIDE_LOCAL messages
    outside: list[int] = field(default_factory=list)  # seqs marked OUTSIDE_LOCAL, oldest first (some evicted since)


@register_policy
class LocalGlobalAttention(Policy):
    name = "local_global_attention"
    description = "mark messages beyond the local attention window (Mistral 7B, Gemma 2/3); evict nothing"
    as_of = "2025-11-01"
    source = ("Mistral 7B paper (arXiv 2310.06825) and v0.1 config; Gemma 2 report (arXiv 2408.00118); "
              "Gemma 3 report (arXiv 2503.19786)")
    defaults: ClassVar[dict[str, Any]] = {"preset": None, "local_window": 4096, "pattern": "1:1", "overflow": "reject"}

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        given = dict(given or {})
        preset = given.get("preset")
        if preset is not None:
            check_choice("preset", preset, tuple(PRESETS))
            given = {**PRESETS[preset], **given}
        p = super().params(given)
        check_int("local_window", p["local_window"], minimum=1)
        parse_pattern(p["pattern"])
        check_choice("overflow", p["overflow"], ("reject", "left_truncation"))
        return p

    def start(self, eng: Engine, p: dict) -> None:
        local, glob = parse_pattern(p["pattern"])
        eng.set_policy_state(_LocalState(reach=f"global layers (1 in {local + glob})" if glob
                                         else "indirectly only, through stacked local layers (no global layers)"))

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        budget = eng.inp.budget
        st = eng.policy_state(_LocalState)
        if p["overflow"] == "left_truncation" and eng.total() > budget:
            st.cursor, dropped = evict_oldest(eng, st.cursor, p["preserve_system"],
                                               lambda: eng.total() <= budget)
            for m in dropped:
                if m < st.lo:  # it was OUTSIDE_LOCAL
                    st.head -= int(eng.tokens[m])
            eviction_event(eng, self.name, dropped, reason="budget")
        w = p["local_window"]
        tail = eng.window - st.head  # in-window tokens from st.lo to the end
        # Evicting newer messages can bring an older preserved one back into the local window.
        back = []
        while st.outside:
            i = st.outside[-1]
            if eng.state[i] != OUTSIDE_LOCAL:  # evicted since
                st.outside.pop()
                continue
            if tail >= w:
                break
            t = int(eng.tokens[i])
            eng.move(i, KEPT)
            st.outside.pop()
            st.head -= t
            tail += t
            st.lo = i
            back.append(i)
        if back:
            eng.event("inside_local", policy=self.name, count=len(back), first=back[-1], last=back[0],
                      local_window=w)
        marked = []
        while st.lo < eng.end:
            i = st.lo
            if eng.state[i] not in IN_WINDOW:
                st.lo += 1
                continue
            t = int(eng.tokens[i])
            if tail - t < w:  # some of message i is within the last `w` tokens
                break
            eng.move(i, OUTSIDE_LOCAL)
            st.outside.append(i)
            st.head += t
            tail -= t
            marked.append(i)
            st.lo += 1
        if marked:
            eng.event("outside_local", policy=self.name, count=len(marked), first=marked[0],
                      last=marked[-1], local_window=w, pattern=p["pattern"], reach=st.reach)
        if p["overflow"] == "reject":
            return report_overflow(eng, "the prompt would")
        return report_overflow(eng, "even the most recent messages")
