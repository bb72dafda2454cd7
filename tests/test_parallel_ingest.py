"""Parallel ingest: the two halves of ``ingest_unit`` (``parse_unit`` on a worker, ``write_parsed``
on the one writer) store what ``ingest_unit`` stores; ``ctxf ingest --executor`` reads on an
executor's workers and reports what the serial ingest reports."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from context_forensics.store.db import Store, session_id
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


# ---------------------------------------------------------------- the parallel driver

from context_forensics import api  # noqa: E402
from context_forensics.executors import Executor, Outcome, SerialExecutor, TaskError  # noqa: E402
from context_forensics.store.parallel import (  # noqa: E402
    JOB_UNITS,
    RedactSpec,
    batches,
    ingest_parallel,
)

KEY = "sk-proj-" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7" * 3


@pytest.fixture
def extra(tmp_path):
    """Beside the repo's logs: a file holding a secret, a broken file, a byte-identical copy."""
    d = tmp_path / "extra"
    d.mkdir()
    (d / "secret.jsonl").write_text('{"role": "user", "content": "my key is %s"}\n'
                                    '{"role": "assistant", "content": "do not share it"}\n' % KEY)
    (d / "copy.jsonl").write_bytes((d / "secret.jsonl").read_bytes())
    (d / "broken.jsonl").write_text('{"role": "user", "content": 3, "x": [\n')
    return d


def _without_executor(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "executor"}


def test_process_gives_the_serial_report_and_rows_and_a_second_run_adds_nothing(tmp_path, extra):
    paths = [ROOT / "sample_logs", ROOT / "tests" / "fixtures", extra]
    serial = api.ingest(paths, recursive=True, db=tmp_path / "s.db").to_dict()
    par = api.ingest(paths, recursive=True, db=tmp_path / "p.db", executor="process", workers=2)
    data = par.to_dict()
    assert data["executor"] == {"name": "process", "workers": 2, "retries": 0}
    assert "executor" not in serial  # the default ingest is today's, unchanged
    assert _without_executor(data) == serial
    assert serial["totals"]["redacted"] >= 1 and serial["totals"]["failed"] >= 1 and par.exit_code == 1
    with Store.open(tmp_path / "s.db") as s, Store.open(tmp_path / "p.db") as p:
        assert rows(s) == rows(p)
        stored = rows(p)
    assert not any(KEY in repr(r) for r in stored["messages"])
    again = api.ingest(paths, recursive=True, db=tmp_path / "p.db", executor="process", workers=2).to_dict()
    # (Three codex fixtures hold one session by its global id: each rewrites it, serial or not.)
    assert _without_executor(again) == api.ingest(paths, recursive=True, db=tmp_path / "s.db").to_dict()
    assert again["totals"]["ingested"] <= 3
    assert [f["status"] for f in again["files"] if f["path"].startswith(str(extra))] == [
        "failed", "unchanged", "unchanged"]  # broken, copy, secret (name order): a failed file stays failed
    failed = [f["path"] for f in serial["files"] if f["status"] == "failed"]
    assert [f["path"] for f in again["files"] if f["status"] == "failed"] == failed
    with Store.open(tmp_path / "p.db") as p:
        assert rows(p) == stored  # nothing added


def test_the_cli_flags(tmp_path, extra):
    from typer.testing import CliRunner

    from context_forensics.cli import app

    r = CliRunner().invoke(app, ["ingest", str(extra), "--db", str(tmp_path / "c.db"), "--json", "-x", "process",
                                 "-w", "2"])
    assert r.exit_code == 1, r.output  # broken.jsonl
    data = json.loads(r.stdout)
    assert data["executor"]["name"] == "process"
    assert {f["path"].rsplit("/", 1)[-1]: f["status"] for f in data["files"]} == {
        "broken.jsonl": "failed", "copy.jsonl": "ingested", "secret.jsonl": "unchanged"}  # walked in name order
    r = CliRunner().invoke(app, ["ingest", str(extra), "--db", str(tmp_path / "c.db"), "--ray-address", "auto"])
    assert r.exit_code == 2 and "--executor ray" in r.output


class Flaky(Executor):
    """In this process; a job holding ``poison`` is reported dead, as a worker that died past its retries."""

    name = "flaky"
    workers = 1

    def __init__(self, poison: str, interrupt_after: int | None = None) -> None:
        super().__init__()
        self.poison, self.interrupt_after, self.cancelled, self.jobs = poison, interrupt_after, False, []

    def run(self, fn, jobs):
        self.jobs.append([len(j.units) for j in jobs])
        for i, job in enumerate(jobs):
            if self.interrupt_after is not None and i == self.interrupt_after:
                raise KeyboardInterrupt
            if any(u.path.endswith(self.poison) for u in job.units):
                self.retries += 3
                yield Outcome(i, None, TaskError("WorkerDied", "its worker process died 4 times"), 4)
            else:
                yield Outcome(i, fn(job))

    def cancel(self):
        self.cancelled = True


def _chats(d: Path, n: int) -> list[Path]:
    d.mkdir()
    out = []
    for i in range(n):
        f = d / f"c{i:02}.jsonl"
        f.write_text('{"role": "user", "content": "question %d"}\n{"role": "assistant", "content": "answer"}\n' % i)
        out.append(f)
    return out


def test_a_dead_worker_fails_its_unit_alone_and_the_retries_are_counted(tmp_path):
    files = _chats(tmp_path / "logs", 12)
    units, _ = expand(files, fmt=None, recursive=False)
    ex = Flaky("c05.jsonl")
    with Store.open(tmp_path / "p.db") as p, Store.open(tmp_path / "s.db") as s:
        report = ingest_parallel(p, units, executor=ex)
        serial = [ingest_unit(s, u) for u in units]
        assert max(ex.jobs[0]) > 1  # c05 shared a job: its mates were read again, each alone
        assert ex.jobs[1] == [1] * len(ex.jobs[1])
        by = {Path(f.path).name: f for f in report.files}
        assert by["c05.jsonl"].status == "failed" and "worker died" in by["c05.jsonl"].error
        assert by["c05.jsonl"].exit_code == 1 and report.exit_code == 1
        for f, one in zip(report.files, serial):
            if not f.path.endswith("c05.jsonl"):
                assert f.to_dict() == one.to_dict()
        assert report.to_dict()["executor"]["retries"] == ex.retries > 0
        assert p.db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 11


def test_ctrl_c_cancels_and_keeps_what_was_written(tmp_path):
    files = _chats(tmp_path / "logs", 40)
    units, _ = expand(files, fmt=None, recursive=False)
    ex = Flaky("none", interrupt_after=2)
    with Store.open(tmp_path / "p.db") as p:
        with pytest.raises(KeyboardInterrupt):
            ingest_parallel(p, units, executor=ex)
        assert ex.cancelled
        kept = p.db.execute("SELECT count(*) FROM sessions").fetchone()[0]
        assert 0 < kept < 40  # the first two jobs' units, each its own transaction
        assert p.db.execute("SELECT count(*) FROM files").fetchone()[0] == kept
        report = ingest_parallel(p, units, executor=SerialExecutor())  # and the rest on a second run
        assert [f.status for f in report.files].count("unchanged") == kept


def test_batches_are_contiguous_bounded_and_a_big_unit_runs_alone():
    sizes = [10] * 30 + [10_000] + [10] * 5
    groups = batches(sizes, workers=2)
    assert [i for g in groups for i in g] == list(range(len(sizes)))
    assert all(1 <= len(g) <= JOB_UNITS for g in groups)
    assert [30] in groups
    assert batches([], 4) == []


def test_the_redactor_crosses_to_a_worker_as_a_description():
    from context_forensics.store.redact import Redactor, custom_rule

    red = Redactor([custom_rule("ticket", r"TICKET-\d{6}")])
    spec = pickle.loads(pickle.dumps(RedactSpec.of(red)))
    built = spec.build()
    assert built.fingerprint == red.fingerprint
    assert built.text("see TICKET-123456 now") == red.text("see TICKET-123456 now") != "see TICKET-123456 now"


def test_ray_gives_the_serial_report(tmp_path, extra, ray_cluster):
    paths = [ROOT / "sample_logs", extra]
    serial = api.ingest(paths, recursive=True, db=tmp_path / "s.db").to_dict()
    data = api.ingest(paths, recursive=True, db=tmp_path / "r.db", executor="ray").to_dict()
    assert data["executor"]["name"] == "ray" and data["executor"]["workers"] >= 1
    assert _without_executor(data) == serial
    assert ray_cluster.is_initialized()  # the session's Ray, reused and left running
    with Store.open(tmp_path / "s.db") as s, Store.open(tmp_path / "r.db") as r:
        assert rows(s) == rows(r)


# ---------------------------------------------------------------- the serial ingest streams

from context_forensics.errors import InputError  # noqa: E402
from context_forensics.importers.base import Importer  # noqa: E402
from context_forensics.records import Message, Session  # noqa: E402
from context_forensics.store.ingest import Unit  # noqa: E402


class Streaming(Importer):
    """Sessions of generated messages; as each message is made, what the store already holds is
    noted (``seen``). ``fail``: (session, message, exception) raised instead of that message."""

    name = "stream_stub"
    description = "a test stub"

    def __init__(self, store: Store | None, sessions: int, per: int, fail: tuple | None = None) -> None:
        self.store, self.sessions, self.per, self.fail = store, sessions, per, fail
        self.seen: list[tuple[int, int, int, int]] = []  # (session, message, stored sessions, stored messages)

    def sniff(self, path, head):
        return True

    def parse(self, path, ctx):
        for k in range(self.sessions):
            if self.fail is not None and self.fail[:2] == (k, None):
                raise self.fail[2]
            yield Session(external_id=f"s{k}", format=self.name, messages=self._messages(k))

    def _messages(self, k):
        for i in range(self.per):
            if self.fail is not None and self.fail[:2] == (k, i):
                raise self.fail[2]
            if self.store is not None:
                db = self.store.db
                self.seen.append((k, i, db.execute("SELECT count(*) FROM sessions").fetchone()[0],
                                  db.execute("SELECT count(*) FROM messages").fetchone()[0]))
            yield Message(role="user" if i % 2 == 0 else "assistant", text=f"session {k} message {i}")


def _log(tmp_path) -> Path:
    log = tmp_path / "big.log"
    log.write_text("streamed\n")
    return log


def test_the_serial_ingest_writes_each_message_batch_before_the_next_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(Store, "BATCH", 10)
    with Store.open(tmp_path / "a.db") as a:
        imp = Streaming(a, sessions=3, per=45)
        res = ingest_unit(a, Unit(_log(tmp_path), imp, True))
        assert res.status == "ingested" and res.messages == 135 and len(res.sessions) == 3
        assert len(imp.seen) == 135
        for k, i, sessions, messages in imp.seen:
            # Earlier sessions whole, this one's full batches (under a provisional id, with its row,
            # from its first: its id is its content's, known at its end): read no sooner than written,
            # in the unit's transaction (one message batch of one session held at a time).
            assert (sessions, messages) == (k + (i >= 10), 45 * k + i // 10 * 10), (k, i)
        rows = a.db.execute("SELECT id, external_id, content_hash FROM sessions ORDER BY external_id").fetchall()
        assert [r[0] for r in rows] == [session_id("stream_stub", r[1], r[2]) for r in rows] == res.sessions
        assert a.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 135


@pytest.mark.parametrize("fail", [
    (1, 23, ValueError("a record of a shape it never saw")),  # mid-session, batches already written
    (2, None, InputError("truncated", where="big.log")),  # between sessions
    (1, 5, OverflowError("int too big")),  # a value no store holds: read again carefully, then failed
], ids=["message", "session", "careful"])
def test_a_read_failing_midway_rolls_the_unit_back_and_fails_it_as_the_eager_read_does(tmp_path, fail):
    log = _log(tmp_path)
    with Store.open(tmp_path / "a.db") as a, Store.open(tmp_path / "b.db") as b:
        lazy = ingest_unit(a, Unit(log, Streaming(a, 3, 30, fail), True))
        eager = write_parsed(b, parse_unit(Unit(log, Streaming(None, 3, 30, fail), True)))
        assert lazy.status == "failed" and lazy.exit_code == 1 and lazy.error
        assert lazy.to_dict() == eager.to_dict()
        for store in (a, b):  # the sessions written before the failure are gone with it
            assert [store.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    for t in ("sessions", "messages", "files")] == [0, 0, 0]
        if isinstance(fail[2], OverflowError):
            assert "cannot be stored" in lazy.error
        # The next unit is written: the failed one left no transaction open.
        (tmp_path / "ok.log").write_text("ok\n")
        ok = ingest_unit(a, Unit(tmp_path / "ok.log", Streaming(None, 1, 3), True))
        assert ok.status == "ingested" and ok.messages == 3


def test_a_lazy_parse_is_read_once_and_never_pickled(tmp_path):
    log = _log(tmp_path)
    parsed = parse_unit(Unit(log, Streaming(None, 2, 4), True), lazy=True)
    assert parsed.lazy and parsed.warnings == [] and parsed.redacted is None  # nothing read yet
    with pytest.raises(TypeError, match="lazy=False"):
        pickle.dumps(parsed)
    with Store.open(tmp_path / "a.db") as a:
        res = write_parsed(a, parsed)
        assert res.status == "ingested" and res.messages == 8 and parsed.redacted == {}
        with pytest.raises(RuntimeError, match="read once"):
            write_parsed(a, parsed, force=True)
