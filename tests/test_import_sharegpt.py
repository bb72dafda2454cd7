"""ShareGPT: a turn of a speaker the importer does not know is not read as anyone's."""

from __future__ import annotations

import json

from context_forensics import api


def _file(tmp_path, unknown: int, known: int):
    turns = [{"from": "human" if i % 2 == 0 else "gpt", "value": f"turn {i}"} for i in range(known)]
    turns += [{"from": "narrator", "value": f"aside {i}"} for i in range(unknown)]
    p = tmp_path / "conv.json"
    p.write_text(json.dumps([{"id": "c1", "conversations": turns}]))
    return p


def test_unknown_speakers_are_counted_unread_and_make_the_file_partial(tmp_path):
    res = api.ingest([_file(tmp_path, unknown=2, known=8)], db=tmp_path / "s.db").to_dict()["files"][0]
    assert res["format"] == "sharegpt" and res["messages"] == 8
    assert res["status"] == "partial" and res["unread"] == {"turn of speaker 'narrator'": 2}, res
    with api.open_store(tmp_path / "s.db") as ws:
        msgs = ws.store.messages(ws.sessions()[0]["id"])
    assert [m.message.role for m in msgs] == ["user", "assistant"] * 4  # no turn read as a user's


def test_a_few_unknown_turns_are_counted_without_making_the_file_partial(tmp_path):
    res = api.ingest([_file(tmp_path, unknown=1, known=20)], db=tmp_path / "s.db").to_dict()["files"][0]
    assert res["status"] == "ingested" and res["unread"] == {"turn of speaker 'narrator'": 1}, res
