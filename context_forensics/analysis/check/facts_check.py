"""The facts check: a fact the facts analysis reports gone (or not yet there) at a step whose
window holds a message carrying it verbatim (``matching.verbatim.verbatim_span``: the words in
order, spacing, case and punctuation aside, said the same way round). Runs only with facts to
check (``ctxf check --fact``): it loads the embedding model."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Inconsistency, NotApplicable


def verbatim_but_absent(prep: Any, timeline: Any, report: Any) -> list[tuple[str, int, int]]:
    """(fact, step, seq) where a message in the step's window holds the fact verbatim (on its
    presence text) and the fact's state there is gone or not yet."""
    from ...matching.text import presence_text
    from ...matching.verbatim import verbatim_span
    from ...records import KIND_CLEARED_TOOL_RESULT
    from ..facts import GONE, NOT_YET
    from ..replay.policies import CLEARED, KEPT, OUTSIDE_LOCAL

    msgs = prep.messages
    texts = [presence_text(sm.message) for sm in msgs]
    out = []
    for ft in report.facts:
        absent = (ft.state == GONE) | (ft.state == NOT_YET)
        if not absent.any():
            continue
        for i, text in enumerate(texts):
            if int(timeline.joins[i]) == 0 or verbatim_span(ft.fact, text) is None:
                continue
            st = timeline.states(i)
            view = (st == KEPT) | (st == OUTSIDE_LOCAL)
            if msgs[i].message.kind == KIND_CLEARED_TOOL_RESULT:
                view |= st == CLEARED
            out += [(ft.fact, int(k) + 1, i) for k in np.flatnonzero(view & absent)]
    return out


def facts(inp: Any) -> list[Inconsistency]:
    """Every (fact, step) reported absent while the window holds the fact verbatim."""
    if not inp.facts:
        raise NotApplicable("no fact given (ctxf check --fact TEXT)")
    from ..facts import track_facts
    from ..replay import Timeline, prepare

    prep = prepare(inp.store, inp.sid, config=inp.config, policy="recorded")
    results, _ = prep.run()
    timeline = Timeline.from_results(prep.inp, results)
    embedder = inp.embedder
    if embedder is None:
        from ...embed.embedders import embedder_for

        embedder = embedder_for(inp.config)
    threshold = inp.config.analysis_thresholds.fact_presence_cosine if inp.config is not None else None
    kw = {} if threshold is None else {"threshold": threshold}
    report = track_facts(prep, inp.facts, embedder, inp.store, timeline=timeline, **kw)
    found: dict[tuple[str, int], list[int]] = {}
    for fact, step, seq in verbatim_but_absent(prep, timeline, report):
        found.setdefault((fact, step), []).append(seq)
    return [Inconsistency(
        "facts", f"step {step}: the fact {fact[:60]!r}{'…' if len(fact) > 60 else ''} is reported absent, but "
        f"message {seqs[0]} in the window holds it verbatim", step=step, seq=seqs[0],
        figures={"fact": fact, "seqs": seqs}) for (fact, step), seqs in sorted(found.items(), key=lambda x: x[0][1])]
