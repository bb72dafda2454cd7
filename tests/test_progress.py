"""Progress of the long steps (issue 13, "Progress").

A cold ``ctxf facts`` on a long session showed 0/14448 for 45 s and then jumped, and the model
load showed as "0/?". Now the load is a step of its own, the count advances after each encoder
batch, and on a stderr that is not a terminal (CI) a plain heartbeat line comes every 10 s (none
in a shorter run), never on stdout. Time comes from a fake clock the tests move: no test waits.
"""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from context_forensics.analysis.facts import score_presence
from context_forensics.cli import app
from context_forensics.embed import EmbeddingCache, HashingEmbedder, embed_texts
from context_forensics.embed.progress import part, step, steps_only
from context_forensics.render import progress as progress_mod
from context_forensics.render.progress import ProgressBar
from helpers import FIXTURES

RELEASE = FIXTURES / "facts" / "release.openai.json"
FACTS_CONFIG = FIXTURES / "facts" / "config.yaml"
BUDGET = "The total budget for cloud spend is 4,500 EUR."
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
HEARTBEAT = re.compile(r"^ctxf facts: encoding (\d[\d,]*)/(\d[\d,]*) texts \((\d+)%\), (\d+) s$")


class Clock:
    """A time source the tests move by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Loading(HashingEmbedder):
    """The test embedder with a model to load, as the real one has: loading and each batch
    take ``load_s`` / ``batch_s`` seconds of the fake clock; every call is logged."""

    def __init__(self, log: list, clock: Clock | None = None, *, load_s: float = 0.0, batch_s: float = 0.0,
                 batch_size: int = 8) -> None:
        super().__init__()
        self.log, self.clock, self.load_s, self.batch_s = log, clock, load_s, batch_s
        self.batch_size = batch_size
        self.loaded = False

    def load(self) -> None:
        self.log.append(("load",))
        if self.clock:
            self.clock.t += self.load_s
        self.loaded = True

    def encode(self, texts: list[str]) -> np.ndarray:
        assert self.loaded, "encoded before the model was loaded"
        self.log.append(("encode", len(texts)))
        if self.clock:
            self.clock.t += self.batch_s
        return super().encode(texts)


class Sink:
    """A progress sink that records every report and step, in order."""

    def __init__(self, log: list) -> None:
        self.log = log

    def __call__(self, done: int, total: int) -> None:
        self.log.append((done, total))

    def step(self, label: str):
        from contextlib import contextmanager

        @contextmanager
        def cm():
            self.log.append(("start", label))
            yield
            self.log.append(("end", label))

        return cm()


def counts(log: list) -> list[tuple[int, int]]:
    return [e for e in log if isinstance(e[0], int)]


# --- the core: the load is a step, the count moves per batch -----------------------------------


def test_the_model_load_is_a_step_of_its_own_before_the_count():
    log: list = []
    e = Loading(log, batch_size=8)
    embed_texts([f"text {i}" for i in range(20)], e, None, progress=Sink(log))
    assert log == [("start", "loading embedding model hashing-bow"), ("load",),
                   ("end", "loading embedding model hashing-bow"),
                   (0, 20), ("encode", 8), (8, 20), ("encode", 8), (16, 20), ("encode", 4), (20, 20)]


def test_a_warm_cache_loads_no_model_and_shows_no_step():
    log: list = []
    cache = EmbeddingCache()
    texts = [f"text {i}" for i in range(20)]
    embed_texts(texts, HashingEmbedder(), cache)  # same name and revision: the cache is warm
    embed_texts(texts, Loading(log), cache, progress=Sink(log))
    assert log == [(0, 0)]


def test_a_plain_callable_sink_still_works_and_the_model_is_loaded_once():
    log: list = []
    e = Loading(log, batch_size=8)
    seen: list = []
    embed_texts([f"a {i}" for i in range(10)], e, None, progress=lambda d, t: seen.append((d, t)))
    embed_texts([f"b {i}" for i in range(10)], e, None, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(0, 10), (8, 10), (10, 10)] * 2
    assert log.count(("load",)) == 1
    with step(lambda d, t: None, "nothing"):  # no step(): a no-op
        pass


def test_part_and_steps_only_map_an_inner_calls_counts():
    log: list = []
    inner = part(Sink(log), 100, 50, 400)  # 50 items after 100 of 400; 30 of them to do
    inner(0, 30)
    inner(30, 30)
    with inner.step("x"):
        pass
    silent = steps_only(Sink(log))
    silent(3, 5)
    with silent.step("y"):
        pass
    assert log == [(120, 400), (150, 400), ("start", "x"), ("end", "x"), ("start", "y"), ("end", "y")]
    assert part(None, 0, 1, 1) is None and steps_only(None) is None


def test_facts_report_after_each_batch_not_once_per_block():
    """The old facts reported (0, U) and then (U, U) per block of 4096 texts: on a long session,
    0/14448 for the first 4096 encodes. Now: after each batch, the load first."""
    log: list = []
    texts = [f"message {i} about the deploy of service {i % 7} on host h{i}." for i in range(120)]
    e = Loading(log, batch_size=16)
    score_presence([BUDGET, "Never push to main."], texts, e, None, progress=Sink(log))
    assert log[:3] == [("start", "loading embedding model hashing-bow"), ("load",),
                       ("end", "loading embedding model hashing-bow")]
    c = counts(log)
    total = c[0][1]
    assert total >= 100 and c[0] == (0, total) and c[-1] == (total, total)
    assert all(t == total for _, t in c)  # the facts' own texts are not counted
    done = [d for d, _ in c]
    assert done == sorted(done)
    assert max(b - a for a, b in zip(done, done[1:])) <= 16  # one batch at a time
    assert len(c) >= total // 16
    # the report follows the batch it counts
    enc = [i for i, x in enumerate(log) if x[0] == "encode"]
    assert all(isinstance(log[i + 1][0], int) for i in enc[1:])  # (the first encodes the facts)


def test_facts_with_a_half_warm_cache_count_the_cached_texts_as_done(store):
    texts = [f"line {i} of the build log, step {i}" for i in range(80)]
    score_presence([BUDGET], texts[:40], HashingEmbedder(), store)
    log: list = []
    score_presence([BUDGET], texts, Loading(log, batch_size=8), store, progress=Sink(log))
    c = counts(log)
    total = c[0][1]
    done = [d for d, _ in c]
    assert done == sorted(done) and c[-1] == (total, total)
    assert done[1] >= total - 40 - 8  # the cached half counted done at the first report


@pytest.fixture()
def store(tmp_path):
    from context_forensics.store.db import Store

    with Store.open(tmp_path / "s.db") as s:
        yield s


def test_the_sentence_transformer_embedder_loads_as_a_step(monkeypatch):
    from context_forensics.embed import SentenceTransformerEmbedder
    from context_forensics.errors import UsageError

    try:
        e = SentenceTransformerEmbedder()
    except UsageError as err:
        pytest.skip(str(err))
    log: list = []

    class Model:
        def encode(self, texts, **kw):
            log.append(("encode", len(texts)))
            return np.ones((len(texts), e.dim), dtype=np.float32) / np.sqrt(e.dim)

    def fake_load(path, device="cpu"):
        log.append(("load",))
        return Model()

    monkeypatch.setattr("context_forensics.tokens.assets.load_embedder", fake_load)
    assert e.loaded is False
    embed_texts(["one", "two"], e, None, progress=Sink(log))
    assert log[:3] == [("start", "loading embedding model all-MiniLM-L6-v2"), ("load",),
                       ("end", "loading embedding model all-MiniLM-L6-v2")]
    assert e.loaded is True and log[3] == (0, 2)


# --- the sink: heartbeat lines off a terminal, a bar on one --------------------------------------


def pipe_bar(clock: Clock, **kw) -> tuple[ProgressBar, io.StringIO]:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=120)
    return ProgressBar(console, "encoding", command="ctxf facts", unit="texts", time_source=clock, **kw), buf


@pytest.fixture()
def no_ticker(monkeypatch):
    monkeypatch.setattr(progress_mod, "TICK_SECONDS", 0)


def test_no_heartbeat_in_a_run_shorter_than_ten_seconds(no_ticker):
    clock = Clock()
    bar, buf = pipe_bar(clock)
    e = Loading([], clock, load_s=3.0, batch_s=0.5, batch_size=8)
    with bar:
        embed_texts([f"t {i}" for i in range(96)], e, None, progress=bar)  # 3 + 12 x 0.5 = 9 s
        clock.t += 0.9
        bar.tick()
    assert buf.getvalue() == "" and bar.lines == []


def test_a_heartbeat_every_ten_seconds_in_plain_words(no_ticker):
    clock = Clock()
    bar, buf = pipe_bar(clock)
    e = Loading([], clock, load_s=4.0, batch_s=3.0, batch_size=64)
    with bar:
        embed_texts([f"text number {i}" for i in range(1000)], e, None, progress=bar)
    out = buf.getvalue()
    assert "\r" not in out and "\x1b" not in out  # nothing animated
    lines = out.splitlines()
    assert lines == bar.lines and len(lines) >= 4
    seen = []
    for line in lines:
        m = HEARTBEAT.match(line)
        assert m, line
        done, total, pct, secs = (int(g.replace(",", "")) for g in m.groups())
        assert total == 1000 and pct == 100 * done // total
        seen.append((done, secs))
    # The load takes run time 0-4 s, batch k ends at 4 + 3k. A line is due 10 s after the start
    # or the last line: k = 2, 6, 10, 14 (run time 10, 22, 34, 46); the count's last state when
    # it ends (k = 16). The seconds are the encoding's own.
    assert seen == [(128, 6), (384, 18), (640, 30), (896, 42), (1000, 48)]
    assert lines[0] == "ctxf facts: encoding 128/1,000 texts (12%), 6 s"


def test_the_ticker_speaks_during_a_long_model_load(no_ticker):
    """The core is silent while the model loads: the ticker's tick() prints about the step."""
    clock = Clock()
    bar, buf = pipe_bar(clock)
    with bar:
        with bar.step("loading embedding model all-MiniLM-L6-v2"):
            for _ in range(25):  # what the ticker thread does once a second
                clock.t += 1
                bar.tick()
        clock.t += 1
    assert bar.lines == ["ctxf facts: loading embedding model all-MiniLM-L6-v2 …, 10 s",
                         "ctxf facts: loading embedding model all-MiniLM-L6-v2 …, 20 s",
                         "ctxf facts: loading embedding model all-MiniLM-L6-v2 done, 25 s"]
    assert buf.getvalue().splitlines() == bar.lines


def test_a_failed_step_does_not_say_done(no_ticker):
    clock = Clock()
    bar, _ = pipe_bar(clock)
    with pytest.raises(RuntimeError):
        with bar:
            with bar.step("loading embedding model x"):
                clock.t += 11
                bar.tick()
                raise RuntimeError("no model")
    assert bar.lines == ["ctxf facts: loading embedding model x …, 11 s"]


def test_nothing_between_steps_and_nothing_on_a_terminal(no_ticker):
    clock = Clock()
    bar, buf = pipe_bar(clock)
    with bar:
        clock.t += 30  # replay before any embedding: no step under way
        bar.tick()
    assert buf.getvalue() == ""
    tbuf = io.StringIO()
    tbar = ProgressBar(Console(file=tbuf, force_terminal=True, width=120), "encoding", time_source=clock)
    with tbar:
        tbar(0, 10)
        clock.t += 30
        tbar.tick()
        tbar(10, 10)
    assert tbar.lines == [] and "ctxf facts:" not in tbuf.getvalue() and "ctxf:" not in tbuf.getvalue()


def test_the_ticker_thread_runs_off_a_terminal_only_and_stops_at_exit():
    clock = Clock()
    bar, _ = pipe_bar(clock)
    with bar:
        assert bar._ticker is not None and bar._ticker.is_alive()
    assert not bar._ticker.is_alive()
    tbar = ProgressBar(Console(file=io.StringIO(), force_terminal=True), "encoding")
    with tbar:
        assert tbar._ticker is None


@pytest.mark.parametrize("width", [80, 120, 200])
def test_on_a_terminal_the_load_is_its_own_line_never_0_of_unknown(width):
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=width, color_system=None)
    log: list = []
    with ProgressBar(console, "encoding", clock="remaining") as bar:
        e = Loading(log, batch_size=8)
        seen = []
        orig = bar.step

        def spy(label):
            seen.append(label)
            return orig(label)

        bar.step = spy  # type: ignore[method-assign]
        with bar.step("loading embedding model hashing-bow"):
            bar.bar.refresh()
            loading = ANSI.sub("", buf.getvalue())
            e.load()
        embed_texts([f"t {i}" for i in range(20)], e, None, progress=bar)
        bar.bar.refresh()
    out = ANSI.sub("", buf.getvalue())
    assert "loading embedding model hashing-bow" in loading and "…" in loading
    assert "/?" not in out and "0/?" not in loading
    assert re.search(r"loading embedding model hashing-bow\s+done", out)
    assert re.search(r"encoding\s.*20/20", out)
    for line in out.replace("\r", "\n").splitlines():
        assert len(line) <= width


# --- the command: heartbeat on stderr, --json clean ----------------------------------------------


def run_facts(monkeypatch, tmp_path, clock: Clock, batch_s: float, *extra):
    monkeypatch.setattr(progress_mod, "TICK_SECONDS", 0)
    monkeypatch.setattr(progress_mod, "_now", clock)
    e = Loading([], clock, load_s=2.0, batch_s=batch_s, batch_size=4)
    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: e)
    args = ["facts", RELEASE, "--db", tmp_path / "s.db", "--config", FACTS_CONFIG, "--model", "tiny",
            "--fact", BUDGET, *extra]
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_facts_json_stays_clean_with_heartbeat_lines_on_stderr(monkeypatch, tmp_path):
    r = run_facts(monkeypatch, tmp_path, Clock(), 4.0, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)  # stdout holds the JSON and nothing else
    assert data["facts"][0]["fact"] == BUDGET
    lines = r.stderr.splitlines()
    assert lines and all(HEARTBEAT.match(x) for x in lines), lines
    # no heartbeat line on stdout (the JSON itself names the session's path, which may hold "ctxf")
    assert not any(HEARTBEAT.match(x) for x in r.stdout.splitlines()) and "ctxf facts:" not in r.stdout


def test_a_short_facts_run_prints_no_heartbeat(monkeypatch, tmp_path):
    r = run_facts(monkeypatch, tmp_path, Clock(), 0.0, "--json")
    assert r.exit_code == 0, r.output
    assert r.stderr == ""
    json.loads(r.stdout)


# ---------------------------------------------------------------- the run over many files (issue 16)

RUN_LINE = re.compile(r"^ctxf audit: (\d[\d,]*)/(\d[\d,]*) files, (\d[\d,]*) sessions, ([\d,.]+) sessions/s"
                      r"(?:, ETA ~(\S+(?: \S+s)?))?(?:, (\d+) failed)?(?:, (\d+) retried)?$")


def pipe_run(clock: Clock, **kw):
    from context_forensics.render.progress import RunProgress

    buf = io.StringIO()
    return RunProgress(Console(file=buf, force_terminal=False, width=200), time_source=clock, **kw), buf


def test_run_progress_heartbeat_lines_say_measured_rates_and_an_estimated_eta(no_ticker):
    clock = Clock()
    run, buf = pipe_run(clock)
    with run:
        run.update(files_done=0, files_total=1000, sessions=0)
        for k in range(1, 31):  # 4 files and 47 sessions a second; a failure at 12 s, a retry at 25 s
            clock.t += 1.0
            run.update(files_done=4 * k, files_total=1000, sessions=47 * k, failures=int(k >= 12) * 2,
                       retries=int(k >= 25))
    lines = buf.getvalue().splitlines()
    assert lines == run.lines and "\x1b" not in buf.getvalue()
    assert lines[:3] == [
        "ctxf audit: 40/1,000 files, 470 sessions, 47.0 sessions/s, ETA ~4m 0s",
        "ctxf audit: 80/1,000 files, 940 sessions, 47.0 sessions/s, ETA ~3m 50s, 2 failed",
        "ctxf audit: 120/1,000 files, 1,410 sessions, 47.0 sessions/s, ETA ~3m 40s, 2 failed, 1 retried",
    ]
    for line in lines[:3]:  # the ETA is the files left at the files rate so far
        files, total, sessions, rate, eta, *_ = RUN_LINE.match(line).groups()
        done, left = int(files.replace(",", "")), int(total.replace(",", "")) - int(files.replace(",", ""))
        m, s = (int(x[:-1]) for x in eta.split())
        assert m * 60 + s == left * (done / 4) / done
    # the end: how it ended, with the whole run's measured rate and time
    assert lines[-1] == ("ctxf audit: done, 120/1,000 files, 1,410 sessions, 47.0 sessions/s, in 30s, 2 failed, "
                         "1 retried")
    assert len(lines) == 4


def test_run_progress_rates_follow_the_clock_not_the_calls(no_ticker):
    clock = Clock()
    run, _ = pipe_run(clock)
    with run:
        clock.t += 50  # start-up before the first report is not counted
        run.update(files_done=0, files_total=10, sessions=0)
        assert run.rate() is None and run.eta() is None
        clock.t += 4
        run.update(files_done=2, files_total=10, sessions=30)
        assert run.rate() == pytest.approx(7.5) and run.eta() == pytest.approx(16.0)
        clock.t += 4  # nothing came back for 4 s: the rate falls, the ETA grows
        assert run.rate() == pytest.approx(3.75) and run.eta() == pytest.approx(32.0)


def test_run_progress_says_nothing_in_a_short_run_and_nothing_before_the_first_report(no_ticker):
    clock = Clock()
    run, buf = pipe_run(clock)
    with run:
        clock.t += 30
        run.tick()  # no report yet: no line
        run.update(files_done=0, files_total=5, sessions=0)
        clock.t += 9
        run.update(files_done=5, files_total=5, sessions=9)
    assert buf.getvalue() == "" and run.lines == []


def test_run_progress_speaks_while_results_are_silent_and_says_an_interrupt(no_ticker):
    clock = Clock()
    run, _ = pipe_run(clock, heartbeat=5)
    with pytest.raises(KeyboardInterrupt), run:
        run.update(files_done=0, files_total=8, sessions=0)
        clock.t += 2
        run.update(files_done=1, files_total=8, sessions=3)
        clock.t += 4
        run.tick()  # what the ticker thread does between results
        clock.t += 1
        raise KeyboardInterrupt
    assert run.lines == ["ctxf audit: 1/8 files, 3 sessions, 0.5 sessions/s, ETA ~42s",
                         "ctxf audit: interrupted at 1/8 files, 3 sessions, 0.4 sessions/s, in 7s"]


def test_run_progress_on_a_terminal_draws_the_bar_and_no_heartbeat(no_ticker):
    from context_forensics.render.progress import RunProgress

    clock = Clock()
    buf = io.StringIO()
    run = RunProgress(Console(file=buf, force_terminal=True, width=160, color_system=None), time_source=clock)
    with run:
        assert run._ticker is None
        run.update(files_done=0, files_total=10, sessions=0)
        clock.t += 20
        run.update(files_done=4, files_total=10, sessions=50, failures=1, retries=2)
        run.bar.refresh()
        drawn = ANSI.sub("", buf.getvalue())
    assert run.lines == []
    assert "ctxf audit" in drawn and "4/10 files, 50 sessions, 2.5 sessions/s, ETA ~30s, 1 failed, 2 retried" in drawn


def test_run_progress_ticker_thread_runs_off_a_terminal_and_stops():
    clock = Clock()
    run, _ = pipe_run(clock)
    with run:
        assert run._ticker is not None and run._ticker.is_alive()
    assert not run._ticker.is_alive()


@pytest.mark.parametrize("seconds, words", [(0, "0s"), (42.4, "42s"), (190, "3m 10s"), (7500, "2h 5m")])
def test_durations_in_short_words(seconds, words):
    assert progress_mod.duration(seconds) == words


def test_run_progress_says_which_rule_on_which_session_while_one_runs_long(no_ticker):
    """Issue 33: the audit's heartbeat names the rule and the session under way (a long drift on a
    long session no longer leaves the line silent about what it waits for); the last line does not."""
    clock = Clock()
    run, _ = pipe_run(clock, heartbeat=5)
    with run:
        run.update(files_done=0, files_total=4, sessions=0)
        run.doing("max_drift on 4e34e5f24e96 (pi, 484 calls)")
        clock.t += 6
        run.tick()
    assert run.lines[0].endswith(", now: max_drift on 4e34e5f24e96 (pi, 484 calls)"), run.lines
    assert "now:" not in run.lines[-1]


def test_the_audit_runner_reports_each_rule_as_it_starts(tmp_path):
    """``runner.reporting`` hears every rule of every session the serial audit runs."""
    import context_forensics as ctxf
    from context_forensics.analysis.audit.runner import reporting

    heard: list[str] = []
    from pathlib import Path

    log = Path(__file__).parent.parent / "sample_logs" / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
    with reporting(heard.append):
        rep = ctxf.audit([log], db=tmp_path / "s.db").to_dict()
    rules = [r["rule"] for r in rep["sessions"][0]["results"]]
    sid = rep["sessions"][0]["id"]
    assert [h.split(" on ")[0] for h in heard] == rules and all(f" on {sid} (openai_chat, " in h for h in heard)
    heard.clear()
    ctxf.audit([log], db=tmp_path / "t.db")  # after the block: nobody is told any more
    assert heard == []
