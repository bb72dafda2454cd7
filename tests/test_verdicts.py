"""Verdicts read against the logs: for one long session of each agent in the corpus, what ctxf
says and what the log shows, as verified by a person reading both (``tests/verdicts/*.yaml``).

Each file names a corpus session (its path relative to ../shared/corpus) and a list of verdicts:
``command`` (replay, window, facts, drift, explain, check, diverge) with its ``args``, what ctxf says
(``ctxf``), what the log shows and where (``log``), and ``expect``: assertions on the command's
``--json`` (a dotted ``path`` into it, with ``[i]`` for list items and ``[-1]`` for the last; one of
``equals``, ``in``, ``contains``, ``at_least``, ``at_most``, ``length``, ``is_null``). A verdict
ctxf cannot know says so in the file, and its assertion is on that wording (``contains``).
``diverge`` compares the session (the failed run, B) with ``args.against``, the corpus path of a
good run of the same task (A): ``ctxf.diverge(good, session)``.
Skipped when the corpus is absent.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import CORPUS

pytestmark = pytest.mark.integration

HERE = Path(__file__).parent / "verdicts"
FILES = sorted(HERE.glob("*.yaml"))
COMMANDS = ("replay", "window", "facts", "drift", "explain", "check", "diverge")
OPS = ("equals", "in", "contains", "at_least", "at_most", "length", "is_null")


def _cases() -> list[Any]:
    out = []
    for f in FILES:
        doc = yaml.safe_load(f.read_text())
        for i, v in enumerate(doc["verdicts"]):
            out.append(pytest.param(f, doc, v, id=f"{f.stem}-{i}-{v['command']}"))
    return out


def test_every_verdict_file_is_well_formed():
    assert FILES, "tests/verdicts/ holds one file per agent"
    for f in FILES:
        doc = yaml.safe_load(f.read_text())
        assert set(doc) >= {"agent", "session", "verified", "verdicts"}, f
        assert doc["verdicts"], f
        for v in doc["verdicts"]:
            assert v["command"] in COMMANDS, (f, v)
            assert v.get("ctxf") and v.get("log"), f"{f}: say what ctxf says and what the log shows"
            assert v.get("expect"), f"{f}: {v['ctxf']!r} asserts nothing"
            for e in v["expect"]:
                assert "path" in e and len(set(e) & set(OPS)) == 1, (f, e)


_STEP = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]")


def dig(data: Any, path: str) -> Any:
    """The value at a dotted path (``replays[0].summary.compactions``) of a JSON document."""
    cur = data
    for name, index in _STEP.findall(path):
        if name:
            cur = cur[name]
        else:
            cur = cur[int(index)]
    return cur


def _run(command: str, ref: str, args: dict[str, Any], db: str) -> dict[str, Any]:
    import context_forensics as ctxf

    a = dict(args or {})
    if command == "replay":
        return ctxf.replay(ref, db=db, **a).to_dict()
    if command == "window":
        return ctxf.window(ref, a.pop("at"), db=db, **a).to_dict()
    if command == "facts":
        return ctxf.facts(ref, a.pop("facts"), db=db, **a).to_dict()
    if command == "drift":
        return ctxf.drift(ref, db=db, **a).to_dict()
    if command == "explain":
        return ctxf.explain(ref, db=db, **a).to_dict()
    if command == "diverge":
        return ctxf.diverge(str(CORPUS / a.pop("against")), ref, db=db, **a).to_dict()
    return ctxf.check(ref, db=db, **a).to_dict()


def _holds(value: Any, e: dict[str, Any]) -> bool:
    if "equals" in e:
        return value == e["equals"]
    if "in" in e:
        return value in e["in"]
    if "contains" in e:
        return e["contains"] in (value if isinstance(value, (str, list)) else str(value))
    if "at_least" in e:
        return value >= e["at_least"]
    if "at_most" in e:
        return value <= e["at_most"]
    if "length" in e:
        return len(value) == e["length"]
    return value is None


@pytest.fixture(scope="module")
def store(corpus_ingest):
    db, r = corpus_ingest
    assert r.exit_code == 0, r.stderr
    return db


@pytest.mark.parametrize(("path", "doc", "verdict"), _cases())
def test_ctxf_says_what_the_log_shows(store, path, doc, verdict):
    src = CORPUS / doc["session"]
    against = (verdict.get("args") or {}).get("against")
    for f in (src, *([CORPUS / against] if against else [])):
        if not f.exists():
            pytest.skip(f"corpus file not available: {f}")
    data = _run(verdict["command"], str(src), verdict.get("args") or {}, store)
    for e in verdict["expect"]:
        value = dig(data, e["path"])
        assert _holds(value, e), f"{path.name}: {verdict['ctxf']!r}: {e['path']} is {value!r}, expected {e}"
