"""Parallel ingest: the two halves of ``ingest_unit`` (``parse_unit`` on a worker, ``write_parsed``
on the one writer) store what ``ingest_unit`` stores; ``ctxf ingest --executor`` reads on an
executor's workers and reports what the serial ingest reports."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from context_forensics.store.db import Store
from context_forensics.store.ingest import expand, ingest_unit, known_result, parse_unit, write_parsed

ROOT = Path(__file__).resolve().parent.parent
TREES = [ROOT / "tests" / "fixtures", ROOT / "sample_logs"]
CORPUS = ROOT.parent / "shared" / "corpus"

# Columns that say when a row was written, not what it holds.
CLOCK = {"ingested_at"}


def rows(store: Store) -> dict[str, list[tuple]]:
    out = {}
    for table in ("sessions", "messages", "files"):
        cols = [r[1] for r in store.db.execute(f"PRAGMA table_info({table})") if r[1] not in CLOCK]
        out[table] = sorted((tuple(r) for r in store.db.execute(f"SELECT {', '.join(cols)} FROM {table}")), key=repr)
    return out


def _units(tree: Path):
    units, _ = expand([tree], fmt=None, recursive=True)
    return units


@pytest.mark.parametrize("tree", [*TREES, CORPUS], ids=lambda p: p.name)
def test_the_two_halves_store_what_ingest_unit_stores(tree, tmp_path):
    if not tree.exists():
        pytest.skip(f"{tree} is not here")
    units = [u for u in _units(tree) if not u.stream]
    assert units
    with Store.open(tmp_path / "a.db") as a, Store.open(tmp_path / "b.db") as b:
        for unit in units:
            one = ingest_unit(a, unit)
            # What a worker hands the driver crosses a process boundary: pickled both ways.
            parsed = pickle.loads(pickle.dumps(parse_unit(unit)))
            two = write_parsed(b, parsed, unit=unit)
            assert two.to_dict() == one.to_dict(), unit.path
        ra, rb = rows(a), rows(b)
    assert ra == rb
    assert ra["sessions"] and ra["messages"]
    print(f"{tree.name}: {len(units)} units, {len(ra['sessions'])} sessions, {len(ra['messages'])} messages equal")


def test_a_known_unit_is_known_before_it_is_read(tmp_path):
    units = [u for u in _units(ROOT / "sample_logs") if u.importer is not None][:3]
    with Store.open(tmp_path / "a.db") as a:
        for u in units:
            before, key = known_result(a, u)
            assert before is None and key is not None
            ingest_unit(a, u)
            after, key2 = known_result(a, u)
            assert key2 == key
            assert after is not None and after.status == "unchanged"
            assert after.to_dict() == ingest_unit(a, u).to_dict()
        # --force, --task, --outcome read a known unit again
        assert known_result(a, units[0], force=True)[0] is None
        assert known_result(a, units[0], task="t")[0] is None


def test_a_unit_that_cannot_be_read_fails_in_the_parse_and_the_write_says_so(tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text("{not json\n" * 3)
    units, _ = expand([bad], fmt="openai_chat", recursive=False)
    parsed = parse_unit(units[0])
    assert parsed.failed is not None and parsed.failed.status == "failed" and not parsed.sessions
    with Store.open(tmp_path / "a.db") as a, Store.open(tmp_path / "b.db") as b:
        res = write_parsed(a, pickle.loads(pickle.dumps(parsed)))
        assert res.to_dict() == ingest_unit(b, units[0]).to_dict()
        assert res.status == "failed" and res.error


def test_a_refused_value_is_read_again_carefully_here_or_fails_saying_why(tmp_path):
    # A file name that is not UTF-8 reaches the store as lone surrogates: refused, read again carefully.
    log = tmp_path / os.fsdecode(b"caf\xe9.jsonl")
    log.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "ok"}\n')
    units, _ = expand([log], fmt=None, recursive=False)
    with Store.open(tmp_path / "a.db") as a, Store.open(tmp_path / "b.db") as b:
        one = ingest_unit(a, units[0])
        parsed = parse_unit(units[0])
        assert not parsed.careful  # reading it is fine; storing it is not
        two = write_parsed(b, parsed)  # no unit given: parsed.path is read again, carefully
        assert two.to_dict() == one.to_dict()
        assert one.status == "ingested" and any("lone UTF-16 surrogate" in w for w in one.warnings)
        assert rows(a) == rows(b)
    log.unlink()  # a file read on a worker, not readable by the driver
    with Store.open(tmp_path / "c.db") as c:
        gone = write_parsed(c, parsed)
        assert gone.status == "failed" and "careful mode" in (gone.error or "") and gone.exit_code == 1
        assert c.db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0  # rolled back
