"""Offline always: no command opens a network socket, traced with strace.

Every command runs as a user would run it (the installed console script, the real tokenizer and
MiniLM model, plots and the HTML report written), under ``strace -f`` tracing the socket calls
of the process and all its children (audit's worker processes included). The only socket
allowed is glibc's local name-service lookup (an AF_UNIX connect to nscd, made when a library
asks for the user name); anything else — AF_INET, AF_INET6, netlink, any other AF_UNIX path — is
a failure, as is any connect or sendto to a non-local address.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SAMPLES = ROOT / "sample_logs"
OVERFLOW = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
DRIFT = SAMPLES / "drift-chat" / "cover-letter-drift.sharegpt.json"
PAIR = SAMPLES / "pair-csv-bom"
PAIRS = ROOT / "tests" / "fixtures" / "facts" / "pairs.csv"
CTXF = Path(sys.executable).with_name("ctxf")
NSCD = re.compile(r'sun_path="/(var/)?run/nscd/socket"')

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (.ci/run installs it)"),
]


def _commands(tmp: Path) -> list[list[str]]:
    ov, dr = str(OVERFLOW), str(DRIFT)
    return [
        ["--help"],
        ["formats"],
        ["models"],
        ["config", "show"],
        ["config", "check"],
        ["ingest", str(SAMPLES), "--recursive"],
        ["sessions"],
        ["show", ov],
        ["replay", ov],
        ["replay", ov, "-m", "gemma-7b", "-m", "gpt-4o-mini", "--plot", str(tmp / "util.png")],
        ["replay", ov, "--at", "7", "-m", "gemma-7b"],
        # the vendor vocabularies: tekken v3, SentencePiece v1, the tekken stand-in, DeepSeek's tokenizer.json
        ["replay", ov, "-m", "mistral-nemo", "-m", "mistral-7b", "-m", "mistral-large", "-m", "deepseek-chat"],
        ["facts", ov, "--fact", "Do not touch the tests.", "-m", "gemma-7b", "--plot", str(tmp / "facts.png")],
        ["facts", "suggest", ov],
        ["drift", dr, "--plot", str(tmp / "drift.png")],
        ["diverge", str(PAIR / "success" / "acme__csvtool-42.traj.json"),
         str(PAIR / "failure" / "acme__csvtool-42.traj.json")],
        ["diverge", "--all-tasks"],
        ["audit", str(SAMPLES), "--workers", "2", "--junit", str(tmp / "a.xml"), "--markdown", str(tmp / "a.md")],
        ["report", ov, "--html", str(tmp / "r.html"), "-m", "gemma-7b"],
        ["view", ov, "-m", "gemma-7b", "--fact", "Do not touch the tests.", "--drift", "-o", str(tmp / "v.html")],
        ["view", str(PAIR / "success" / "acme__csvtool-42.traj.json"),
         str(PAIR / "failure" / "acme__csvtool-42.traj.json"), "-o", str(tmp / "d.html")],
        ["explain", ov, "-m", "gemma-7b", "--fact", "Never modify files under tests/."],
        ["explain", str(PAIR / "failure" / "acme__csvtool-42.traj.json"), "--json"],
        ["calibrate", "--pairs", str(PAIRS)],
        ["check"],
        ["check", ov, "--fact", "Never modify files under tests/.", "--json"],
        ["rm", ov],
    ]


def _sockets(trace: Path) -> list[str]:
    """The traced socket calls that are not the local name-service lookup."""
    bad = []
    for line in trace.read_text(errors="replace").splitlines():
        if not re.search(r"\b(socket|socketpair|connect|sendto|sendmsg|bind)\(", line):
            continue
        if "AF_UNIX" in line and ("socket(" in line or NSCD.search(line)):
            continue  # the AF_UNIX socket glibc opens for nscd, and its connect to nscd
        bad.append(line)
    return bad


def test_no_command_opens_a_network_socket(tmp_path):
    assert CTXF.is_file(), f"the console script is not installed beside {sys.executable}"
    db = tmp_path / "s.db"
    env = {**os.environ, "COLUMNS": "80"}
    for HF in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(HF, None)  # ctxf must set what it needs itself
    for args in _commands(tmp_path):
        trace = tmp_path / "trace.txt"
        full = [*args, "--db", str(db)] if args[0] not in ("--help", "formats", "models", "config") else args
        run = subprocess.run(
            ["strace", "-f", "-qq", "-e", "trace=socket,socketpair,connect,sendto,sendmsg,bind",
             "-o", str(trace), str(CTXF), *full],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )
        assert run.returncode in (0, 3), f"ctxf {' '.join(args)} exited {run.returncode}: {run.stderr[-2000:]}"
        assert _sockets(trace) == [], f"ctxf {' '.join(args)} opened a socket"
    assert (tmp_path / "r.html").stat().st_size > 0 and (tmp_path / "util.png").stat().st_size > 0
    assert (tmp_path / "v.html").stat().st_size > 0 and (tmp_path / "d.html").stat().st_size > 0


def test_the_filter_catches_a_network_socket(tmp_path):
    """The check itself can fail: a process that opens an AF_INET socket is caught."""
    trace = tmp_path / "trace.txt"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=socket,connect", "-o", str(trace), sys.executable, "-c",
                    "import socket; s = socket.socket(); s.close()"], check=True, capture_output=True)
    assert any("AF_INET" in line for line in _sockets(trace))


_LOOPBACK = re.compile(r'inet_addr\("127\.0\.0\.1"\)|inet_pton\(AF_INET6, "(::1|::ffff:127\.0\.0\.1)"')


def _off_loopback(trace: Path) -> list[str]:
    """The traced internet-socket calls (connect, bind, sendto, sendmsg) to an address other than
    loopback."""
    return [line for line in trace.read_text(errors="replace").splitlines()
            if re.search(r"\b(connect|bind|sendto|sendmsg)\(", line) and re.search(r"AF_INET6?\b", line)
            and not _LOOPBACK.search(line)]


def test_the_ray_executor_talks_to_its_local_ray_on_loopback_only(tmp_path):
    """The one command that opens sockets: a local Ray listens and connects on loopback only
    (no 8.8.8.8 address probe, no cloud-metadata request, no port on the machine's address)."""
    pytest.importorskip("ray", reason="the ray extra is not installed")
    trace = tmp_path / "trace.txt"
    run = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=connect,bind,sendto,sendmsg", "-o", str(trace), str(CTXF), "audit",
         str(SAMPLES), "--executor", "ray", "--workers", "1", "--db", str(tmp_path / "s.db"), "--json"],
        cwd=tmp_path, env={**os.environ, "COLUMNS": "80"}, capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 3), run.stderr[-2000:]
    assert '"name": "ray"' in run.stdout
    assert "AF_INET" in trace.read_text()  # it did talk to its Ray: the check below is not vacuous
    assert _off_loopback(trace) == []


def test_the_loopback_filter_catches_another_address(tmp_path):
    trace = tmp_path / "trace.txt"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(trace), sys.executable, "-c",
                    "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('192.0.2.1', 9))"],
                   check=True, capture_output=True)
    assert len(_off_loopback(trace)) == 1
