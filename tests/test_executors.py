"""Executors (serial, process, Ray): results in job order, a job that raises is its own error,
a worker that dies is retried and the retry counted, a missing Ray is a usage error."""

from __future__ import annotations

import sys

import pytest

import executor_jobs as jobs
from context_forensics.errors import UsageError
from context_forensics.executors import in_order, make_executor
from context_forensics.executors.base import Outcome


def _run(ex, fn, items):
    with ex:
        outs = list(in_order(ex.run(fn, items)))
    return outs


def test_in_order_buffers_outcomes_that_finish_early():
    arrived = [Outcome(2, "c"), Outcome(0, "a"), Outcome(1, "b")]
    assert [o.value for o in in_order(arrived)] == ["a", "b", "c"]


@pytest.mark.parametrize("name", ["serial", "process"])
def test_a_job_that_raises_is_its_own_error_and_the_rest_go_on(name):
    outs = _run(make_executor(name, workers=2), jobs.square, list(range(6)))
    assert [o.index for o in outs] == list(range(6))
    assert [o.value for o in outs] == [0, 1, 4, None, 16, 25]
    assert outs[3].error.type == "ValueError" and "three is refused" in outs[3].error.message
    assert "Traceback" in outs[3].error.traceback
    assert all(o.error is None for i, o in enumerate(outs) if i != 3)


def test_a_killed_process_worker_is_retried_and_counted(tmp_path):
    ex = make_executor("process", workers=2)
    outs = _run(ex, jobs.die_once, [(str(tmp_path), n) for n in range(4)])
    assert [o.value for o in outs] == [0, 10, 20, 30]
    assert all(o.error is None for o in outs)
    assert outs[1].attempts >= 2 and ex.retries >= 1
    assert (tmp_path / "ran-1").read_text() == "killed"


def test_a_job_that_kills_its_worker_every_time_is_given_up_alone():
    ex = make_executor("process", workers=2, max_retries=1)
    outs = _run(ex, jobs.always_die, [0, 1, 2])
    assert outs[0].error is not None and outs[0].error.type == "WorkerDied"
    assert "given up after 1 retries" in outs[0].error.message
    assert [o.value for o in outs[1:]] == [1, 2] and all(o.error is None for o in outs[1:])


def test_process_workers_ignore_ctrl_c_which_the_driver_handles():
    # a terminal's Ctrl-C reaches every process of the group: a worker it stopped printed
    # multiprocessing's traceback, or cut the result it was writing in half
    outs = _run(make_executor("process", workers=2), jobs.sigint_ignored, [0, 1])
    assert [o.value for o in outs] == [True, True]
    assert jobs.sigint_ignored(0) is False  # the driver's own Ctrl-C stands


HALF_A_RESULT = """
import os, struct, time
from context_forensics.executors.local import ProcessExecutor
if __name__ == "__main__":
    ex = ProcessExecutor(1)
    assert [o.value for o in ex.run(abs, [-1])] == [1]
    # what a worker stopped while writing its result leaves: a header for 1,000 bytes, then 10
    os.write(ex._pool._result_queue._writer.fileno(), struct.pack("!i", 1000) + b"x" * 10)
    time.sleep(1)  # the pool's manager thread has read the header and waits for the rest
    ex.cancel()
    print("cancelled", flush=True)
"""


def test_a_cancelled_process_pool_lets_the_interpreter_exit_with_half_a_result_in_its_pipe(tmp_path):
    # An audit interrupted by Ctrl-C (which reaches its workers too) wrote its report, then hung at
    # exit forever: the pool's manager thread waited for the rest of a result its dead worker had
    # begun to write, and the interpreter's exit joins that thread.
    import subprocess

    script = tmp_path / "half.py"
    script.write_text(HALF_A_RESULT)
    try:
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit within 120 s of cancelling its pool")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cancelled"


def test_unknown_executor_and_stray_ray_address_are_usage_errors():
    with pytest.raises(UsageError, match="unknown executor"):
        make_executor("threads")
    with pytest.raises(UsageError, match="--ray-address is for --executor ray"):
        make_executor("process", ray_address="auto")


def test_a_missing_ray_extra_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(UsageError) as e:
        make_executor("ray")
    assert 'pip install "context-forensics[ray]"' in e.value.hint


@pytest.mark.integration
def test_ray_runs_jobs_in_order_and_a_raising_job_is_an_error(ray_cluster):
    ex = make_executor("ray")
    outs = _run(ex, jobs.square, list(range(6)))
    assert ex.workers == 2 and ex.describe()["name"] == "ray"
    assert [o.value for o in outs] == [0, 1, 4, None, 16, 25]
    assert outs[3].error.type == "ValueError"
    assert ray_cluster.is_initialized()  # an executor does not stop a Ray it did not start


@pytest.mark.integration
def test_ray_retries_a_killed_worker_and_counts_it(ray_cluster, tmp_path):
    ex = make_executor("ray")
    outs = _run(ex, jobs.die_once, [(str(tmp_path), n) for n in range(4)])
    assert [o.value for o in outs] == [0, 10, 20, 30]
    assert outs[1].attempts == 2 and ex.retries == 1


def test_token_counting_uses_one_thread_for_a_small_batch_and_every_core_for_a_large_one(monkeypatch):
    from context_forensics.tokens.encodings import PARALLEL_CHARS, _count_threads

    monkeypatch.delenv("CTXF_COUNT_THREADS", raising=False)
    assert _count_threads(["a" * 300] * 50) == 1
    assert _count_threads(["a" * 1000] * (PARALLEL_CHARS // 1000)) == 0
    monkeypatch.setenv("CTXF_COUNT_THREADS", "1")
    assert _count_threads(["a" * 1000] * (PARALLEL_CHARS // 1000)) == 1


def test_process_workers_own_one_cpu_each(monkeypatch):
    # a worker counts every batch on its own thread and sizes OMP's pool to one, unless the user
    # set it; this process (the driver) keeps counting large batches on every core
    monkeypatch.delenv("CTXF_COUNT_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    outs = _run(make_executor("process", workers=2), jobs.thread_settings, [0, 1])
    assert [o.value for o in outs] == [("1", "1", 1)] * 2
    assert jobs.thread_settings(0) == (None, None, 0)


def test_ray_workers_own_one_cpu_each(ray_cluster):
    outs = _run(make_executor("ray", workers=2), jobs.thread_settings, [0, 1])
    assert [o.value[0::2] for o in outs] == [("1", 1)] * 2
