"""``ctxf check``'s ``edits`` on Aider: the SEARCH/REPLACE blocks a reply proposes against those
Aider applied. A block Aider reports it could not match (``SearchReplaceNoExactMatch``, in the LLM
history as the next call's last user message, after the messages Aider rebuilds) is no edit the
analyses see, and the check's own count calls it failed."""

from __future__ import annotations

from context_forensics.analysis.check import check_session
from context_forensics.analysis.diverge import edit_consistency
from context_forensics.analysis.diverge.applied import effective_edits
from context_forensics.analysis.diverge.events import extract_events
from context_forensics.store.db import Store
from helpers import FIXTURES, cli, corpus

# imitates Aider 0.82's .aider.llm.history (the corpus's Simple-Calulator call 8 and its feedback at
# call 9): a reply of two blocks, the second of which failed to match
FAILED = FIXTURES / "aider" / "llm-failed-block.history"


def _edited(db, sid):
    with Store.open(db) as st:
        s = st.session(sid)
        rev = extract_events(st.messages(sid), s["format"], sid, s["metadata"] or {})
        return [(a.event.step, x.path, (x.new or "").strip()) for a in effective_edits(rev) for x in a.edits]


def _ingest(monkeypatch, path, db):
    r = cli(monkeypatch, "ingest", str(path), "--db", db, "--json")
    assert r.exit_code == 0, r.stderr
    with Store.open(db) as st:
        (s,) = [s for s in st.sessions() if s["source"].endswith(path.name)]
    return s["id"]


def test_a_block_aider_could_not_match_is_no_edit_and_the_check_agrees(tmp_path, monkeypatch):
    """Before: the analyses saw util.py's failed block as an edit (its action was paired with "I
    updated the files.", which hid Aider's verdict), and the check counted both blocks applied."""
    db = str(tmp_path / "s.db")
    sid = _ingest(monkeypatch, FAILED, db)
    edited = _edited(db, sid)
    assert (1, "app.py", 'print("v2")') in edited
    assert (1, "util.py", "X = 2") not in edited and (2, "util.py", "X = 2") in edited  # the fix of call 2
    with Store.open(db) as st:
        got = edit_consistency(st, sid)
        assert (got["calls"], got["failed"], got["missing"], got["seen_not_applied"]) == (2, 1, [], [])
        assert check_session(st, sid, only=["edits"]).found == []


def test_corpus_simple_calulator_llm_history_failed_block_is_not_seen(tmp_path, monkeypatch):
    """The corpus: call 8 proposes 6 blocks; Aider's feedback (line 10864) says the first, on
    EmojiBubble.jsx, failed to match; the chat history of the same run says so too (line 1072)."""
    db = str(tmp_path / "s.db")
    sid = _ingest(monkeypatch, corpus("aider/Simple-Calulator/.aider.llm.history"), db)
    at8 = [e for e in _edited(db, sid) if e[0] == 8]
    assert len(at8) == 5 and sum(p == "src/components/EmojiBubble.jsx" for _, p, _ in at8) == 2
    with Store.open(db) as st:
        got = edit_consistency(st, sid)
        assert (got["calls"], got["failed"], got["missing"], got["seen_not_applied"]) == (34, 1, [], [])
        res = check_session(st, sid, only=["edits"])
    assert res.ran == ["edits"] and res.found == []
