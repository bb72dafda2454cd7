"""Drift: the labelled calibration behind the drift bands and the new-task threshold
(analysis/drift/verdicts.py, analysis/drift/segments.py), and the cost of a drift curve.

Not a test (pytest does not collect it). Run from the repo root:

    .venv/bin/python bench/drift.py calibrate [--db PATH] [--before FILE]   # labelled fit / held-out tables
    .venv/bin/python bench/drift.py verdicts --out FILE [--code CHECKOUT]   # per-step verdicts of the labelled items
    .venv/bin/python bench/drift.py timing [--db PATH]                      # cold vs warm, chunks embedded

``calibrate`` reads ``bench/data/drift_labels.yaml`` (sessions of ten agents read and labelled by
hand: their new tasks and on-topic stretches; constructed off-topic pairs, one session's goal
against another project's replies; goals that are not goals) and prints, as JSON: the window
similarities of on-topic and off-topic steps per split, the band edges fitted on the ``fit`` split
and how they separate the ``test`` split, the new-task threshold's table on the labelled user
messages, the goal cases, and the confusion table (label x verdict) of ``ctxf drift`` as it now
runs. ``verdicts --code ../main`` writes the same items' verdicts under another checkout's code
(``--before`` then prints its confusion table beside this one's). Embeddings are cached in the
store (default a temporary one), so a rerun is fast.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

if "--code" in sys.argv:  # another checkout's package, ahead of this one (for `verdicts`)
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1]).resolve()))

import numpy as np  # noqa: E402

from _common import add_corpus_option  # noqa: E402  first: puts this checkout's package on sys.path

if "--code" in sys.argv:
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1]).resolve()))

from context_forensics.analysis.drift import drift_curve, goal_from_messages  # noqa: E402
from context_forensics.analysis.replay import prepare  # noqa: E402
from context_forensics.config.settings import Config  # noqa: E402
from context_forensics.embed import EmbedStats  # noqa: E402
from context_forensics.embed.embedders import get_embedder  # noqa: E402
from context_forensics.store.db import Store  # noqa: E402
from context_forensics.store.ingest import ingest_paths  # noqa: E402

LABELS = Path(__file__).parent / "data" / "drift_labels.yaml"
BANDS = ("FRESH", "MILD", "MODERATE", "SEVERE", "CRITICAL", "not judged")


def _labels() -> dict:
    import yaml

    return yaml.safe_load(LABELS.read_text())


def _sid(store: Store, corpus: Path, entry: dict, key: str = "file") -> str:
    """The stored session of a labelled entry (its file; ``opening``: the one whose first user text starts so)."""
    src = str(corpus / entry[key])
    rows = [r for r in store.sessions() if r["source"] == src]
    if entry.get("opening") and key == "file":
        rows = [r for r in rows if any(sm.message.role == "user" and sm.message.text.startswith(entry["opening"])
                                       for sm in store.messages(r["id"])[:3])]
    if len(rows) != 1:
        raise SystemExit(f"{LABELS}: {entry[key]}: {len(rows)} stored sessions match (expected 1)")
    return rows[0]["id"]


def _check(store: Store, sid: str, entry: dict) -> None:
    """Fail loudly when the labels no longer match the stored session (an importer changed)."""
    row = store.session(sid)
    if row["step_count"] != entry["steps"]:
        raise SystemExit(f"{LABELS}: {entry['file']}: {row['step_count']} steps stored, labelled {entry['steps']}")
    texts = {sm.seq: " ".join(sm.message.text.split()) for sm in store.messages(sid)}
    for t in entry.get("new_tasks") or []:
        if not texts.get(t["seq"], "").startswith(t["starts"]):
            raise SystemExit(f"{LABELS}: {entry['file']}: seq {t['seq']} starts {texts.get(t['seq'], '')[:40]!r}, "
                             f"labelled {t['starts']!r}")


def _items(store: Store, corpus: Path) -> list[dict]:
    """Every labelled item: a session (on-topic, its new tasks) or a cross pair (off-topic)."""
    lab = _labels()
    out = []
    for e in lab["sessions"]:
        sid = _sid(store, corpus, e)
        _check(store, sid, e)
        out.append({"key": e["file"] + (f" ({e['opening']})" if e.get("opening") else ""), "sid": sid,
                    "label": "on", "split": e["split"], "agent": e["agent"], "goal": None,
                    "new_tasks": [t["seq"] for t in e.get("new_tasks") or []], "goal_reason": e.get("goal")})
    for c in lab["cross"]:
        a, b = _sid(store, corpus, c, "goal_of"), _sid(store, corpus, c, "replies_of")
        g = goal_from_messages(store.messages(a))
        out.append({"key": f"{c['goal_of']} x {c['replies_of']}", "sid": b, "label": "off", "split": c["split"],
                    "agent": next(e["agent"] for e in lab["sessions"] if e["file"] == c["replies_of"]),
                    "goal": g.text, "new_tasks": None, "goal_reason": None})
    return out


def _store(db: Path, corpus: Path) -> Store:
    store = Store.open(db)
    ingest_paths(store, [corpus], recursive=True)
    return store


def verdicts(db: Path, corpus: Path) -> dict:
    """Per labelled item, the verdict of every step as ``ctxf drift`` gives it (the code imported)."""
    cfg, e = Config(), get_embedder()
    out = {}
    with _store(db, corpus) as store:
        for it in _items(store, corpus):
            prep = prepare(store, it["sid"], config=cfg, policy="recorded")
            rep = drift_curve(prep, None, e, store, it["goal"])
            out[it["key"]] = [s.verdict for s in rep.steps]
    return out


def _confusion(items: list[dict], verdicts_of: dict) -> dict:
    table: dict = {}
    for it in items:
        for v in verdicts_of.get(it["key"], []):
            row = table.setdefault(f"{it['label']} ({it['split']})", dict.fromkeys(BANDS, 0))
            row[v or "not judged"] += 1
    return table


def _fit(on: np.ndarray, off: np.ndarray) -> dict:
    """Band edges from the fit split: the MILD floor under 90% of on-topic windows, the SEVERE
    ceiling over 90% of off-topic ones, and the single cut that best balances the two error rates.
    When the floor is below the ceiling the two overlap and no pair of anchors meets both targets."""
    a, b = float(np.percentile(on, 10)), float(np.percentile(off, 90))
    grid = np.linspace(min(on.min(), off.min()), max(on.max(), off.max()), 400)
    bal = [np.mean(on >= t) + np.mean(off < t) for t in grid]
    t = float(grid[int(np.argmax(bal))])
    return {"mild_floor_p10_on": round(a, 3), "severe_ceiling_p90_off": round(b, 3), "overlap": a < b,
            "balanced_cut": round(t, 3), "balanced_accuracy": round(float(max(bal)) / 2, 3)}


def calibrate(db: Path, corpus: Path, before: Path | None) -> dict:
    from context_forensics.analysis.drift import score_from_similarity, verdict
    from context_forensics.analysis.drift.goal import request_goal
    from context_forensics.analysis.drift.segments import NEW_TASK_SIMILARITY

    cfg, e = Config(), get_embedder()
    dc = cfg.drift
    sims: dict = {}
    reqs: list[tuple[str, float, bool]] = []
    after: dict = {}
    with _store(db, corpus) as store:
        items = _items(store, corpus)
        for it in items:
            prep = prepare(store, it["sid"], config=cfg, policy="recorded")
            # the labelled segmentation: window similarities against the goal the labels say is in force
            lab = drift_curve(prep, None, e, store, it["goal"], new_tasks=it["new_tasks"])
            sims.setdefault((it["label"], it["split"]), []).extend(
                (it["agent"], s.similarity) for s in lab.steps if s.similarity is not None)
            reqs.extend((it["split"], r["similarity"], r["new_task"]) for r in lab.requests
                        if r["similarity"] is not None)
            rep = lab if it["goal"] else drift_curve(prep, None, e, store)
            after[it["key"]] = [s.verdict for s in rep.steps]
    fit_on = np.array([x for _, x in sims[("on", "fit")]])
    fit_off = np.array([x for _, x in sims[("off", "fit")]])

    def share(split: str, label: str, on: float, off: float) -> dict:
        xs = np.array([x for _, x in sims[(label, split)]])
        v = [verdict(score_from_similarity(x, on, off)) for x in xs]
        return {"windows": len(xs), **{b: round(v.count(b) / len(v), 3) for b in BANDS[:5]}}

    req_table = []
    for t in (0.15, 0.2, 0.25, 0.3, 0.35, NEW_TASK_SIMILARITY):
        row = {"threshold": t}
        for split in ("fit", "test"):
            rs = [(s, n) for sp, s, n in reqs if sp == split]
            row[split] = {"new_tasks": sum(n for _, n in rs), "found": sum(n and s < t for s, n in rs),
                          "follow_ups": sum(not n for _, n in rs), "split_wrongly": sum(not n and s < t for s, n in rs)}
        req_table.append(row)
    goal_cases = []
    for c in _labels()["goal_cases"]:
        g = request_goal(0, c["text"])
        goal_cases.append({"text": c["text"], "expected": c["reason"], "got": g.reason, "ok": g.reason == c["reason"]})
    out = {
        "embedding_model": e.name,
        "labels": str(LABELS.relative_to(LABELS.parents[2])),
        "window_similarity": {f"{lab} ({split})": _pcts([x for _, x in v]) for (lab, split), v in sorted(sims.items())},
        "by_agent_on_topic_p10": {a: round(float(np.percentile([x for ag, x in v if ag == a], 10)), 3)
                                  for (lab, _), v in sims.items() if lab == "on" for a in sorted({ag for ag, _ in v})},
        "fit": _fit(fit_on, fit_off),
        "config_anchors": {"on_topic_similarity": dc.on_topic_similarity, "off_topic_similarity": dc.off_topic_similarity},
        "bands_at_config_anchors": {f"{lab} ({split})": share(split, lab, dc.on_topic_similarity, dc.off_topic_similarity)
                                    for lab in ("on", "off") for split in ("fit", "test")},
        "new_task_threshold": {"config": NEW_TASK_SIMILARITY, "table": req_table},
        "goal_cases": goal_cases,
        "confusion_after": _confusion(items, after),
    }
    if before is not None:
        out["confusion_before"] = _confusion(items, json.loads(before.read_text()))
    return out


def _pcts(a: list[float]) -> dict:
    x = np.asarray(a, dtype=float)
    if not len(x):
        return {"n": 0}
    return {"n": int(len(x)), **{f"p{q}": round(float(np.percentile(x, q)), 3) for q in (5, 10, 25, 50, 75, 90, 95)}}


def timing(db: Path, corpus: Path) -> dict:
    """Cold (empty cache) and warm drift curves over the corpus' largest sessions."""
    cfg = Config()
    out = []
    with Store.open(db) as store:
        ingest_paths(store, [corpus], recursive=True)
        rows = sorted(store.sessions(), key=lambda r: -r["step_count"])[:4]
        for r in rows:
            prep = prepare(store, r["id"], config=cfg, policy="recorded")
            t_replay = time.perf_counter()
            prep.run()
            t_replay = time.perf_counter() - t_replay
            res = {"session": r["id"], "format": r["format"], "steps": r["step_count"], "replay_s": round(t_replay, 3)}
            for label in ("cold", "warm"):
                e = get_embedder()
                st = EmbedStats()
                t0 = time.perf_counter()
                rep = drift_curve(prep, None, e, store, stats=st)
                res[label] = {"seconds": round(time.perf_counter() - t0, 2), "chunks": rep.chunks,
                              "unique": st.unique, "encoded": st.encoded, "encode_s": round(st.encode_seconds, 2)}
            out.append(res)
    return {"sessions": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("calibrate", "verdicts", "timing"))
    ap.add_argument("--db", type=Path, help="store to use (default: a temporary one)")
    ap.add_argument("--before", type=Path, help="calibrate: verdicts another checkout wrote (`verdicts --out`)")
    ap.add_argument("--out", type=Path, help="verdicts: where to write them")
    ap.add_argument("--code", type=Path, help="verdicts: the checkout whose package to run (default: this one)")
    add_corpus_option(ap)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        db = args.db or Path(d) / "drift.db"
        if args.what == "calibrate":
            result = calibrate(db, args.corpus, args.before)
        elif args.what == "verdicts":
            result = verdicts(db, args.corpus)
            if args.out:
                args.out.write_text(json.dumps(result))
                result = {"items": len(result), "out": str(args.out)}
        else:
            result = timing(db, args.corpus)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
