"""Every file and folder unit, as `ctxf ingest` sees them, through every importer's sniffer
(issue 32): each unit ctxf reads has exactly one claimant by the detection rule
(``importers.claimants``: the sniffers that accept it, a fallback only when no other does) and
it is the importer ingest uses; a file ingest leaves alone has none.

"Left alone" is what no registered importer claims, not a list: when an importer for a format
arrives (the fourth-wave formats of the corpus), its files become units and must then have that
one claimant. The per-format sniff tests (test_import_*.py ``test_sniff*``) check each format's
own files and shapes; this one checks them against each other, over every file at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from context_forensics import importers
from context_forensics.store.ingest import expand
from helpers import CORPUS, FIXTURES, SAMPLES

TREES = {"corpus": CORPUS, "sample_logs": SAMPLES, "fixtures": FIXTURES}


def _names(imps) -> list[str]:
    return [imp.name for imp in imps]


@pytest.fixture(scope="module", params=sorted(TREES))
def walked(request):
    root = TREES[request.param]
    if not root.exists():
        pytest.skip(f"{root} not available")
    units, ignored = expand([root], fmt=None, recursive=True)
    return root, units, [Path(p) for p in ignored]


def test_every_unit_ingest_reads_has_exactly_one_claimant_and_it_is_the_one_used(walked):
    root, units, _ = walked
    read = [u for u in units if u.importer is not None and u.problem is None]
    assert len(read) > 4
    wrong = {}
    for u in read:
        claims = _names(importers.claimants(u.path))
        if claims != [u.importer.name]:
            wrong[u.path.relative_to(root).as_posix()] = (u.importer.name, claims)
    assert wrong == {}


def test_no_importer_claims_a_file_ingest_leaves_alone(walked):
    root, _, ignored = walked
    claimed = {p.relative_to(root).as_posix(): _names(importers.claimants(p)) for p in ignored}
    assert {p: c for p, c in claimed.items() if c} == {}


def test_the_corpus_walk_reads_and_leaves_alone_every_file():
    # nothing falls between: each corpus file is a unit, inside a folder unit, a sidecar or
    # companion of one, or left alone (counted)
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    units, ignored = expand([CORPUS], fmt=None, recursive=True)
    covered = {Path(p).resolve() for p in ignored}
    for u in units:
        covered |= {u.path.resolve()} | ({f.resolve() for f in u.path.rglob("*")} if u.path.is_dir() else set())
        covered |= {p.resolve() for p in u.importer.sidecars(u.path)} if u.importer else set()
    files = {p.resolve() for p in CORPUS.rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert sorted(str(p) for p in files - covered) == []


def test_fallbacks_come_last_so_detection_follows_the_rule():
    reg = importers.registry()
    fallbacks = [imp for imp in reg.values() if imp.fallback]
    assert _names(fallbacks) == ["generic_json", "sqlite_table"]
    assert min(f.priority for f in fallbacks) > max(i.priority for i in reg.values() if not i.fallback)
    assert all(80 <= f.priority < 100 for f in fallbacks)


def test_a_fallback_claims_a_file_only_when_no_specific_importer_does(tmp_path):
    chat = tmp_path / "chat.json"  # OpenAI messages: generic_json's sniff accepts it too
    chat.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}')
    assert _names(importers.claimants(chat)) == ["openai_chat"] == [importers.detect(chat).name]
    turns = tmp_path / "turns.json"  # only the fallback reads a flat list with token counts
    turns.write_text('[{"role": "user", "content": "hi", "token_count": 1}]')
    assert _names(importers.claimants(turns)) == [importers.detect(turns).name] == ["generic_json"]
