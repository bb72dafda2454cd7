"""Golden files for human-facing output (fixed width, no colour, ids scrubbed).

Regenerate after an intended change with:  CTXF_REGEN_GOLDEN=1 pytest tests/test_golden.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app

GOLDEN = Path(__file__).parent / "golden"
SAMPLES = Path(__file__).parent.parent / "sample_logs"
ID = re.compile(r"\b[0-9a-f]{12}\b")
SOURCE = re.compile(r"^source\s+(.*?\n)(?=messages )", re.M | re.S)

CASES = {
    "replay_overflow_whatif": ["replay", SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json",
                               "--model", "gemma-7b", "--model", "gpt-4o-mini"],
    "replay_overflow_at_8": ["replay", SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json",
                             "--model", "gemma-7b", "--at", "8"],
    "show_pair_failure": ["show", SAMPLES / "pair-csv-bom" / "failure" / "acme__csvtool-42.traj.json"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "110")
    monkeypatch.setenv("NO_COLOR", "1")
    r = CliRunner().invoke(app, [str(a) for a in CASES[name]] + ["--db", str(tmp_path / "s.db")])
    assert r.exit_code == 0, r.stderr
    # Scrub what depends on the machine: ids (hashes of the path), the checkout's path, and the
    # trailing padding a longer or shorter path leaves on its neighbours.
    out = r.stdout
    # `show` prints the source path whole, folded over as many lines as the checkout's path
    # needs: check it is all there, then compare the rest against the golden file.
    m = SOURCE.search(out)
    if m:
        assert "".join(part.strip() for part in m.group(1).splitlines()) == str(Path(CASES[name][1]).resolve())
        out = out[: m.start(1)] + "<source>\n" + out[m.end(1):]
    out = ID.sub("<id>", out.replace(str(SAMPLES.parent.resolve()), "<repo>"))
    out = "\n".join(line.rstrip() for line in out.splitlines()) + "\n"
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("CTXF_REGEN_GOLDEN"):
        path.write_text(out)
    assert path.exists(), f"no golden file {path}; run with CTXF_REGEN_GOLDEN=1"
    assert out == path.read_text()
