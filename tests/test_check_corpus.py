"""``ctxf check`` over every session of the shared corpus: each inconsistency it finds is fixed or
listed, with its reason, in the reviewed ``tests/check/corpus_known.yaml``, and every entry there
is still found (a fixed one leaves the file). Skipped when the corpus is absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from context_forensics.analysis.check.replay_checks import NO_FINAL_WINDOW, NO_USAGE
from context_forensics.analysis.check.totals_check import NO_TOTALS
from helpers import CORPUS, cli

pytestmark = pytest.mark.integration

KNOWN = Path(__file__).parent / "check" / "corpus_known.yaml"


def _known() -> dict[tuple[str, str], dict]:
    out = {}
    for e in yaml.safe_load(KNOWN.read_text()):
        assert set(e) >= {"session", "check", "reason"} and ("steps" in e or "seqs" in e), e
        assert len(e["reason"].split()) >= 12, f"say why: {e}"
        out[(e["session"], e["check"])] = e
    return out


def test_every_inconsistency_on_the_corpus_is_fixed_or_explained(corpus_ingest, monkeypatch):
    db, r = corpus_ingest
    assert r.exit_code == 0, r.stderr
    res = cli(monkeypatch, "check", "--db", db, "--json")
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["totals"]["sessions"] == len(data["sessions"]) > 150
    found: dict[tuple[str, str], dict] = {}
    for s in data["sessions"]:
        # every check ran where it can: a log with calls skips only a check whose record it lacks (its usage:
        # test_check_totals asserts those logs record none; totals and a final window the log does not record)
        assert s["session"]["step_count"] == 0 or set(s["skipped"].values()) <= {NO_USAGE, NO_TOTALS,
                                                                                 NO_FINAL_WINDOW}, \
            s["skipped"]
        src = Path(s["session"]["source"]).resolve().relative_to(CORPUS.resolve()).as_posix()
        for f in s["inconsistencies"]:
            g = found.setdefault((src, f["check"]), {"steps": [], "seqs": [], "calls": s["session"]["step_count"]})
            (g["steps"] if f["step"] is not None else g["seqs"]).append(f["step"]
                                                                        if f["step"] is not None else f["seq"])
    known = _known()
    unexplained = sorted(set(found) - set(known))
    assert not unexplained, f"inconsistencies no entry of {KNOWN.name} explains: " + "; ".join(
        f"{k}: {found[k]}" for k in unexplained)
    gone = sorted(set(known) - set(found))
    assert not gone, f"entries of {KNOWN.name} the check no longer finds (fixed? take them out): {gone}"
    for key, e in known.items():
        got = found[key]
        if "seqs" in e:
            assert got["seqs"] == e["seqs"], (key, got)
        elif e["steps"] == "all":  # every model call of the session
            assert got["steps"] == list(range(1, got["calls"] + 1)) and not got["seqs"], (key, got)
        else:
            assert got["steps"] == e["steps"], (key, got)
