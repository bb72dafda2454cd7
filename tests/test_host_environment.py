"""ctxf as a library leaves its host's environment as it found it: the switches the libraries it
loads read (tiktoken's cache, Hugging Face offline and telemetry, onnxruntime's telemetry,
matplotlib's folder) are set for the import or load only (``environ.scoped``)."""

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
after = dict(os.environ)
print(json.dumps({"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
                  "changed": sorted(k for k in before if k in after and before[k] != after[k])}))
"""


@pytest.mark.integration
def test_the_api_leaves_the_process_environment_as_it_was(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TIKTOKEN_", "HF_", "TRANSFORMERS_", "ORT_", "MPLCONFIGDIR", "DO_NOT_TRACK",
                                "CTXF_NOTICES"))}
    env["CTXF_CACHE_DIR"] = os.environ.get("CTXF_CACHE_DIR") or str(Path.home() / ".cache" / "ctxf")
    r = subprocess.run([sys.executable, "-c", CODE, str(tmp_path / "s.db"), str(ROOT / "sample_logs" / "drift-chat")],
                       cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    diff = json.loads(r.stdout.strip().splitlines()[-1])
    assert diff == {"added": [], "removed": [], "changed": []}, diff
