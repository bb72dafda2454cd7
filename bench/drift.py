"""Drift: the labelled calibration behind the drift bands and the new-task threshold
(analysis/drift/verdicts.py, analysis/drift/segments.py), and the cost of a drift curve.

Not a test (pytest does not collect it). Run from the repo root:

    .venv/bin/python bench/drift.py calibrate [--db PATH] [--before FILE]   # labelled fit / held-out tables
    .venv/bin/python bench/drift.py verdicts --out FILE [--code CHECKOUT]   # per-step verdicts of the labelled items
    .venv/bin/python bench/drift.py timing [--db PATH]                      # cold vs warm, chunks embedded

``calibrate`` reads ``bench/data/drift_labels.yaml`` (sessions of twelve agents read and labelled
by hand: their new tasks and on-topic stretches; constructed off-topic pairs, one session's opening
and requests against another project's replies; goals that are not goals), runs ``ctxf drift`` on
every labelled item and prints, as JSON: each signal's distribution and AUC per label and split
(``signals``); the logistic model fitted on the ``fit`` split and the prior chosen by the rule of
analysis/drift/verdicts.py, with the table it was chosen from (``fitted``), beside the constants the
code uses (``constants``: they must agree); the bands and the session criterion of the default
``max_drift`` rule at the constants per split (``bands_of_the_constants``, ``sessions_after``); the
confusion table (label x verdict) as ``ctxf drift`` now runs (``confusion_after``); the new-task
threshold's table on the labelled requests and the detection's precision and recall as it runs; the
goal cases. ``verdicts --code ../main`` writes the same items' verdicts under another checkout's
code (``--before`` then prints its confusion and session tables beside this one's;
``bench/data/drift_verdicts_97c538e.json`` holds main's at 97c538e, the drift page's "before", docs/commands/drift.md).
Embeddings are cached in the store (default a temporary one), so a rerun is fast.
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
                    "goal": g.text, "goal_sid": a, "new_tasks": None, "goal_reason": None})
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


def _logistic(x: np.ndarray, y: np.ndarray, c: float = 1.0, iters: int = 50) -> tuple[np.ndarray, float]:
    """Weights and intercept of a logistic regression of ``y`` (0/1) on ``x`` by Newton's method: the two
    classes weigh the same (each window weighs n / (2 * n_class)), an L2 penalty ||w||^2 / (2c) on the
    weights (not the intercept) -- scikit-learn's LogisticRegression(class_weight="balanced", C=c)."""
    n, d = x.shape
    sw = np.where(y == 1, n / (2 * y.sum()), n / (2 * (n - y.sum())))
    a = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    pen = np.r_[np.full(d, 1.0 / c), 0.0]
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(a @ beta)))
        grad = a.T @ (sw * (p - y)) + pen * beta
        hess = (a * (sw * p * (1 - p))[:, None]).T @ a + np.diag(pen)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    return beta[:d], float(beta[d])


def _auc(on: np.ndarray, off: np.ndarray) -> float:
    """P(an on-topic window scores above an off-topic one), ties half."""
    if not len(on) or not len(off):
        return float("nan")
    allx = np.concatenate([on, off])
    ranks = np.argsort(np.argsort(allx, kind="mergesort"), kind="mergesort") + 1.0
    for v in np.unique(allx):  # average ranks of ties
        m = allx == v
        ranks[m] = ranks[m].mean()
    return float((ranks[:len(on)].sum() - len(on) * (len(on) + 1) / 2) / (len(on) * len(off)))


def _bands(p: np.ndarray) -> list[str]:
    from context_forensics.analysis.drift import score, verdict

    return [verdict(score(float(x))) for x in p]


def _shares(p: np.ndarray) -> dict:
    v = _bands(p)
    return {"windows": len(v), **{b: round(v.count(b) / len(v), 3) for b in BANDS[:5]}} if v else {"windows": 0}


def _requests_of(store: Store, sid: str, n_steps: int):
    """The person-typed requests of a session, each moved to the same relative step of a session of
    ``n_steps`` steps (a constructed pair: that user's requests, sent as the other session runs)."""
    from context_forensics.analysis.drift.segments import Request, requests

    prep = prepare(store, sid, config=Config(), policy="recorded")
    steps = [int(s) for s in prep.inp.steps]
    return [Request(r.seq, int(round(r.step * n_steps / max(len(steps), 1))), r.text, r.answers)
            for r in requests(prep.messages, steps)]


def calibrate(db: Path, corpus: Path, before: Path | None) -> dict:
    """The labelled calibration: every figure behind analysis/drift/verdicts.py (module docstring)."""
    from context_forensics.analysis.drift import SIGNALS, scaled_similarity, verdicts as V
    from context_forensics.analysis.drift.curve import session_goal
    from context_forensics.analysis.drift.goal import request_goal
    from context_forensics.analysis.drift.segments import NEW_TASK_SIMILARITY

    cfg, e = Config(), get_embedder()
    dc = cfg.drift
    rows: list[dict] = []  # one per scored window: label, split, agent, key, signals, verdict as it runs
    reqs: list[tuple[str, float, bool]] = []  # (split, similarity to the labelled goal in force, labelled new)
    detect: dict = {}  # split -> [labelled new, detected new] per request, as `ctxf drift` runs
    after: dict = {}
    opening_only: dict = {}  # off-topic pairs scored against the other session's opening alone (as before)
    with _store(db, corpus) as store:
        items = _items(store, corpus)
        for it in items:
            prep = prepare(store, it["sid"], config=cfg, policy="recorded")
            if it["label"] == "on":
                rep = drift_curve(prep, None, e, store)
                lab = drift_curve(prep, None, e, store, new_tasks=it["new_tasks"])
                reqs.extend((it["split"], r["similarity"], r["new_task"]) for r in lab.requests
                            if r["similarity"] is not None)
                new = set(it["new_tasks"])
                detect.setdefault(it["split"], []).extend((r["seq"] in new, r["new_task"]) for r in rep.requests)
            else:
                gprep = prepare(store, it["goal_sid"], config=cfg, policy="recorded")
                rep = drift_curve(prep, None, e, store, session_goal(gprep, store, e.name),
                                  requests_from=_requests_of(store, it["goal_sid"], len(prep.inp.steps)))
                opening_only[it["key"]] = [s.verdict for s in drift_curve(prep, None, e, store, it["goal"]).steps]
            after[it["key"]] = [s.verdict for s in rep.steps]
            rows.extend({"label": it["label"], "split": it["split"], "agent": it["agent"], "key": it["key"],
                         "signals": s.signals, "verdict": s.verdict} for s in rep.steps if s.signals is not None)

    def x_of(rs: list[dict]) -> np.ndarray:
        return np.array([[scaled_similarity(r["signals"]["similarity"], dc.on_topic_similarity,
                                            dc.off_topic_similarity) if k == "similarity" else r["signals"][k]
                          for k in SIGNALS] for r in rs]).reshape(-1, len(SIGNALS))

    part = {(lab, sp): [r for r in rows if (r["label"], r["split"]) == (lab, sp)]
            for lab in ("on", "off") for sp in ("fit", "test")}
    fit = part[("on", "fit")] + part[("off", "fit")]
    w, b = _logistic(x_of(fit), np.array([r["label"] == "on" for r in fit], dtype=float))

    def prob(rs: list[dict], prior: float, weights=w, intercept=b) -> np.ndarray:
        z = x_of(rs) @ np.asarray(weights) + intercept + np.log(prior / (1 - prior))
        return 1 / (1 + np.exp(-z))

    prior_table, chosen = [], None
    for prior in (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95):
        on_ok = np.mean([v in ("FRESH", "MILD") for v in _bands(prob(part[("on", "fit")], prior))])
        off_ok = np.mean([v in ("SEVERE", "CRITICAL") for v in _bands(prob(part[("off", "fit")], prior))])
        reach = _reach(fit, prob(fit, prior))
        prior_table.append({"prior": prior, "on_fresh_mild": round(float(on_ok), 3),
                            "off_severe_critical": round(float(off_ok), 3),
                            "on_sessions_reaching_severe": reach["on (fit)"]["reach_severe"],
                            "off_sessions_reaching_severe": reach["off (fit)"]["reach_severe"]})
        # the rule (verdicts.py): fewest on-topic fit sessions reaching SEVERE while every off-topic fit
        # pair still does and >= 80% of off-topic fit windows are SEVERE/CRITICAL; then most on-topic FRESH/MILD
        rank = (reach["on (fit)"]["reach_severe"], -on_ok)
        if off_ok >= 0.8 and reach["off (fit)"]["reach_severe"] == reach["off (fit)"]["sessions"] and (
                chosen is None or rank < chosen[1]):
            chosen = (prior, rank)
    const_w = [V.WEIGHTS[k] for k in SIGNALS]
    signal_table = {}
    for i, k in enumerate(SIGNALS):  # as the step JSON reports them (similarity unscaled)
        signal_table[k] = {f"{lab} ({sp})": _pcts([r["signals"][k] for r in part[(lab, sp)]]) for lab in ("on", "off")
                           for sp in ("fit", "test")}
        signal_table[k]["auc"] = {sp: round(_auc(x_of(part[("on", sp)])[:, i], x_of(part[("off", sp)])[:, i]), 3)
                                  for sp in ("fit", "test")}
    req_table = []
    for t in (0.15, 0.2, 0.25, 0.3, 0.35):
        row = {"threshold": t}
        for split in ("fit", "test"):
            rs = [(s, n) for sp, s, n in reqs if sp == split]
            row[split] = {"new_tasks": sum(n for _, n in rs), "found": sum(n and s < t for s, n in rs),
                          "follow_ups": sum(not n for _, n in rs), "split_wrongly": sum(not n and s < t for s, n in rs)}
        req_table.append(row)
    detection = {}
    for split, pairs in sorted(detect.items()):
        tp = sum(a and d for a, d in pairs)
        fp = sum(d and not a for a, d in pairs)
        fn = sum(a and not d for a, d in pairs)
        detection[split] = {"requests": len(pairs), "labelled_new": tp + fn, "detected": tp + fp, "right": tp,
                            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
                            "recall": round(tp / (tp + fn), 3) if tp + fn else None}
    goal_cases = []
    for c in _labels()["goal_cases"]:
        g = request_goal(0, c["text"])
        goal_cases.append({"text": c["text"], "expected": c["reason"], "got": g.reason, "ok": g.reason == c["reason"]})
    out = {
        "embedding_model": e.name,
        "labels": str(LABELS.relative_to(LABELS.parents[2])),
        "windows": {f"{lab} ({sp})": len(v) for (lab, sp), v in part.items()},
        "signals": signal_table,
        "fitted": {"weights": dict(zip(SIGNALS, np.round(w, 2).tolist())), "intercept": round(b, 2),
                   "prior_chosen": chosen[0] if chosen else None, "prior_table": prior_table,
                   "on_topic_median": {k: round(float(np.median(x_of(part[("on", "fit")])[:, i])), 2)
                                       for i, k in enumerate(SIGNALS)}},
        "constants": {"weights": dict(V.WEIGHTS), "intercept": V.INTERCEPT, "prior": V.PRIOR,
                      "on_topic_median": dict(V.ON_TOPIC_MEDIAN)},
        "constants_agree": (dict(zip(SIGNALS, np.round(w, 2).tolist())) == dict(V.WEIGHTS)
                            and round(b, 2) == V.INTERCEPT and chosen is not None and chosen[0] == V.PRIOR),
        "sessions_fitted": _reach(rows, prob(rows, chosen[0] if chosen else V.PRIOR)),
        "bands_fitted": {f"{lab} ({sp})": _shares(prob(part[(lab, sp)], chosen[0] if chosen else V.PRIOR))
                         for lab in ("on", "off") for sp in ("fit", "test")},
        "auc_of_the_constants": {sp: round(_auc(prob(part[("on", sp)], V.PRIOR, const_w, V.INTERCEPT),
                                                prob(part[("off", sp)], V.PRIOR, const_w, V.INTERCEPT)), 3)
                                 for sp in ("fit", "test")},
        "bands_of_the_constants": {f"{lab} ({sp})": _shares(prob(part[(lab, sp)], V.PRIOR, const_w, V.INTERCEPT))
                                   for lab in ("on", "off") for sp in ("fit", "test")},
        "new_task_threshold": {"config": NEW_TASK_SIMILARITY, "table": req_table, "detection_as_it_runs": detection},
        "goal_cases": goal_cases,
        "confusion_after": _confusion(items, after),
        "sessions_after": _sessions(items, after),
        "off_topic_opening_only_after": {"confusion": _confusion([i for i in items if i["label"] == "off"],
                                                                 opening_only),
                                         "sessions": _sessions([i for i in items if i["label"] == "off"],
                                                               opening_only)},
    }
    if before is not None:
        old = json.loads(before.read_text())
        out["confusion_before"] = _confusion(items, old)
        out["sessions_before"] = _sessions(items, old)
    return out


def _reach(rows: list[dict], p: np.ndarray) -> dict:
    """Per label and split: labelled sessions whose windows reach SEVERE or worse at probabilities ``p``."""
    from context_forensics.analysis.drift import at_or_worse

    worst: dict = {}
    for r, v in zip(rows, _bands(p)):
        k = (f"{r['label']} ({r['split']})", r["key"])
        worst[k] = worst.get(k, False) or at_or_worse(v, "SEVERE")
    out: dict = {}
    for (group, key), bad in sorted(worst.items()):
        row = out.setdefault(group, {"sessions": 0, "reach_severe": 0})
        row["sessions"] += 1
        row["reach_severe"] += bad
    return out


def _sessions(items: list[dict], verdicts_of: dict) -> dict:
    """The good-session criterion of the default `max_drift` rule (SEVERE): per label and split, how
    many labelled sessions reach SEVERE or worse at some step (on-topic ones that would fail the
    build, listed; off-topic ones that would be caught), how many reach MODERATE (`max_drift:
    MODERATE`), and how many have no verdict at all."""
    from context_forensics.analysis.drift import at_or_worse

    out: dict = {}
    for it in items:
        vs = verdicts_of.get(it["key"], [])
        row = out.setdefault(f"{it['label']} ({it['split']})", {"sessions": 0, "reach_severe": 0, "reach_moderate": 0,
                                                                "not_judged": 0, "reaching": []})
        row["sessions"] += 1
        if not any(v is not None for v in vs):
            row["not_judged"] += 1
            continue
        row["reach_moderate"] += any(at_or_worse(v, "MODERATE") for v in vs)
        if any(at_or_worse(v, "SEVERE") for v in vs):
            row["reach_severe"] += 1
            row["reaching"].append(it["key"])
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
