"""Hostile input (issue 11, "one bad input must fail alone"): nesting past any log's, a corrupt
deflate stream in an Inspect .eval, a parent_hash cycle in an llm logs.db, symlink loops, an
unreadable file, FIFOs / streams / devices, wrong-typed fields and lone surrogates. Every
fixture is generated here; each bad input sits beside a good file that must still go in.

Inputs that used to hang (a FIFO, a symlink loop, an llm cycle) run in a child process with a
timeout, so a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.errors import InputError
from context_forensics.importers import _json
from context_forensics.importers._json import MAX_DEPTH, NestingError, parse_json
from context_forensics.importers.base import ImportContext
from context_forensics.store import inputs
from context_forensics.store.db import Store
from context_forensics.store.ingest import Unit, expand, ingest_paths, ingest_unit
from helpers import CORPUS, FIXTURES, unprivileged

GOOD = FIXTURES / "facts" / "release.openai.json"  # an OpenAI chat log: 1 session, 22 messages
DEEP = "__DEEP__"
ROOT = Path(__file__).parent.parent


def deep_text(n: int) -> str:
    return "[" * n + "1" + "]" * n


def with_deep(value: object, n: int) -> str:
    """``value`` as JSON with the DEEP marker replaced by ``n`` nested lists."""
    return json.dumps(value).replace(f'"{DEEP}"', deep_text(n))


@pytest.fixture()
def store(tmp_path):
    with Store.open(tmp_path / "store.db") as s:
        yield s


def by_name(report) -> dict:
    return {Path(f.path).name: f for f in report.files}


def cli(*args, **kwargs):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False, **kwargs)


def ctxf(*args, timeout=60, prefix=(), **kwargs) -> subprocess.CompletedProcess:
    """``ctxf ARGS`` in a child process (memory capped at 2 GB), killed after ``timeout`` s;
    ``prefix``: a command it runs under (``helpers.unprivileged``)."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "NO_COLOR": "1"}
    return subprocess.run([*prefix, sys.executable, "-m", "context_forensics", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, preexec_fn=cap, env=env, **kwargs)


# ---------------------------------------------------------------- 1. nesting


def test_one_guard_bounds_nesting_for_every_reader():
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(ok) is not None and parse_json(ok.encode()) is not None
    for n in (MAX_DEPTH + 1, 1_000, 1_025, 50_000):  # below and past orjson's own limit (1,024)
        text = '{"a": ' + deep_text(n) + "}"
        with pytest.raises(NestingError) as e:
            parse_json(text)
        assert e.value.msg == f"nested deeper than {MAX_DEPTH} levels"
        assert e.value.colno == 6 + MAX_DEPTH  # the object is level 1: its 200th bracket is level 201
    with pytest.raises(NestingError):  # the slow path (what orjson refuses) is bounded too
        parse_json(b'{"nan": NaN, "a": ' + deep_text(500).encode() + b"}")
    # a NestingError is a JSONDecodeError: every reader's handling of malformed JSON applies
    assert issubclass(NestingError, json.JSONDecodeError)


def test_no_real_log_nests_near_the_bound():
    """The bound is far above what real logs do: the deepest corpus file nests 13 levels."""
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    deepest = 0
    for f in CORPUS.rglob("*"):
        if not f.is_file() or f.suffix not in (".json", ".jsonl", ".traj", ".eval") or f.stat().st_size > 50e6:
            continue
        for piece in ([f.read_bytes()] if f.suffix != ".jsonl" else f.read_bytes().splitlines()):
            try:
                value = json.loads(piece)
            except (ValueError, RecursionError):
                continue
            for d in range(deepest + 1, MAX_DEPTH + 1):
                if not _json.too_deep(value, d):
                    break
                deepest = d
    assert 5 < deepest < MAX_DEPTH // 4


def _claude_code_lines(tmp_path: Path, n: int) -> Path:
    lines = (FIXTURES / "claude_code" / "session.jsonl").read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if '"type": "assistant"' in line)
    rec = json.loads(lines[i])
    rec["message"]["content"] = [{"type": "tool_use", "id": "t", "name": "x", "input": DEEP}]
    lines[i] = with_deep(rec, n)
    p = tmp_path / "deep-claude.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def _openai_doc(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "deep-openai.json"
    p.write_text(with_deep({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": DEEP}]}, n))
    return p


def _openai_lines(tmp_path: Path, n: int) -> Path:
    lines = (FIXTURES / "openai_chat" / "finetune.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["messages"][0]["content"] = DEEP
    lines[1] = with_deep(rec, n)
    p = tmp_path / "deep-finetune.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def _chatgpt_export(tmp_path: Path, n: int) -> Path:
    conv = json.loads((FIXTURES / "chatgpt_export" / "single_conversation.json").read_text())
    conv = conv[0] if isinstance(conv, list) else conv
    bad = json.loads(json.dumps(conv))
    bad["id"] = "other-conversation"
    bad["title"] = DEEP
    p = tmp_path / "deep-conversations.json"
    p.write_text(with_deep([conv, bad], n))
    return p


def _cassette(tmp_path: Path, n: int) -> Path:
    doc = json.loads((FIXTURES / "cassette" / "json_cassette.json").read_text())
    doc["interactions"][0]["request"]["headers"] = {"x": DEEP}
    p = tmp_path / "deep-cassette.json"
    p.write_text(with_deep(doc, n))
    return p


# (builder, what happens at a nesting ctxf's own bound lets the parser reach, and past it)
NESTED = {
    "claude_code": (_claude_code_lines, "line skipped", "line skipped"),
    "openai_chat JSONL": (_openai_lines, "line skipped", "line skipped"),
    "openai_chat JSON": (_openai_doc, "file fails", "file fails"),
    "chatgpt_export": (_chatgpt_export, "item skipped", "file fails"),  # 5,000 levels: no item end
    "vcr_cassette": (_cassette, "file fails", "file fails"),
}


@pytest.mark.parametrize("depth", [300, 5_000])
@pytest.mark.parametrize("fmt", NESTED)
def test_deep_nesting_fails_alone_with_its_place(store, tmp_path, fmt, depth):
    build, at_300, beyond = NESTED[fmt]
    bad = build(tmp_path, depth)
    report = ingest_paths(store, [bad, GOOD])  # before: RecursionError out of the API, GOOD lost
    files = by_name(report)
    assert files[GOOD.name].status == "ingested" and files[GOOD.name].messages == 22
    f = files[bad.name]
    outcome = at_300 if depth == 300 else beyond
    if outcome == "file fails":
        assert f.status == "failed" and report.exit_code == 1
        assert f"nested deeper than {MAX_DEPTH} levels" in f.error and f"{bad}:1:" in f.error
        assert store.db.execute("SELECT count(*) FROM sessions WHERE source = ?", [str(bad)]).fetchone()[0] == 0
    elif outcome == "line skipped":  # a record not read: the file is stored in part (issue 32)
        assert f.status == "partial" and f.skipped.get("too deeply nested line") == 1
        assert any(f"nested deeper than {MAX_DEPTH} levels" in w and "skipped this line" in w for w in f.warnings)
        assert f.messages > 0
    else:  # one item of a list skipped by its index, the others kept: stored in part
        assert f.status == "partial" and f.skipped.get("malformed item") == 1 and len(f.sessions) == 1
        assert any("item 1: nested deeper" in w for w in f.warnings)


def test_a_walked_folder_with_nested_files_ingests_the_rest(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "bracket.json").write_text(deep_text(5_000))  # before: a sniffer's RecursionError
    (folder / "object.jsonl").write_text('{"a": ' * 3_000 + "1" + "}" * 3_000 + "\n")
    shutil.copy(GOOD, folder / "good.json")
    r = cli("ingest", folder, "--db", tmp_path / "s.db", "--json")
    assert r.exit_code == 1  # an input could not be read
    data = json.loads(r.stdout)  # a summary, not "internal error"
    files = {Path(f["path"]).name: f for f in data["files"]}
    assert files["good.json"]["status"] == "ingested"
    for name in ("bracket.json", "object.jsonl"):
        assert files[name]["status"] == "failed"
        assert f"nested deeper than {MAX_DEPTH} levels" in files[name]["error"]
    assert "Traceback" not in r.output and "internal error" not in r.output


def test_a_recursion_error_anywhere_fails_only_its_unit(store, tmp_path, monkeypatch):
    """The last line of defence: whatever recursion an importer does, its unit fails alone."""
    from context_forensics import importers

    imp = importers.get("sharegpt")

    def parse(path, ctx):
        raise RecursionError("maximum recursion depth exceeded")
        yield  # pragma: no cover

    monkeypatch.setattr(imp, "parse", parse)
    bad = tmp_path / "conv.json"
    shutil.copy(FIXTURES / "sharegpt_small.json", bad)
    report = ingest_paths(store, [bad, GOOD])
    files = by_name(report)
    assert files["conv.json"].status == "failed" and "nested too deeply" in files["conv.json"].error
    assert files[GOOD.name].status == "ingested"


# ---------------------------------------------------------------- 2. a corrupt .eval member


def _eval_zip(path: Path) -> list[str]:
    """An Inspect .eval (zip) of the modern_spans fixture: header.json and one member per sample."""
    log = json.loads((FIXTURES / "inspect" / "modern_spans.json").read_text())
    samples = log.pop("samples")
    names = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", json.dumps(log))
        for s in samples:
            name = f"samples/{s['id']}_epoch_{s['epoch']}.json"
            zf.writestr(name, json.dumps(s) + " " * 4096)  # long enough to deflate
            names.append(name)
    return names


def _break_deflate(path: Path, member: str) -> None:
    """Make ``member``'s deflate stream invalid (a reserved block type), CRC and sizes untouched."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    data = bytearray(path.read_bytes())
    n, m = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    data[info.header_offset + 30 + n + m] = 0x07  # BFINAL=1, BTYPE=11: "invalid block type"
    path.write_bytes(bytes(data))


def test_a_corrupt_deflate_member_skips_that_sample_only(store, tmp_path):
    log = tmp_path / "run.eval"
    first, second = _eval_zip(log)
    _break_deflate(log, first)
    with zipfile.ZipFile(log) as zf, pytest.raises(zlib.error):
        zf.read(first)  # the fixture raises what used to escape (zlib.error, not BadZipFile)
    report = ingest_paths(store, [log, GOOD])
    files = by_name(report)
    f = files["run.eval"]
    assert f.status == "partial" and len(f.sessions) == 1 and f.skipped.get("unreadable sample") == 1
    assert any(first in w and "cannot read member" in w for w in f.warnings)
    assert files[GOOD.name].status == "ingested" and report.exit_code == 0


def test_a_corrupt_eval_header_fails_that_file_alone(store, tmp_path):
    log = tmp_path / "run.eval"
    _eval_zip(log)
    _break_deflate(log, "header.json")
    files = by_name(ingest_paths(store, [log, GOOD]))
    assert files["run.eval"].status == "failed" and "header.json: cannot read member" in files["run.eval"].error
    assert files[GOOD.name].status == "ingested"


def test_a_member_that_inflates_past_the_bound_is_not_read(store, tmp_path, monkeypatch):
    from context_forensics.importers import _inflate

    log = tmp_path / "run.eval"
    first, second = _eval_zip(log)
    with zipfile.ZipFile(log) as zf:
        sizes = {n: zf.getinfo(n).file_size for n in (first, second)}
    assert len(set(sizes.values())) == 2
    monkeypatch.setattr(_inflate, "MAX_STREAM", min(sizes.values()) + 1)  # one member over, one under
    big = max(sizes, key=sizes.get)
    f = by_name(ingest_paths(store, [log]))["run.eval"]
    assert f.status == "partial" and len(f.sessions) == 1 and f.skipped.get("unreadable sample") == 1
    assert any(big in w and "more than ctxf inflates" in w for w in f.warnings)


def test_running_out_of_memory_fails_only_that_unit(store, tmp_path, monkeypatch):
    from context_forensics import importers

    def parse(path, ctx):
        raise MemoryError()
        yield  # pragma: no cover

    monkeypatch.setattr(importers.get("sharegpt"), "parse", parse)
    bad = tmp_path / "conv.json"
    shutil.copy(FIXTURES / "sharegpt_small.json", bad)
    files = by_name(ingest_paths(store, [bad, GOOD]))
    assert files["conv.json"].status == "failed" and "ran out of memory" in files["conv.json"].error
    assert files[GOOD.name].status == "ingested"


# ---------------------------------------------------------------- 3. an llm logs.db with a cycle


def _llm_db_with_cycle(path: Path, length: int = 4) -> None:
    sqlite_utils = pytest.importorskip("sqlite_utils")
    migrations = pytest.importorskip("llm.migrations")
    from llm.logs import LogStore
    from llm.parts import Message, TextPart

    db = sqlite_utils.Database(path)
    migrations.migrate(db)
    store = LogStore(db)
    tip, root = None, None
    for i in range(length):
        role = "user" if i % 2 == 0 else "assistant"
        tip = store.ensure_chain([Message(role, [TextPart(f"message {i}")])], parent=tip)
        root = root or tip
    store.create_thread(name="cyclic", tip=tip, id="01cycle")
    db.execute("update messages set parent_hash = ? where hash = ?", [tip, root])  # root -> tip: a loop
    db.conn.commit()
    db.conn.close()


def test_a_parent_hash_cycle_is_cut_with_a_warning(tmp_path):
    logs = tmp_path / "logs.db"
    _llm_db_with_cycle(logs)
    # before: the recursive query expanded the loop a million times (CPU and memory until killed)
    out = ctxf("ingest", logs, GOOD, "--db", tmp_path / "s.db", "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    files = {Path(f["path"]).name: f for f in json.loads(out.stdout)["files"]}
    f = files["logs.db"]
    assert f["status"] == "ingested" and f["messages"] == 4
    assert any("thread 01cycle: parent_hash links form a cycle" in w for w in f["warnings"])
    with sqlite3.connect(tmp_path / "s.db") as c:
        texts = [r[0] for r in c.execute("SELECT text FROM messages m JOIN sessions s ON s.id = m.session_id "
                                         "WHERE s.format = 'llm_logs' ORDER BY seq")]
    assert texts == ["message 0", "message 1", "message 2", "message 3"]  # each message once, in order
    assert files[GOOD.name]["status"] == "ingested"


# ---------------------------------------------------------------- 4. symlink loops


def test_symlinks_back_up_are_walked_once_and_counted(tmp_path):
    root = tmp_path / "logs"
    (root / "sub").mkdir(parents=True)
    shutil.copy(GOOD, root / "sub" / "good.json")
    (root / "sub" / "up").symlink_to("..")  # a -> .. : the walk never ended
    (root / "sub" / "again").symlink_to("../sub")
    (root / "link.json").symlink_to("sub/good.json")  # a second way to the same file
    out = ctxf("ingest", "-r", root, "--db", tmp_path / "s.db", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["totals"]["links_skipped"] == 3 and data["totals"]["files"] == 1
    assert data["totals"]["messages"] == 22
    assert "3 link(s) to a folder or file already walked were skipped" in out.stderr
    # the walk itself: each folder once, by device and inode
    walk = inputs.Walk()
    units, _ = expand([root], fmt=None, recursive=True, walk=walk)
    assert len(units) == 1 and walk.links_skipped == 3


def test_a_deep_folder_tree_is_walked_without_recursion(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    deepest = folder
    for _ in range(1_200):  # deeper than Python's recursion limit
        deepest = deepest / "d"
        os.mkdir(deepest)
    shutil.copy(GOOD, deepest / "good.json")
    try:
        units, _ = expand([folder], fmt=None, recursive=True)
        assert [u.path.name for u in units] == ["good.json"]
    finally:  # shutil.rmtree (pytest's clean-up too) recurses: take the tree down from the bottom
        (deepest / "good.json").unlink()
        while deepest != folder:
            deepest.rmdir()
            deepest = deepest.parent


# ---------------------------------------------------------------- 5. an unreadable file


@pytest.fixture()
def unreadable(monkeypatch):
    """Paths that behave as a file without read permission does for a user who is not root
    (the suite runs as root, which ignores permission bits): opening raises PermissionError,
    ``os.access(R_OK)`` (click's ``readable`` check) says no."""
    import builtins

    denied: set[str] = set()
    real_open, real_access = builtins.open, os.access

    def guarded_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(file) in denied:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    def access(path, mode, *args, **kwargs):
        if os.path.abspath(path) in denied and mode & os.R_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)  # Path.read_bytes / Path.open go through io.open
    monkeypatch.setattr(os, "access", access)
    return denied


def _good_and_denied(tmp_path: Path, denied: set[str]) -> tuple[Path, Path, Path]:
    folder = tmp_path / "logs"
    folder.mkdir()
    good, bad = folder / "good.json", folder / "secret.json"
    shutil.copy(GOOD, good)
    shutil.copy(GOOD, bad)
    denied.add(str(bad))
    return folder, good, bad


def test_an_unreadable_file_in_a_walk_fails_alone(tmp_path, unreadable):
    folder, good, bad = _good_and_denied(tmp_path, unreadable)
    with pytest.raises(PermissionError):
        open(bad, "rb")  # the simulation holds
    r = cli("ingest", folder, "--db", tmp_path / "s.db", "--json")  # before: internal error: PermissionError
    assert r.exit_code == 1
    files = {Path(f["path"]).name: f for f in json.loads(r.stdout)["files"]}
    assert files["good.json"]["status"] == "ingested" and files["good.json"]["messages"] == 22
    assert files["secret.json"]["status"] == "failed"
    assert "permission denied" in files["secret.json"]["error"] and "secret.json" in files["secret.json"]["error"]


def test_an_unreadable_file_on_the_command_line_fails_alone(tmp_path, unreadable):
    _, good, bad = _good_and_denied(tmp_path, unreadable)
    r = cli("ingest", good, bad, "--db", tmp_path / "s.db", "--json")  # before: exit 2, "is not readable"
    assert r.exit_code == 1
    files = {Path(f["path"]).name: f for f in json.loads(r.stdout)["files"]}
    assert files["good.json"]["status"] == "ingested" and files["secret.json"]["status"] == "failed"
    assert "permission denied" in files["secret.json"]["error"]
    r = cli("audit", good, bad, "--db", tmp_path / "a.db", "--json")
    assert r.exit_code == 1  # the audit ran over the good file and says one input was unreadable
    data = json.loads(r.stdout)
    assert data["totals"]["sessions"] == 1 and data["totals"]["unreadable"] == 1


def test_a_file_without_read_permission_fails_alone(tmp_path):
    """A real permission bit, read by a process it binds (as root: without the capabilities that
    override it, ``helpers.unprivileged``), not the simulation of the tests above."""
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(GOOD, folder / "good.json")
    bad = folder / "secret.json"
    shutil.copy(GOOD, bad)
    bad.chmod(0)
    out = ctxf("ingest", folder / "good.json", bad, "--db", tmp_path / "s.db", "--json", prefix=unprivileged())
    assert out.returncode == 1
    statuses = {Path(f["path"]).name: f["status"] for f in json.loads(out.stdout)["files"]}
    assert statuses == {"good.json": "ingested", "secret.json": "failed"}


# ---------------------------------------------------------------- 6. FIFOs, streams, devices


def test_a_named_fifo_is_refused_by_name(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    out = ctxf("ingest", fifo, GOOD, "--db", tmp_path / "s.db", "--json", timeout=30)  # before: blocked forever
    assert out.returncode == 1
    files = {Path(f["path"]).name: f for f in json.loads(out.stdout)["files"]}
    assert files["log.fifo"]["status"] == "failed" and "named pipe (FIFO)" in files["log.fifo"]["error"]
    assert files[GOOD.name]["status"] == "ingested"


def test_stdin_as_a_pipe_is_read_once_and_bounded(tmp_path):
    out = ctxf("ingest", "/dev/stdin", "--db", tmp_path / "s.db", "--json", input=GOOD.read_text())
    assert out.returncode == 0, out.stderr  # before: "file is empty"
    (f,) = json.loads(out.stdout)["files"]
    assert f["path"] == "/dev/stdin" and f["status"] == "ingested" and f["messages"] == 22
    assert any("read once, into a temporary copy of at most 256 MiB" in w for w in f["warnings"])
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("ctxf-stream-*/stdin"))  # the copy is gone


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for <(...)")
def test_process_substitution_is_read_once(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = f'{sys.executable} -m context_forensics ingest <(cat {GOOD}) --db {tmp_path / "s.db"} --json'
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    (f,) = json.loads(out.stdout)["files"]
    assert f["status"] == "ingested" and f["messages"] == 22


def test_devices_are_refused_by_name(tmp_path):
    # before: /dev/zero with --format read until memory ran out
    out = ctxf("ingest", "--format", "openai_chat", "/dev/zero", GOOD, "--db", tmp_path / "s.db", "--json",
               timeout=30)
    assert out.returncode == 1
    files = {f["path"]: f for f in json.loads(out.stdout)["files"]}
    assert files["/dev/zero"]["status"] == "failed" and "a device" in files["/dev/zero"]["error"]
    assert files[str(GOOD)]["status"] == "ingested"


def test_a_stream_is_read_up_to_its_bound_and_never_waited_on_forever():
    r, w = os.pipe()
    os.write(w, b"x" * 5000)
    os.close(w)
    with pytest.raises(InputError, match="longer than"):
        inputs.spool(Path(f"/proc/self/fd/{r}"), limit=4096)
    os.close(r)
    r, w = os.pipe()  # a writer that never writes nor closes
    try:
        with pytest.raises(InputError, match="sent nothing for 0.2 s"):
            inputs.spool(Path(f"/proc/self/fd/{r}"), idle=0.2)
    finally:
        os.close(r)
        os.close(w)
    assert inputs.kind_of(Path("/dev/null")) == "device"
    assert inputs.kind_of(Path(f"/proc/self/fd/{r}")) == "missing"


# ---------------------------------------------------------------- 7. wrong types, lone surrogates


def _lines(path: Path, edit) -> list[str]:
    lines = path.read_text().splitlines()
    return edit(lines) or lines


def _claude_block_type(tmp_path: Path) -> Path:
    def edit(lines):
        i = next(k for k, line in enumerate(lines) if '"type": "assistant"' in line)
        rec = json.loads(lines[i])
        rec["message"]["content"] = [{"type": 7}, {"type": "text", "text": "still here"}]
        lines[i] = json.dumps(rec)
    p = tmp_path / "claude.jsonl"
    p.write_text("\n".join(_lines(FIXTURES / "claude_code" / "session.jsonl", edit)) + "\n")
    return p


def _codex_timestamp(tmp_path: Path) -> Path:
    src = FIXTURES / "codex" / "rollout-2025-08-20T09-15-00-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl"

    def edit(lines):
        meta = json.loads(lines[0])
        meta["timestamp"] = ["2025", "08"]  # before: store write failed: Error binding parameter
        lines[0] = json.dumps(meta)
    p = tmp_path / src.name
    p.write_text("\n".join(_lines(src, edit)) + "\n")
    return p


def _finetune_tool_calls(tmp_path: Path) -> Path:
    def edit(lines):
        rec = json.loads(lines[1])
        rec["messages"][1]["tool_calls"] = 5  # before: 'int' object is not iterable, whole file
        lines[1] = json.dumps(rec)
    p = tmp_path / "finetune.jsonl"
    p.write_text("\n".join(_lines(FIXTURES / "openai_chat" / "finetune.jsonl", edit)) + "\n")
    return p


def _anthropic_tool_id(tmp_path: Path) -> Path:
    rec = json.loads((FIXTURES / "anthropic_messages" / "request_response.json").read_text())
    good = json.loads(json.dumps(rec))
    for m in rec["messages"]:
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_use":
                    b["id"] = ["a", "list"]  # a list where an id belongs
    p = tmp_path / "anthropic.json"
    p.write_text(json.dumps([rec, good]))
    return p


def _sharegpt_title(tmp_path: Path) -> Path:
    convs = json.loads((FIXTURES / "sharegpt_small.json").read_text())
    convs[0]["title"] = {"not": "a title"}  # before: store write failed: Error binding parameter
    p = tmp_path / "sharegpt.json"
    p.write_text(json.dumps(convs))
    return p


def _copilot_null_tool_name(tmp_path: Path) -> Path:
    """Issue 31: a tool call named null in the last reply of a Copilot CLI (legacy) session
    failed the file: "TypeError: ToolCall.name must be a string, not NoneType"."""
    doc = json.loads((FIXTURES / "copilot_cli" / "legacy-session.json").read_text())
    doc["chatMessages"][8]["tool_calls"] = [{"id": "call_x", "type": "function",
                                             "function": {"name": None, "arguments": "{}"}}]
    p = tmp_path / "legacy-session.json"
    p.write_text(json.dumps(doc))
    return p


WRONG_TYPED = {
    # format: (builder, what the file keeps, the skip it counts, the place its warning names)
    "claude_code": (_claude_block_type, "the block as an unknown part", None, None),
    "codex": (_codex_timestamp, "the session, without a start time", None, None),
    "openai_chat": (_finetune_tool_calls, "the other lines and messages", "malformed message", ":2: message 1:"),
    "anthropic_messages": (_anthropic_tool_id, "both records, less one message", "malformed message", "message"),
    "sharegpt": (_sharegpt_title, "the conversation, titled by its first prompt", None, None),
    "copilot_cli": (_copilot_null_tool_name, "the reply, without that call", "malformed tool call",
                    "tool call 0 of chat message 8: a tool call's name is null, not text"),
}


@pytest.mark.parametrize("fmt", WRONG_TYPED)
def test_one_wrong_typed_field_costs_one_record_at_most(store, tmp_path, fmt):
    build, _kept, skip, place = WRONG_TYPED[fmt]
    bad = build(tmp_path)
    report = ingest_paths(store, [bad, GOOD], fmt=None)
    files = by_name(report)
    f = files[bad.name]
    # a record skipped as malformed: the file is stored in part (issue 32); a field read another way: whole
    assert f.status == ("partial" if skip else "ingested"), (f.status, f.error)
    assert f.format == fmt and f.messages > 0 and report.exit_code == 0
    assert files[GOOD.name].status == "ingested"
    if skip:
        assert f.skipped.get(skip) == 1
        assert any(place in w and "skipped it, kept the rest" in w for w in f.warnings), f.warnings
    if fmt == "claude_code":
        texts = [r[0] for r in store.db.execute(
            "SELECT text FROM messages m JOIN sessions s ON s.id = m.session_id WHERE s.format = 'claude_code'")]
        assert any(t.startswith("still here") for t in texts)  # the call's text kept, its odd block a part
    if fmt == "anthropic_messages":
        assert len(f.sessions) == 2


def test_a_file_whose_every_record_is_malformed_fails_naming_the_first(store, tmp_path):
    bad = tmp_path / "all-bad.json"
    bad.write_text(json.dumps({"messages": [{"role": "assistant", "content": "x", "tool_calls": 5},
                                            {"role": "assistant", "content": "y", "tool_calls": 6}]}))
    files = by_name(ingest_paths(store, [bad, GOOD], fmt="openai_chat"))
    f = files["all-bad.json"]
    assert f.status == "failed" and f.exit_code == 1
    assert "nothing in this file could be read: 2 record(s) of unexpected shape" in f.error
    # the field's kind in the log's words, never a Python type (issue 31)
    assert "the first: message 0: a number where an object or a list belongs" in f.error, f.error
    assert "TypeError" not in f.error and "'int'" not in f.error
    assert files[GOOD.name].status == "ingested"


def test_lone_surrogates_are_replaced_with_a_warning(store, tmp_path):
    jsonl = tmp_path / "chat.jsonl"
    jsonl.write_text('{"role": "user", "content": "caf\\ud800 au lait"}\n'
                     '{"role": "assistant", "content": "ok \\udfff\\ud83d\\ude00"}\n')  # a lone low one, then a pair
    doc = tmp_path / "chat.json"
    doc.write_text('{"messages": [{"role": "user", "content": "\\ud800"}, {"role": "assistant", "content": "x"}]}')
    files = by_name(ingest_paths(store, [jsonl, doc], fmt="openai_chat"))
    assert files["chat.jsonl"].status == "ingested" and files["chat.json"].status == "ingested"
    assert any(w.startswith(f"{jsonl}:1:") and "lone UTF-16 surrogate" in w for w in files["chat.jsonl"].warnings)
    assert any("lone UTF-16 surrogate" in w for w in files["chat.json"].warnings)
    texts = {r[0] for r in store.db.execute("SELECT text FROM messages")}
    assert {"caf\ufffd au lait", "ok \ufffd\U0001f600", "\ufffd"} <= texts  # the pair stays an emoji


def test_what_the_store_refuses_is_read_again_carefully(store, tmp_path):
    """Past the readers: a file name that is not UTF-8 reaches the store as lone surrogates."""
    name = os.fsdecode(b"caf\xe9.json")
    bad = tmp_path / name
    shutil.copy(GOOD, bad)
    res = ingest_unit(store, Unit(bad, None, True))
    assert res.status == "ingested" and res.messages == 22, res.error
    assert any("lone UTF-16 surrogate" in w for w in res.warnings)
    (source,) = store.db.execute("SELECT source FROM sessions").fetchone()
    assert source.endswith("caf\ufffd.json")
    assert ingest_unit(store, Unit(bad, None, True)).status == "unchanged"  # and again: no error


def test_record_errors_name_their_place(tmp_path):
    ctx = ImportContext(path=tmp_path / "x.jsonl")
    ctx.bad_record(TypeError("unhashable type: 'list'"), what="message", index=3, line=7)
    with ctx.record("conversation", index="abc"):
        raise AttributeError("'int' object has no attribute 'get'")
    assert ctx.warnings == [  # in the log's words (a list, a number), never Python's (issue 31)
        f"{tmp_path / 'x.jsonl'}:7: message 3: a list where text or a number belongs; skipped it, kept the rest",
        f"{tmp_path / 'x.jsonl'}: conversation abc: a number where an object belongs; skipped it, kept the rest",
    ]
    assert ctx.skipped == {"malformed message": 1, "malformed conversation": 1} and ctx.bad == 2
    assert ctx.first_bad.startswith("message 3 (line 7): ")


# ---------------------------------------------------------------- issue 31: escapes, bombs, messages


def _set_encrypted(path: Path, member: str) -> None:
    """Set ``member``'s encrypted flag (bit 0 of its general purpose flags) in its local header
    and central directory entry, as the fuzzer's 29 mutants of issue 31 did."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        data[zf.getinfo(member).header_offset + 6] |= 1
    i = data.find(b"PK\x01\x02")
    while i >= 0:
        n = int.from_bytes(data[i + 28:i + 30], "little")
        if data[i + 46:i + 46 + n].decode() == member:
            data[i + 8] |= 1
        i = data.find(b"PK\x01\x02", i + 4)
    path.write_bytes(bytes(data))


def test_an_encrypted_eval_member_skips_that_sample_only(store, tmp_path):
    log = tmp_path / "run.eval"
    first, _second = _eval_zip(log)
    _set_encrypted(log, first)
    report = ingest_paths(store, [log, GOOD])
    files = by_name(report)
    f = files["run.eval"]
    # stored in part: "partial", never a clean "ingested" (issue 32; it was "ingested" with the flag)
    assert f.status == "partial" and len(f.sessions) == 1 and f.skipped.get("unreadable sample") == 1, f.error
    assert any(first in w and "encrypted" in w for w in f.warnings), f.warnings
    assert f.partial and f.to_dict()["partial"] is True  # stored in part: the --json key says so
    assert report.totals()["partial"] == 1
    assert files[GOOD.name].status == "ingested" and not files[GOOD.name].partial


def test_an_encrypted_eval_header_fails_that_file_and_the_batch_goes_on(tmp_path):
    """Issue 31: zipfile's RuntimeError ended the CLI with "internal error", the files after it unread."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(GOOD, runs / "a.json")
    _eval_zip(runs / "b.eval")
    _set_encrypted(runs / "b.eval", "header.json")
    shutil.copy(GOOD, runs / "c.json")
    (runs / "c.json").write_text((runs / "c.json").read_text().replace("release", "release two", 1))
    proc = ctxf("ingest", runs, "--recursive", "--json", "--db", tmp_path / "c.db")
    assert proc.returncode == 1, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    files = {Path(f["path"]).name: f for f in json.loads(proc.stdout)["files"]}
    assert files["b.eval"]["status"] == "failed"
    assert "header.json" in files["b.eval"]["error"] and "encrypted" in files["b.eval"]["error"]
    assert files["a.json"]["status"] == "ingested" and files["c.json"]["status"] == "ingested"


def test_any_exception_reading_a_file_fails_that_file_alone(store, tmp_path, monkeypatch):
    """Whatever a reader raises (a library's own error no reader turned into ctxf's), that file
    fails by name and the files after it are read."""
    from context_forensics import importers

    def parse(path, ctx):
        raise RuntimeError("a library's own error")
        yield  # pragma: no cover

    monkeypatch.setattr(importers.get("sharegpt"), "parse", parse)
    bad = tmp_path / "conv.json"
    shutil.copy(FIXTURES / "sharegpt_small.json", bad)
    report = ingest_paths(store, [bad, GOOD])
    files = by_name(report)
    assert files["conv.json"].status == "failed" and "internal error reading this file" in files["conv.json"].error
    assert "please report this file" in files["conv.json"].error
    assert files[GOOD.name].status == "ingested" and report.exit_code == 1


def _gzip_bomb(mb: int, kib: int = 1024) -> bytes:
    """A gzip body of a JSON message whose text is ``mb`` runs of ``kib`` KiB of "A" (about 1 KB
    per MiB), built without inflating it: after a full flush each run compresses to the same bytes."""
    head, tail = b'{"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "', \
        b'"}], "model": "claude-sonnet-4-5", "stop_reason": "end_turn"}'
    chunk = b"A" * (kib << 10)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    start = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
    end = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail_raw = end.compress(tail) + end.flush()
    crc = zlib.crc32(head)
    for _ in range(mb):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(tail, crc)
    size = (len(head) + mb * len(chunk) + len(tail)) & 0xFFFFFFFF
    return start + block * mb + tail_raw + crc.to_bytes(4, "little") + size.to_bytes(4, "little")


def _bomb_cassette(path: Path, bodies: list[bytes]) -> None:
    """A JSON VCR cassette (as vcrpy's JSON serializer writes one) of Anthropic calls whose
    responses are gzip bodies stored as ``base64_string``."""
    import base64

    req = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})
    path.write_text(json.dumps({"version": 1, "interactions": [
        {"request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages", "body": req,
                     "headers": {"content-type": ["application/json"]}},
         "response": {"status": {"code": 200, "message": "OK"},
                      "headers": {"content-encoding": ["gzip"], "content-type": ["application/json"]},
                      "body": {"base64_string": base64.b64encode(b).decode()}}} for b in bodies]}))


def _peak_rss_mb(*args: object) -> tuple[int, int, str]:
    """(exit code, peak RSS in MB, stderr) of ``ctxf ARGS`` in a child process (4 GB address space)."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    from fuzz.engine import measured_argv, measured_peak_mb  # the child's own peak, not the suite's

    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "NO_COLOR": "1"}
    report = Path(tempfile.mkdtemp()) / "hwm"
    with open(os.devnull, "wb") as null, subprocess.Popen(
            measured_argv(report, *map(str, args)), stdout=null, stderr=subprocess.PIPE,
            preexec_fn=cap, env=env, cwd=ROOT) as p:
        err = p.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, measured_peak_mb(report, usage.ru_maxrss), err


def test_a_gzip_bomb_in_a_cassette_is_bounded_in_memory(tmp_path):
    """Issue 31: a 1.5 MB cassette whose gzip body inflates to 1 GiB peaked at 3.2 GB RSS."""
    cassette = tmp_path / "bomb.json"
    _bomb_cassette(cassette, [_gzip_bomb(1024)])
    assert cassette.stat().st_size < 2 << 20
    code, rss, err = _peak_rss_mb("ingest", cassette, "--format", "vcr_cassette", "--db", tmp_path / "c.db")
    assert code == 0 and rss < 500, (code, rss, err[-2000:])
    assert "inflates to more than 64.0 MiB" in err and "a decompression bomb?" in err, err


def test_many_small_gzip_bombs_add_up_to_the_files_bound(store, tmp_path):
    """Each body inflates to 1,000 KiB (within one body's bound: 1 MiB), 70 of them to 68 MiB:
    past what one file of 150 KB may inflate to (64 MiB), so the file fails, saying so."""
    cassette = tmp_path / "bombs.json"
    _bomb_cassette(cassette, [_gzip_bomb(1, kib=1000)] * 70)
    files = by_name(ingest_paths(store, [cassette, GOOD], fmt=None))
    f = files["bombs.json"]
    assert f.status == "failed" and "inflate to more than 64.0 MiB in all" in f.error, f.error
    assert files[GOOD.name].status == "ingested"


def test_an_eval_member_past_the_ratio_is_not_inflated(store, tmp_path):
    """A sample that inflates 1000 times (its declared size honest): skipped by its declared size
    before a byte is inflated; the other sample kept."""
    log = tmp_path / "run.eval"
    first, _second = _eval_zip(log)
    with zipfile.ZipFile(log) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    sample = json.loads(members[first])
    sample["input"] = "A" * (200 << 20)  # 200 MiB deflates to ~200 KB
    members[first] = json.dumps(sample).encode()
    with zipfile.ZipFile(log, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in members.items():
            zf.writestr(n, data)
    del sample, members
    f = by_name(ingest_paths(store, [log]))["run.eval"]
    # stored in part: "partial", never a clean "ingested" (issue 32; it was "ingested" with the flag)
    assert f.status == "partial" and len(f.sessions) == 1 and f.skipped.get("unreadable sample") == 1, f.error
    assert any(first in w and "more than ctxf inflates" in w and "100 times" in w for w in f.warnings), f.warnings


def test_a_number_of_thousands_of_digits_never_fails_a_file_by_pythons_limit(store, tmp_path):
    """Issue 31: "(ValueError: Exceeds the limit (4300 digits) for integer string conversion)",
    from the sniffers' look at a head and from the readers of whole documents."""
    huge = "9" * 5000
    odd = tmp_path / "odd.json"  # no log: the look at its head to name its shape met the number
    odd.write_text(f'{{"x": {huge}, "y": [1, 2]}}')
    export = tmp_path / "conversations.json"  # a Claude.ai export (read item by item)
    export.write_text(json.dumps([{"uuid": "c1", "name": "t", "created_at": "2024-01-01T00:00:00Z",
                                   "chat_messages": [{"uuid": "m1", "sender": "human", "text": "hi",
                                                      "created_at": "2024-01-01T00:00:00Z", "size": "HUGE"}]}])
                      .replace('"HUGE"', huge))
    files = by_name(ingest_paths(store, [odd, export, GOOD]))
    assert files["odd.json"].status == "failed"
    assert all("4300" not in (f.error or "") and "Error" not in (f.error or "") for f in files.values())
    assert files["conversations.json"].status == "ingested", files["conversations.json"].error
    assert any("more than 4,300 digits read as null" in w for w in files["conversations.json"].warnings)
    assert files[GOOD.name].status == "ingested"


def test_a_sample_id_of_thousands_of_digits_is_read(store, tmp_path):
    """Issue 31: ``int()`` of a member name's digits ("Exceeds the limit (4300 digits) for integer
    string conversion") failed the whole .eval."""
    log = tmp_path / "run.eval"
    first, second = _eval_zip(log)
    with zipfile.ZipFile(log) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members[f"samples/{'9' * 5000}_epoch_1.json"] = members.pop(first)
    with zipfile.ZipFile(log, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data in members.items():
            zf.writestr(n, data)
    f = by_name(ingest_paths(store, [log]))["run.eval"]
    assert f.status == "ingested" and len(f.sessions) == 2, f.error


@pytest.mark.parametrize("error, words", [
    (lambda: __import__("context_forensics.records", fromlist=["ToolCall"]).ToolCall(None, "{}"),
     "a tool call's name is null, not text"),
    (lambda: int("7" * 5000), "a number (or a numeric text) of more than 4,300 digits"),
    (lambda: {}["id"], "the field 'id' is missing"),
    (lambda: (lambda v: v["content"])(None), "null where an object or a list belongs"),
    (lambda: [].get("x"), "a list where an object belongs"),
    (lambda: {[]: 1}, "a list where text or a number belongs"),
    (lambda: "a" + 1, "a number where text belongs"),
])
def test_record_errors_say_the_field_in_the_logs_words(error, words):
    """Issue 31: "(TypeError: ToolCall.name must be a string, not NoneType)" named Python's types."""
    from context_forensics.importers.base import record_error_reason

    with pytest.raises(Exception) as e:
        error()
    reason = record_error_reason(e.value)
    assert reason == words
    assert not any(w in reason for w in ("Error", "NoneType", "'int'", "'str'", "'dict'", "'list'"))


def test_a_defect_in_the_middle_of_a_batch_stops_nothing_after_it(store, tmp_path, monkeypatch):
    """Whatever escapes one unit's ingest (here: its write raises), the units after it go in."""
    from context_forensics.store import ingest as ingest_mod

    a, b, c = (tmp_path / f"{n}.json" for n in "abc")
    for i, p in enumerate((a, b, c)):
        p.write_text(GOOD.read_text().replace("release", f"release {i}", 1))
    real = ingest_mod.ingest_unit

    def flaky(store, unit, **kwargs):
        if unit.path.name == "b.json":
            raise RuntimeError("a defect")
        return real(store, unit, **kwargs)

    monkeypatch.setattr(ingest_mod, "ingest_unit", flaky)
    report = ingest_paths(store, [a, b, c])
    files = by_name(report)
    assert [f.status for f in report.files] == ["ingested", "failed", "ingested"]
    assert "internal error ingesting this file" in files["b.json"].error and report.exit_code == 1


def test_a_kind_made_of_millions_of_characters_is_named_short(tmp_path):
    """The fuzzer (seed 32, openai_responses 2061): an output item whose ``type`` is 2.9 million
    characters was skipped as "item type '...'" whole, and `ctxf ingest` printed it: wrapping it
    took 27 s of CPU and 680 MB. A skipped kind is cut to 100 characters, a warning to 1,000, at a
    word boundary, so the summary stays small and no part of a long word is kept."""
    from typer.testing import CliRunner

    from context_forensics.cli import app
    from context_forensics.importers.base import MAX_KIND, ImportContext

    doc = json.loads((Path(__file__).parent / "fixtures" / "openai_responses" / "request.json").read_text())
    doc["output"][0]["type"] = "x" * 3_000_000
    p = tmp_path / "request.json"
    p.write_text(json.dumps(doc))
    r = CliRunner().invoke(app, ["ingest", str(p), "--db", str(tmp_path / "s.db"), "--json"])
    assert r.exit_code == 0, r.output[-2000:]
    data = json.loads(r.stdout)
    f = data["files"][0]
    assert f["messages"] > 0 and all(len(k) <= MAX_KIND for k in f["skipped"]), list(f["skipped"])[:3]
    assert len(r.output) < 20_000 and "x" * 200 not in r.output
    ctx = ImportContext(path=p)
    ctx.warn("a value: " + "y" * 5_000)
    ctx.skip("item type " + "z" * 500)
    assert len(ctx.warnings[0]) < 1_200 and "y" * 10 not in ctx.warnings[0]
    assert list(ctx.skipped) == ["item type…"]


def test_finding_where_a_long_line_nests_too_deep_is_bounded_in_memory(tmp_path):
    """Fuzz seed 34 (gemini_cli_stream 1377): a 14 MB JSONL line, a session id of 5 million
    characters full of escapes and a model nested 27,000 levels deep, peaked at 561 MB: the regex
    that finds where the nesting passes the limit kept backtracking state for every escape of the
    string (380 MB). Possessive, it keeps none."""
    escapes = "a\\n\\\"\\u00e9\\\\" * 700_000  # 4.9 million characters, 3.5 million escapes
    line = '{"type": "init", "timestamp": "2026-08-20T10:00:00.000Z", "session_id": "' + escapes + \
        '", "model": ' + "[" * 27_000 + "]" * 27_000 + "}"
    seed = (FIXTURES / "gemini_cli_stream" / "two_runs.jsonl").read_text(encoding="utf-8").splitlines()
    log = tmp_path / "run.jsonl"  # the seed's first line (its first run's init) replaced
    log.write_text("\n".join([line, *seed[1:]]) + "\n", encoding="utf-8")
    code, rss, err = _peak_rss_mb("ingest", log, "--format", "gemini_cli_stream", "--db", tmp_path / "s.db")
    assert code == 0 and "nested deeper than" in err and "Traceback" not in err, (code, err[-2000:])
    assert rss < 250, (code, rss, err[-2000:])
