"""The inputs of a distributed audit (issue 16): local paths, folders, globs and fsspec URLs
listed on the driver (``list_sources``), read on a worker (``fetch``, ``ingest_source``), cut
into batches (``group``). URLs are tested on fsspec's in-process ``memory://`` filesystem and
``file://``; nothing opens a socket."""

from __future__ import annotations

import pickle
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from context_forensics.errors import InputError, UsageError
from context_forensics.store import sources as src
from context_forensics.store.db import Store
from context_forensics.store.ingest import expand, ingest_paths
from context_forensics.store.sources import Source, fetch, group, ingest_source, is_url, list_sources
from helpers import FIXTURES

fsspec = pytest.importorskip("fsspec")

CHAT = FIXTURES / "openai_chat"
PARENT = FIXTURES / "subagents" / "22222222-3333-4444-8555-666666666666.jsonl"
OPENHANDS_RUN = FIXTURES / "openhands" / "run"


@pytest.fixture()
def store(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        yield s


@pytest.fixture()
def bucket():
    """A fresh prefix on fsspec's memory filesystem with two chat logs, a sub-folder, a file of
    another kind and a skipped folder; removed after the test."""
    fs = fsspec.filesystem("memory")
    name = f"bucket-{uuid.uuid4().hex[:8]}"
    fs.pipe(f"/{name}/runs/b.jsonl", (CHAT / "finetune.jsonl").read_bytes())
    fs.pipe(f"/{name}/runs/a.json", (CHAT / "messages_list.json").read_bytes())
    fs.pipe(f"/{name}/runs/deep/c.jsonl", (CHAT / "message_per_line.jsonl").read_bytes())
    fs.pipe(f"/{name}/runs/notes.txt", b"not a log")
    fs.pipe(f"/{name}/runs/.git/d.jsonl", b"{}")
    yield name
    fs.rm(f"/{name}", recursive=True)


# ---------------------------------------------------------------- local


def test_local_sources_are_the_units_expand_gives_in_its_order():
    items = [CHAT, OPENHANDS_RUN, PARENT]
    units, ignored = expand(items, fmt=None, recursive=True)
    listed = list_sources(items)
    assert [s.local for s in listed] == [str(u.path) for u in units]
    assert [s.companion for s in listed] == [u.companion for u in units]
    assert [s.explicit for s in listed] == [u.explicit for u in units]
    assert listed.ignored == ignored and str(CHAT / "bad_shape.json") in listed.ignored
    folder = next(s for s in listed if s.local == str(OPENHANDS_RUN))
    assert folder.folder and folder.importer == "openhands"
    assert folder.size == sum(f.stat().st_size for f in OPENHANDS_RUN.rglob("*") if f.is_file())
    i = [s.local for s in listed].index(str(PARENT))  # the sub-agent files right after their parent
    assert [s.companion for s in listed][i:i + 3] == [False, True, True]


def test_sources_pickle_and_rebuild_the_same_units():
    listed = list_sources([CHAT, PARENT])
    back = pickle.loads(pickle.dumps(listed))
    assert back.sources == listed.sources
    units, _ = expand([CHAT, PARENT], fmt=None, recursive=True)
    rebuilt = [s.to_unit() for s in back]
    assert [(u.path, u.importer and u.importer.name, u.explicit, u.companion) for u in rebuilt] == \
           [(u.path, u.importer and u.importer.name, u.explicit, u.companion) for u in units]


def test_a_glob_the_shell_did_not_expand_is_expanded_sorted_and_stable():
    listed = list_sources([str(CHAT / "*.jsonl")])
    want = sorted(str(p) for p in CHAT.glob("*.jsonl"))
    assert [s.url for s in listed] == want and len(want) == 2
    deep = list_sources([str(FIXTURES / "openai_chat" / "**" / "*.json")])
    assert [s.url for s in deep] == sorted(str(p) for p in CHAT.glob("*.json"))
    assert [s.url for s in list_sources([str(CHAT / "*.jsonl")])] == want  # the same twice


def test_a_file_named_twice_is_one_source():
    listed = list_sources([CHAT / "finetune.jsonl", str(CHAT / "*.jsonl")])
    urls = [s.url for s in listed]
    assert urls == [str(CHAT / "finetune.jsonl"), str(CHAT / "message_per_line.jsonl")]


def test_a_missing_path_or_an_empty_glob_is_a_usage_error_naming_it(tmp_path):
    with pytest.raises(UsageError) as e:
        list_sources([tmp_path / "nope.jsonl"])
    assert str(tmp_path / "nope.jsonl") in str(e.value)
    with pytest.raises(UsageError, match=r"no file matches .*\*\.zzz"):
        list_sources([str(tmp_path / "*.zzz")])


def test_a_fifo_is_a_source_refused_by_name_never_opened(tmp_path, store):
    import os

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    (s,) = list_sources([fifo])
    assert s.problem is not None
    res = ingest_source(store, pickle.loads(pickle.dumps(s)))
    assert res.status == "failed" and "named pipe" in res.error


def test_a_local_source_ingests_as_ingest_paths_does(tmp_path):
    with Store.open(tmp_path / "a.db") as a, Store.open(tmp_path / "b.db") as b:
        serial = ingest_paths(a, [CHAT, PARENT], recursive=True)
        ours = [ingest_source(b, s) for s in list_sources([CHAT, PARENT])]
        assert [(r.path, r.status, r.sessions) for r in ours] == \
               [(r.path, r.status, r.sessions) for r in serial.files]
        assert any(r.sessions for r in ours)


# ---------------------------------------------------------------- URLs


def test_is_url_tells_urls_from_paths_and_windows_drives():
    assert is_url("s3://b/p/") and is_url("memory://x") and is_url("gs://b")
    assert not is_url("C://logs") and not is_url("logs/a.jsonl") and not is_url(Path("s3:/x"))


def test_a_memory_prefix_lists_its_log_files_sorted_with_their_urls(bucket):
    listed = list_sources([f"memory://{bucket}/runs/"])
    assert [s.url for s in listed] == [f"memory://{bucket}/runs/a.json", f"memory://{bucket}/runs/b.jsonl",
                                       f"memory://{bucket}/runs/deep/c.jsonl"]
    assert all(s.remote and s.local is None for s in listed)
    assert [s.size for s in listed] == [(CHAT / n).stat().st_size
                                        for n in ("messages_list.json", "finetune.jsonl", "message_per_line.jsonl")]
    flat = list_sources([f"memory://{bucket}/runs"], recursive=False)
    assert [s.url for s in flat] == [f"memory://{bucket}/runs/a.json", f"memory://{bucket}/runs/b.jsonl"]


def test_a_memory_glob_and_a_file_url(bucket):
    listed = list_sources([f"memory://{bucket}/runs/**/*.jsonl"])
    assert [s.url for s in listed] == [f"memory://{bucket}/runs/b.jsonl", f"memory://{bucket}/runs/deep/c.jsonl"]
    (one,) = list_sources([f"memory://{bucket}/runs/notes.txt"])  # named: kept whatever its suffix
    assert one.explicit and one.url == f"memory://{bucket}/runs/notes.txt"


def test_an_empty_or_missing_prefix_is_a_usage_error_naming_it(bucket):
    fsspec.filesystem("memory").pipe(f"/{bucket}/empty/readme.txt", b"x")
    with pytest.raises(UsageError) as e:
        list_sources([f"memory://{bucket}/empty/"])
    assert f"memory://{bucket}/empty/" in str(e.value) and "no log file" in str(e.value)
    with pytest.raises(UsageError, match="no such file or prefix"):
        list_sources([f"memory://{bucket}/nothing-here/"])


def test_a_memory_url_ingests_through_fetch_with_the_url_as_source(bucket, store, tmp_path):
    listed = list_sources([f"memory://{bucket}/runs/"])
    work = tmp_path / "work"
    work.mkdir()
    results = [ingest_source(store, pickle.loads(pickle.dumps(s)), tmpdir=work) for s in listed]
    assert [r.path for r in results] == [s.url for s in listed]
    # b.jsonl (finetune.jsonl) ends in a truncated line: stored in part, "partial" (issue 32)
    assert [r.status for r in results] == ["ingested", "partial", "ingested"], [r.to_dict() for r in results]
    assert all(r.sessions for r in results)
    for r in results:
        for sid in r.sessions:
            assert store.session(sid)["source"] == r.path
        assert not any(str(work) in w for w in r.warnings)
    assert list(work.iterdir()) == []  # every copy removed
    again = [ingest_source(store, s, tmpdir=work) for s in listed]  # same ids whatever the copy's folder
    assert [(r.status, r.sessions) for r in again] == [("unchanged", r.sessions) for r in results]


def test_fetch_keeps_the_file_name_and_the_bytes(bucket, tmp_path):
    (s,) = [s for s in list_sources([f"memory://{bucket}/runs/"]) if s.url.endswith("b.jsonl")]
    copy = fetch(s, tmp_path)
    assert copy.name == "b.jsonl" and copy.parent.parent == tmp_path
    assert copy.read_bytes() == (CHAT / "finetune.jsonl").read_bytes()
    local = Source(url=str(CHAT / "finetune.jsonl"), local=str(CHAT / "finetune.jsonl"))
    assert fetch(local, tmp_path) == CHAT / "finetune.jsonl"


def test_fetch_is_bounded_and_a_vanished_file_fails_alone(bucket, store, tmp_path):
    (s,) = [s for s in list_sources([f"memory://{bucket}/runs/"]) if s.url.endswith("b.jsonl")]
    lying = Source(url=s.url, local=None, size=0)  # a listed size that was wrong: the copy still stops
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(InputError, match="longer than 100 bytes"):
        fetch(lying, work, limit=100)
    assert list(work.iterdir()) == []
    with pytest.raises(InputError, match="longer than 100 bytes"):  # the listed size says so before a copy
        fetch(s, work, limit=100)
    gone = Source(url=f"memory://{bucket}/runs/gone.jsonl", local=None, size=10)
    res = ingest_source(store, gone, tmpdir=tmp_path)
    assert res.status == "failed" and res.exit_code == 1 and gone.url in res.error


def test_a_walked_remote_file_of_another_layout_is_left_alone_a_broken_one_fails(bucket, store, tmp_path):
    fs = fsspec.filesystem("memory")
    fs.pipe(f"/{bucket}/other/meta.json", b'{"run": 3, "seed": 1}')
    fs.pipe(f"/{bucket}/other/truncated.jsonl", b'{"messages": [{"role": "user"')
    by_name = {s.url.rsplit("/", 1)[1]: s for s in list_sources([f"memory://{bucket}/other/"])}
    meta = ingest_source(store, by_name["meta.json"], tmpdir=tmp_path)
    broken = ingest_source(store, by_name["truncated.jsonl"], tmpdir=tmp_path)
    assert meta.status == "skipped" and meta.exit_code == 0
    assert broken.status == "failed" and broken.exit_code == 1
    assert by_name["truncated.jsonl"].url in broken.error and str(tmp_path) not in broken.error


def test_a_file_url_is_the_local_path(tmp_path):
    shutil.copytree(CHAT, tmp_path / "chat")
    as_url = list_sources([(tmp_path / "chat").as_uri()])
    as_path = list_sources([tmp_path / "chat"])
    assert as_url.sources == as_path.sources and len(as_url) == 5
    with pytest.raises(UsageError, match="another host"):
        list_sources(["file://server/share/x.jsonl"])


def test_an_unknown_scheme_is_a_usage_error():
    with pytest.raises(UsageError) as e:
        list_sources(["nosuch://bucket/x"])
    assert "nosuch://" in str(e.value) and "s3://" in str(e.value)


def test_a_missing_backend_names_the_pip_install(monkeypatch):
    import fsspec.core

    def no_backend(url, **kw):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_backend)
    with pytest.raises(UsageError) as e:
        list_sources(["s3://bucket/logs/"])
    assert e.value.hint == "pip install s3fs" and "s3fs" in e.value.message


def test_no_fsspec_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec raises ImportError
    monkeypatch.setitem(sys.modules, "fsspec.core", None)
    with pytest.raises(UsageError) as e:
        list_sources(["memory://x/"])
    assert e.value.hint == 'pip install "context-forensics[remote]"'


def test_log_suffixes_live_in_store_and_the_audit_uses_them():
    from context_forensics.analysis.audit import inputs as audit_inputs

    assert audit_inputs.LOG_SUFFIXES is src.LOG_SUFFIXES and ".jsonl" in src.LOG_SUFFIXES


# ---------------------------------------------------------------- batches


def _s(name: str, size: int, companion: bool = False) -> Source:
    return Source(url=name, local=name, size=size, companion=companion)


def test_group_keeps_order_and_bounds_bytes_and_files():
    sources = [_s(f"f{i}", 10) for i in range(10)]
    batches = group(sources, target_bytes=35, max_files=100)
    assert [s for b in batches for s in b] == sources
    assert [len(b) for b in batches] == [3, 3, 3, 1]
    batches = group(sources, target_bytes=10_000, max_files=4)
    assert [len(b) for b in batches] == [4, 4, 2]


def test_group_balances_by_size_a_big_file_alone():
    sources = [_s("small1", 1), _s("big", 1000), _s("small2", 1), _s("small3", 1)]
    batches = group(sources, target_bytes=100, max_files=10)
    assert [[s.url for s in b] for b in batches] == [["small1"], ["big"], ["small2", "small3"]]
    sizes = [sum(s.size for s in b) for b in group([_s(f"x{i}", 7) for i in range(300)], target_bytes=700,
                                                   max_files=1000)]
    assert max(sizes) <= 700 and max(sizes[:-1]) <= 2 * min(sizes[:-1])


def test_group_never_cuts_a_session_from_its_companions():
    listed = list_sources([CHAT / "finetune.jsonl", PARENT, CHAT / "messages_list.json"])
    batches = group(listed, target_bytes=1, max_files=1)
    assert [[Path(s.url).name for s in b] for b in batches] == [
        ["finetune.jsonl"], [PARENT.name, "agent-b0c1d2e.jsonl", "agent-c3d4e5f.jsonl"], ["messages_list.json"]]
    with pytest.raises(ValueError):
        group(listed, target_bytes=0, max_files=1)
