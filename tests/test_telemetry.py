"""No telemetry, nothing about the user written outside ctxf's store and cache (issue 31).

onnxruntime 1.2x+ queues telemetry events under ``~/.cache/Microsoft/DeveloperTools/.onnxruntime/``
from the moment its module loads, unless ``ORT_DISABLE_TELEMETRY=1`` is set before the import;
matplotlib writes ``~/.config/matplotlib`` and ``~/.cache/matplotlib``. Each command that embeds
or plots runs here in a fresh HOME (the real command line, a subprocess) and the tree it leaves
under HOME is read back: only ``~/.cache/ctxf`` (ctxf's documented cache) may appear.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
OVERFLOW = ROOT / "sample_logs" / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
DRIFT = ROOT / "sample_logs" / "drift-chat" / "cover-letter-drift.sharegpt.json"

pytestmark = pytest.mark.integration


def _run(home: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CTXF_CACHE_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MPLCONFIGDIR",
                        "ORT_DISABLE_TELEMETRY", "HF_HUB_DISABLE_TELEMETRY", "DO_NOT_TRACK")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), COLUMNS="80")
    return subprocess.run([sys.executable, "-m", "context_forensics", *args, "--db", str(work / "c.db")],
                          cwd=work, env=env, capture_output=True, text=True, timeout=600)


def _tree(home: Path) -> set[str]:
    return {str(p.relative_to(home)) for p in home.rglob("*")}


def test_embedding_and_plotting_write_nothing_under_home_but_ctxfs_cache(tmp_path):
    from context_forensics.tokens.assets import cache_dir

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (home / ".cache" / "ctxf").mkdir(parents=True)
    real = cache_dir() / "onnx"
    if real.is_dir():  # the ONNX export made once (10 s of torch): reused, as a user's second run would
        shutil.copytree(real, home / ".cache" / "ctxf" / "onnx")
    before = _tree(home)
    runs = [
        _run(home, work, "facts", str(OVERFLOW), "--fact", "Do not touch the tests.", "-m", "gemma-7b",
             "--plot", str(work / "f.png")),
        _run(home, work, "drift", str(DRIFT), "--plot", str(work / "d.png")),
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert "embedded" in runs[0].stdout  # the command did embed (onnxruntime or torch loaded)
    new = _tree(home) - before
    outside = sorted(p for p in new if not (p + "/").startswith(".cache/ctxf/") and p not in (".cache", ".cache/ctxf"))
    assert outside == [], outside
    assert not (home / ".cache" / "Microsoft").exists()


def _python_without_switches(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter on this checkout, none of the telemetry switches set; it must succeed."""
    from context_forensics.tokens.assets import NO_TELEMETRY

    env = {k: v for k, v in os.environ.items() if k not in NO_TELEMETRY}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def test_onnxruntime_imported_by_someone_else_first_is_switched_off_and_said():
    pytest.importorskip("onnxruntime")
    code = ("import os, onnxruntime\n"
            "from context_forensics.embed.onnx_backend import _onnxruntime\n"
            "_onnxruntime(); _onnxruntime()\n"
            "print([os.environ.get(k) for k in ('ORT_DISABLE_TELEMETRY', 'HF_HUB_DISABLE_TELEMETRY', "
            "'DO_NOT_TRACK')])\n")
    r = _python_without_switches(code)
    assert r.stdout.strip() == "[None, None, None]"  # switched off through the API; the environment left alone
    assert r.stderr.count("imported before ctxf could switch its telemetry off") == 1


def test_telemetry_switches_are_forced_even_when_the_environment_says_otherwise(monkeypatch):
    from context_forensics.tokens import assets

    monkeypatch.setenv("ORT_DISABLE_TELEMETRY", "0")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "0")
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)  # restored after the test
    with assets.offline_env():
        assert os.environ["ORT_DISABLE_TELEMETRY"] == "1" and os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
        assert os.environ["DO_NOT_TRACK"] == "1"
    # after the block, as the host had them
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "0" and os.environ["HF_HUB_DISABLE_TELEMETRY"] == "0"
    assert "DO_NOT_TRACK" not in os.environ


def test_ctxfs_own_import_is_not_taken_for_someone_elses_on_the_next_call():
    """The switch is set for ctxf's import only; a second call finds onnxruntime imported (by ctxf)
    and must not say it came too late."""
    pytest.importorskip("onnxruntime")
    code = ("from context_forensics.embed.onnx_backend import _onnxruntime\n"
            "_onnxruntime(); _onnxruntime(); _onnxruntime()\n")
    assert "imported before ctxf" not in _python_without_switches(code).stderr
