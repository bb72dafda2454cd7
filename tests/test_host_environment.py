"""ctxf as a library leaves its host's environment as it found it: the switches the libraries it
loads read (tiktoken's cache, Hugging Face offline and telemetry, onnxruntime's telemetry,
matplotlib's folder, Ray's usage stats and loopback node) are set for the import or load only
(``environ.scoped``), and what its workers take over from it (the notes said once per run) is
handed to them by the executors (``environ.handed``), not through the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

CODE = """
import json, os, sys
before = dict(os.environ)
from context_forensics import api
db = sys.argv[1]
api.ingest([sys.argv[2]], db=db)
ids = [s["id"] for s in api.open_store(db).store.sessions()]
api.replay(ids[0], db=db)                        # token counts: tiktoken / quicktok
api.drift(ids[0], db=db)                         # the embedding model: onnxruntime or torch
from context_forensics.tokens.assets import get_encoding
get_encoding("cl100k_base"); get_encoding("o200k_base")   # tiktoken's own loader
from context_forensics.render.plots import _pyplot
_pyplot()                                        # matplotlib
api.ingest([sys.argv[2]], db="forensics_data/sessions.db")
api.open_store().close()                         # a note said once (the working folder's store)
api.audit([sys.argv[2]], db=db, workers=2, executor="process")   # workers take the notes said over
after = dict(os.environ)
print(json.dumps({"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
                  "changed": sorted(k for k in before if k in after and before[k] != after[k])}))
"""


@pytest.mark.integration
def test_the_api_leaves_the_process_environment_as_it_was(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TIKTOKEN_", "HF_", "TRANSFORMERS_", "ORT_", "MPLCONFIGDIR", "DO_NOT_TRACK"))}
    env["CTXF_CACHE_DIR"] = os.environ.get("CTXF_CACHE_DIR") or str(Path.home() / ".cache" / "ctxf")
    r = subprocess.run([sys.executable, "-c", CODE, str(tmp_path / "s.db"), str(ROOT / "sample_logs" / "drift-chat")],
                       cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.count("note: the store is ./forensics_data/sessions.db, found in the working folder") == 1
    diff = json.loads(r.stdout.strip().splitlines()[-1])
    assert diff == {"added": [], "removed": [], "changed": []}, diff


RAY = """
import json, os
before = dict(os.environ)
from context_forensics.executors import make_executor, in_order
def env_of(name):                                # pickled by value: the workers need no path to it
    return os.environ.get(name)
with make_executor("ray", workers=1) as ex:      # a local Ray: on loopback, no usage stats
    outs = list(in_order(ex.run(env_of, ["RAY_USAGE_STATS_ENABLED", "HTTP_PROXY", "X"])))
after = dict(os.environ)
print(json.dumps({"values": [o.value for o in outs], "errors": [str(o.error) for o in outs if o.error],
                  "added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
                  "changed": sorted(k for k in before if k in after and before[k] != after[k])}))
"""


@pytest.mark.integration
def test_a_ray_executor_run_leaves_the_process_environment_as_it_was(tmp_path):
    """Ray's switches (usage stats off, loopback allowed as a node's address, the run's token)
    are set while ``ray`` is imported and started; its processes took them (a worker reads the
    usage-stats switch off), the host's environment did not keep them."""
    pytest.importorskip("ray", reason="the ray extra is not installed")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RAY_") and k.lower() not in ("http_proxy", "https_proxy", "no_proxy")}
    r = subprocess.run([sys.executable, "-c", RAY], cwd=tmp_path,
                       env={**env, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # Ray's worker has the switches (no usage stats, its one HTTP request refused on loopback)
    assert out["errors"] == [] and out["values"] == ["0", "http://127.0.0.1:9", None], out
    assert {k: out[k] for k in ("added", "removed", "changed")} == {"added": [], "removed": [], "changed": []}, out
