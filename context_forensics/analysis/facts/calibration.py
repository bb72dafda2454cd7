"""Calibration: precision and recall of the presence rule per threshold, on labelled pairs.

``ctxf calibrate --pairs FILE`` reads (fact, text, present[, subset]) pairs (``load_pairs``:
CSV/TSV, JSONL, JSON or YAML), scores each pair with ``presence.score_presence``, the rule
``ctxf facts`` applies, and recommends the threshold with the best F1 (``calibrate``).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...embed import EmbedStats
from ...errors import InputError, UsageError
from .presence import FACTS_VERSION, SPAN_FLOOR, SPAN_OVERLAP, score_presence
from .sources import clean_fact

if TYPE_CHECKING:  # pragma: no cover
    from ...embed import Embedder
    from ...store.db import Store


@dataclass(frozen=True)
class Pair:
    """One labelled pair: does ``text`` state ``fact``?"""

    fact: str
    text: str
    present: bool
    subset: str = ""  # a label to report separately (``negation``, ``compound``, ...)


_YES = {"yes", "y", "true", "1", "present", "t"}
_NO = {"no", "n", "false", "0", "absent", "f"}


def _truth(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    s = str(value).strip().lower()
    if s in _YES:
        return True
    if s in _NO:
        return False
    raise InputError(f"`present` must be yes/no (or true/false, 1/0), got {value!r}", where=where)


def _pair(row: Any, where: str) -> Pair:
    if not isinstance(row, dict):
        raise InputError("each pair must be a mapping with fact, text, present", where=where)
    missing = [k for k in ("fact", "text", "present") if k not in row or row[k] is None]
    if missing:
        raise InputError(f"missing {', '.join(missing)}", where=where, hint="each pair needs fact, text, present")
    subset = row.get("subset")
    return Pair(clean_fact(row["fact"], where), str(row["text"]), _truth(row["present"], where),
                "" if subset is None else str(subset).strip())


def load_pairs(path: str | Path) -> list[Pair]:
    """Labelled pairs from CSV/TSV (a header with fact, text, present), JSONL, JSON or YAML."""
    import yaml

    from ...config.strict_yaml import load_strict

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the pairs file: {e}", where=str(p)) from None
    suffix = p.suffix.lower()
    rows: list[tuple[Any, str]] = []
    if suffix in (".csv", ".tsv"):
        reader = csv.DictReader(io.StringIO(text), delimiter="\t" if suffix == ".tsv" else ",")
        fields = {f.strip().lower() for f in reader.fieldnames or []}
        if not {"fact", "text", "present"} <= fields:
            raise InputError(f"the header must name fact, text, present; got {sorted(fields)}", where=f"{p}:1")
        for n, row in enumerate(reader, start=2):
            rows.append(({(k or "").strip().lower(): v for k, v in row.items()}, f"{p}:{n}"))
    elif suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((json.loads(line), f"{p}:{n}"))
                except ValueError as e:
                    raise InputError(f"invalid JSON: {e}", where=f"{p}:{n}") from None
    elif suffix in (".json", ".yaml", ".yml"):
        try:
            data = load_strict(text)  # JSON is YAML
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            loc = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark else str(p)
            raise InputError(f"invalid YAML/JSON: {getattr(e, 'problem', None) or e}", where=loc) from None
        if isinstance(data, dict) and set(data) == {"pairs"}:
            data = data["pairs"]
        if not isinstance(data, list):
            raise InputError("expected a list of pairs (or `pairs: [...]`)", where=str(p))
        rows = [(r, f"{p}: pairs[{i}]") for i, r in enumerate(data)]
    else:
        raise UsageError(f"cannot read pairs from {p.name!r}", hint="use .csv, .tsv, .jsonl, .json or .yaml")
    pairs = [_pair(r, w) for r, w in rows]
    if not pairs:
        raise InputError("the pairs file holds no pairs", where=str(p))
    return pairs


def calibration_thresholds() -> list[float]:
    """The thresholds of the calibration table."""
    return [round(0.30 + 0.05 * i, 2) for i in range(14)]  # 0.30 .. 0.95


# Subsets of a pairs file (its optional ``subset`` column) are reported at these thresholds and
# the config's current one: 0.6 is the default, 0.75 a stricter setting users try.
SUBSET_THRESHOLDS = (0.6, 0.75)


def _metrics(score: np.ndarray, truth: np.ndarray, th: float) -> dict[str, Any]:
    pred = score >= th
    tp = int(np.sum(pred & truth))
    fp = int(np.sum(pred & ~truth))
    fn = int(np.sum(~pred & truth))
    tn = int(np.sum(~pred & ~truth))
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"threshold": th, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": round(prec, 4), "recall": round(rec, 4), "f1": round(f1, 4)}


def calibrate(pairs: Sequence[Pair], embedder: Embedder, store: Store | None = None, *,
              thresholds: Sequence[float] | None = None, current: float | None = None,
              cache_enabled: bool = True, stats: EmbedStats | None = None) -> dict[str, Any]:
    """Precision/recall of the presence rule per threshold on labelled pairs, and a recommendation.

    Each pair is scored by ``score_presence``, the rule ``ctxf facts`` applies: the best cosine
    over the text's chunks and their sub-sentence spans among those that pass the lexical, the
    polarity and the statement checks (a pair with none is absent at every threshold; a text
    holding the fact verbatim is present at every one); only each pair's own
    (fact, text) is judged, never the cross product. The recommendation is the threshold with
    the best F1; among ties, the middle one of the tied run (most margin). Pairs carrying a
    ``subset`` are also reported per subset at ``SUBSET_THRESHOLDS`` and ``current``.
    """
    thresholds = list(thresholds or calibration_thresholds())
    facts = list(dict.fromkeys(p.fact for p in pairs))
    texts = list(dict.fromkeys(p.text for p in pairs))
    stats = stats if stats is not None else EmbedStats()
    fi = {f: i for i, f in enumerate(facts)}
    ti = {t: i for i, t in enumerate(texts)}
    mask = np.zeros((len(facts), len(texts)), dtype=bool)
    for p in pairs:
        mask[fi[p.fact], ti[p.text]] = True
    # every candidate of a pair is checked (threshold -inf): the score a pair would reach at any
    # threshold of the table
    pres = score_presence(facts, texts, embedder, store, threshold=-np.inf, mask=mask, all_spans=True,
                          cache_enabled=cache_enabled, stats=stats)
    scored = []
    for p in pairs:
        f, t = fi[p.fact], ti[p.text]
        best = float(pres.score[f, t])
        ok = bool(np.isfinite(best))
        cos = float(pres.cosine[f, t]) if pres.cosine is not None else -np.inf
        nm = None if ok else pres.near[f].get(t)
        conflict = None if ok else pres.conflicts[f].get(t)
        drop = None if ok else pres.dropped[f].get(t)
        missing = nm[2] if nm else []
        matched = pres.matched_text(f, t) if ok else (pres.matched_text(f, t, near=True) if nm else None)
        scored.append({"fact": p.fact, "text": p.text, "present": p.present, "subset": p.subset,
                       "score": round(best, 4) if ok else None,
                       "cosine": round(cos, 4) if np.isfinite(cos) else None,
                       "verbatim": (f, t) in pres.verbatim,
                       "lexical_ok": not missing, "missing": missing,
                       "polarity_ok": conflict is None,
                       "polarity": conflict.to_dict() if conflict is not None else None,
                       "clauses_ok": drop is None,
                       "dropped": drop.to_dict() if drop is not None else None,
                       "span": matched})
    truth = np.array([p.present for p in pairs], dtype=bool)
    # a verbatim occurrence holds the fact at every threshold (its score is still its cosine)
    score = np.array([np.inf if s["verbatim"] else s["score"] if s["score"] is not None else -np.inf
                      for s in scored], dtype=np.float64)
    table = [_metrics(score, truth, th) for th in thresholds]
    best_f1 = max(r["f1"] for r in table)
    tied = [i for i, r in enumerate(table) if r["f1"] == best_f1]
    # the longest consecutive run of tied thresholds, then its middle
    runs: list[list[int]] = []
    for i in tied:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    run = max(runs, key=len)
    rec_row = table[run[(len(run) - 1) // 2]]
    at = list(SUBSET_THRESHOLDS)
    if current is not None and all(abs(current - x) > 1e-9 for x in at):
        at.append(current)
    subsets = []
    names = list(dict.fromkeys(p.subset for p in pairs))
    if names != [""]:
        for name in names:
            sel = np.array([p.subset == name for p in pairs], dtype=bool)
            subsets.append({"subset": name or "base", "pairs": int(sel.sum()), "positives": int(truth[sel].sum()),
                            "at": [_metrics(score[sel], truth[sel], th) for th in at]})
        subsets.append({"subset": "all", "pairs": len(pairs), "positives": int(truth.sum()),
                        "at": [_metrics(score, truth, th) for th in at]})
    return {
        "version": FACTS_VERSION,
        "embedding": {"model": embedder.name, "revision": str(embedder.revision)},
        "pairs": len(pairs),
        "positives": int(truth.sum()),
        "lexical_failures": int(sum(1 for s in scored if not s["lexical_ok"])),
        "polarity_failures": int(sum(1 for s in scored if not s["polarity_ok"])),
        "clause_failures": int(sum(1 for s in scored if not s["clauses_ok"])),
        "verbatim": int(sum(1 for s in scored if s["verbatim"])),
        "spans": {"pairs_split": pres.spans_scored, "span_texts": pres.span_texts,
                  "floor": SPAN_FLOOR, "overlap": SPAN_OVERLAP},
        "table": table,
        "recommended": rec_row,
        "current": _metrics(score, truth, current) if current is not None else None,
        "subsets": subsets,
        "scores": scored,
    }
