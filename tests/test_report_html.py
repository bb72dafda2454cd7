"""`ctxf report --html` (issue 13): alike events folded into ranges, the verdict at the top with
the replay's figures, events in words, --fact / --goal, facts and drift under --model, and the
plots (legend, % axis, one step, emoji)."""

from __future__ import annotations

import json
import re
import warnings
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.render.events import event_runs
from context_forensics.render.glyphs import EMOJI
from helpers import FIXTURES

RELEASE = FIXTURES / "facts" / "release.openai.json"  # 10 steps; under "tiny" the first user message goes at step 5
FACTS_CONFIG = FIXTURES / "facts" / "config.yaml"
COMPACTED = FIXTURES / "claude_code" / "session.jsonl"  # a recorded compaction at step 4
EMOJI_CALL = FIXTURES / "report" / "emoji_one_call.openai.json"  # one model call, emoji in the text
BUDGET = "The total budget for cloud spend is 4,500 EUR."


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)



@pytest.fixture()
def wee(tmp_path):
    """FACTS_CONFIG plus "wee": a 60-token window that rejects every call of RELEASE past the first."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(FACTS_CONFIG.read_text().replace(
        "model_mappings:\n", "model_mappings:\n  wee:\n    tokenizer: approx\n    context_limit: 60\n"
                             "    reserved_output: 0\n    eviction_strategy: reject\n", 1))
    return cfg


class Tables(HTMLParser):
    """Every table of a page as rows of cell texts, with the class of the enclosing div."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell, self._div, self._svg = [], None, [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self._svg += 1
        if tag == "div":
            self._div.append(a.get("class"))
        if tag == "table":
            self.tables.append({"div": next((c for c in reversed(self._div) if c), None), "rows": []})
        if tag == "tr":
            self.tables[-1]["rows"].append([])
        if tag in ("td", "th"):
            self._cell = []
        if tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag):
        if tag == "svg":
            self._svg -= 1
        if tag == "div":
            self._div.pop()
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1]["rows"][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None and not self._svg:
            self._cell.append(data)


def tables(page: str) -> list[dict]:
    p = Tables()
    p.feed(page)
    return p.tables


def table_with(page: str, header: str) -> list[list[str]]:
    return next(t["rows"] for t in tables(page) if header in t["rows"][0])


def report(tmp_path, *args, name="r.html"):
    out = tmp_path / name
    r = run("report", *args, "--html", out, "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.output
    return out.read_text()


def replay_json(tmp_path, *args):
    r = run("replay", *args, "--db", tmp_path / "s.db", "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ---------------------------------------------------------------- events folded into ranges


def _step(k, events, lost=()):
    return {"step": k, "message_seq": 2 * k, "events": events, "newly_lost": list(lost)}


def test_alike_steps_fold_into_one_run_with_their_count_and_ranges():
    over = [_step(k, [{"type": "overflow", "would_fail": True, "overflow": 100 + k,
                       "message": f"context length exceeded by {100 + k:,} tokens"}]) for k in range(40, 130)]
    steps = [_step(k, []) for k in range(1, 40)] + over + [_step(130, [{"type": "eviction", "policy": "left_truncation",
                                                                       "count": 2, "first": 3, "last": 4}], [3, 4])]
    runs = event_runs(steps)
    assert [r.step_text() for r in runs] == ["steps 40–129 (90 steps)", "step 130"]
    ((label, detail),) = runs[0].words()
    assert label == "overflow ✗ would fail"
    assert detail.startswith("context length exceeded by 140–229 tokens")  # the range the figure took
    ((label, detail),) = runs[1].words()
    assert detail == "left_truncation dropped the oldest 2 messages (messages 3–4)"


def test_an_other_event_between_alike_steps_breaks_the_run_and_gaps_are_said():
    ev = {"type": "eviction", "policy": "left_truncation", "count": 1, "first": 1, "last": 1}
    clear = {"type": "clearing", "policy": "recorded", "recorded": True, "count": 1, "first": 2, "last": 2}
    steps = [_step(1, [ev]), _step(3, [dict(ev, first=2, last=2)]), _step(4, [clear]), _step(5, [ev])]
    runs = event_runs(steps)
    assert [r.step_text() for r in runs] == ["2 steps in 1–3", "step 4", "step 5"]
    assert runs[0].words()[0][1] == "left_truncation dropped the oldest 2 messages (messages 1–2)"  # counts add up


def test_the_report_shows_n_identical_overflow_steps_as_one_row_saying_n(tmp_path, wee, hashing):
    data = replay_json(tmp_path, RELEASE, "--config", wee, "--model", "wee")
    over = data["replays"][0]["summary"]["overflow_steps"]
    assert len(over) >= 5 and over == list(range(over[0], over[-1] + 1))  # a run to fold
    page = report(tmp_path, RELEASE, "--config", wee, "--model", "wee")
    rows = [r for r in table_with(page, "what happened")[1:] if r[0] == "wee"]
    assert len(rows) == 1, rows  # one row, not one per step
    assert rows[0][1] == f"steps {over[0]}–{over[-1]} ({len(over)} steps)"
    assert rows[0][3] == "overflow ✗ would fail"


# ---------------------------------------------------------------- the verdict


def test_the_verdict_comes_first_and_its_figures_are_the_replays(tmp_path, wee, hashing):
    page = report(tmp_path, RELEASE, "--config", wee, "--model", "wee", "--model", "tiny")
    assert page.index("Verdict") < page.index("Context window utilization") < page.index("Eviction and compaction")
    rows = table_with(page, "first loss")
    assert rows[0][:5] == ["replay", "first loss", "overflows", "compactions", "would fail"]
    want = {f"{r['model']} ({r['policy']})": r for r in replay_json(tmp_path, RELEASE, "--config", wee)["replays"]
            + replay_json(tmp_path, RELEASE, "--config", wee, "--model", "wee", "--model", "tiny")["replays"]}
    assert [row[0] for row in rows[1:]] == list(want) and len(want) == 3
    for row in rows[1:]:
        name = row[0].split(" (")[0]
        r = want[row[0]]
        s = r["summary"]
        first = re.match(r"step (\d+)", row[1])
        assert (int(first.group(1)) if first else None) == s["first_loss_step"]
        over = re.match(r"(\d+) step\(s\), from step (\d+)", row[2])
        assert (over and [int(over.group(1)), int(over.group(2))]) == (
            s["overflow_steps"] and [len(s["overflow_steps"]),
                                     s["overflow_steps"][0]]) or (not over and not s["overflow_steps"])
        comp = re.match(r"(\d+) ", row[3])
        assert (int(comp.group(1)) if comp else 0) == s["compactions"]
        fail = re.match(r"(\d+) step\(s\)", row[4])
        assert (int(fail.group(1)) if fail else 0) == len(s["would_fail_steps"])
        # where the figures come from, and the estimate label on the token-based ones
        assert f"replay under {name}, {r['policy']} policy" in row[5] and f"tokens {r['token_kind']}" in row[5]
        if r["token_kind"] == "estimated" and s["first_loss_step"]:
            assert "(estimated)" in row[1]
    assert "Facts:" in page and "Drift:" in page


def test_the_verdict_counts_a_recorded_compaction(tmp_path, hashing):
    s = replay_json(tmp_path, COMPACTED)["replays"][0]["summary"]
    assert s["compactions"] == 1
    rows = table_with(report(tmp_path, COMPACTED), "first loss")
    assert rows[1][3] == f"1 (recorded) at step(s) {s['compaction_steps'][0]}"
    # the loss is the log's own record, not a token estimate (the window's figures are calibrated)
    assert s["first_loss_step"] == s["compaction_steps"][0] and rows[1][1] == f"step {s['first_loss_step']} (recorded)"


# ---------------------------------------------------------------- words, not dicts


def test_event_details_are_words_not_dict_dumps(tmp_path, wee, hashing):
    # a recorded compaction, a simulated one (its trigger is a dict), evictions, overflows
    pages = [report(tmp_path, COMPACTED, name="a.html"),
             report(tmp_path, RELEASE, "--config", wee, "--model", "tiny-compact", "--model", "tiny", "--model", "wee",
                    name="b.html")]
    for page in pages:
        body = re.sub(r"<svg.*?</svg>", "", page, flags=re.S)
        assert "{'" not in body and "':" not in body and "={" not in body
        assert "=" not in " ".join(r[4] for r in table_with(page, "what happened")[1:])
    details = " ".join(r[4] for r in table_with(pages[1], "what happened")[1:])
    assert "summarized the history" in details and "dropped the oldest" in details
    assert "the provider would reject this call" in details
    assert "the log records a compaction at message" in " ".join(r[4]
                                                                 for r in table_with(pages[0], "what happened")[1:])


# ---------------------------------------------------------------- --fact, --goal, --model


def _fact_row(page: str, fact: str) -> list[str]:
    return next(r for r in table_with(page, "left at step") if r[0] == fact)


def test_fact_and_goal_options_make_their_sections(tmp_path, hashing):
    goal = "Ship the hotfix for the rounding bug through a pull request"
    page = report(tmp_path, RELEASE, "--config", FACTS_CONFIG, "--model", "tiny", "--fact", BUDGET,
                  "--fact", "Never push directly to the main branch", "--goal", goal)
    head = table_with(page, "left at step")[0]
    assert head == ["fact", "first in window", "last present", "left at step", "how it left", "at the last step"]
    row = _fact_row(page, BUDGET)
    assert row[3] == "5" and "left_truncation dropped the oldest" in row[4] and row[5] == "gone"
    assert "Facts: when each left the window (under tiny, left_truncation)" in page
    assert f"Goal: <em>{goal}</em>" in page and "goal: --goal" in page
    # --fact adds to the config's facts: list, as `ctxf facts --fact` does
    assert re.search(r"<b>Facts:</b> \d of 3 fact\(s\) left the window, the first at step 5", page)


def test_model_moves_the_facts_departure_to_that_models_window(tmp_path, hashing):
    from context_forensics import api

    recorded = report(tmp_path, RELEASE, "--config", FACTS_CONFIG, "--fact", BUDGET, name="rec.html")
    tiny = report(tmp_path, RELEASE, "--config", FACTS_CONFIG, "--fact", BUDGET, "--model", "tiny", name="tiny.html")
    want = {m: [d["step"] for d in api.facts(RELEASE, BUDGET, model=m, db=tmp_path / "s.db",
                                             config=FACTS_CONFIG).to_dict()["facts"][0]["departures"]]
            for m in (None, "tiny")}
    assert want[None] != want["tiny"]  # the model's window differs: the test means something
    assert _fact_row(recorded, BUDGET)[3] == (", ".join(map(str, want[None])) or "never")
    assert _fact_row(tiny, BUDGET)[3] == ", ".join(map(str, want["tiny"]))
    # drift follows the model too: its goal leaves tiny's window, never the recorded one
    assert "drift curve under tiny (left_truncation)" in tiny and "drift curve under tiny (recorded)" in recorded


@pytest.mark.integration
def test_model_moves_the_facts_departure_with_the_real_embedder(tmp_path, minilm):
    recorded = report(tmp_path, RELEASE, "--config", FACTS_CONFIG, "--fact", BUDGET, name="rec.html")
    tiny = report(tmp_path, RELEASE, "--config", FACTS_CONFIG, "--fact", BUDGET, "--model", "tiny", name="tiny.html")
    assert _fact_row(recorded, BUDGET)[3] == "never" and _fact_row(recorded, BUDGET)[5] == "present"
    assert _fact_row(tiny, BUDGET)[3] == "5" and _fact_row(tiny, BUDGET)[5] == "gone"


# ---------------------------------------------------------------- plots


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", page, flags=re.S)


def test_utilization_svg_names_budget_and_events_in_its_legend_and_its_axis_in_percent(tmp_path, wee, hashing):
    page = report(tmp_path, RELEASE, "--config", wee, "--model", "tiny-compact", "--model", "tiny", "--model", "wee")
    svg = _svgs(page)[0]
    legend = svg[svg.index('id="legend_1"'):]
    # matplotlib draws text as paths and keeps each string as a comment
    texts = re.findall(r"<!-- (.*?) -->", legend)
    assert any(t.startswith("budget tiny: limit − reserved output") for t in texts), texts
    assert "compaction" in texts and "overflow" in texts and "eviction" in texts
    assert any(t.startswith("alert threshold (") for t in texts)
    ticks = re.findall(r"<!-- (\d+%) -->", svg[:svg.index('id="legend_1"')])
    assert ticks[0] == "0%" and len(ticks) >= 3, ticks  # 0% up to the what-if's peak (above 100%)
    assert "window / context limit (%)" in svg


def test_a_one_step_session_draws_no_empty_curve(tmp_path, hashing):
    page = report(tmp_path, EMOJI_CALL)
    util = page[page.index("Context window utilization"):page.index("Eviction and compaction")]
    assert "<svg" not in util and "One model call: under gpt-4o (recorded) its window held" in util
    from context_forensics.render.plots import utilization_plot

    rep = replay_json(tmp_path, EMOJI_CALL)["replays"][0]
    fig = utilization_plot(None, [rep])
    line = fig.axes[0].lines[0]
    assert len(line.get_xdata()) == 1 and line.get_marker() == "o"  # a point you can see
    lo, hi = fig.axes[0].get_xlim()
    assert lo < 1 < hi
    png = tmp_path / "one.png"
    assert utilization_plot(png, [rep]) == png and png.stat().st_size > 0


# ---------------------------------------------------------------- emoji


def test_emoji_in_plot_labels_are_named_and_draw_without_missing_glyphs():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from context_forensics.render.plots import label

    text = label("ship 🚀 ✅ 👍🏽 done ⚠ ✓ $x$ 中")
    assert text.startswith("ship [rocket] [white heavy check mark] [thumbs up sign, medium skin tone] done ⚠ ✓")
    assert r"\$x\$" in text and "□" in text  # a glyph the font lacks is a box, said, not warned
    fig, ax = plt.subplots()
    ax.set_title(text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    plt.close(fig)
    assert not [w for w in caught if "missing from" in str(w.message)], [str(w.message) for w in caught]


def test_emoji_in_log_text_are_shown_by_name_in_the_html(tmp_path, hashing):
    page = report(tmp_path, EMOJI_CALL)
    assert not EMOJI.search(page)  # no emoji left to draw as an empty box where no emoji font is
    assert "<span class='emoji' title='emoji U+1F680'>[rocket]</span>" in page
    assert "[flag FR]" in page and "[thumbs up sign, medium skin tone]" in page
    assert "⚠ and ✓ stay as text" in page  # text-presentation symbols stay (text fonts draw them)


def test_the_emoji_page_renders_in_headless_chromium(tmp_path, hashing):
    import os
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package: chromium)")
    out, shot = tmp_path / "e.html", tmp_path / "e.png"
    out.write_text(report(tmp_path, EMOJI_CALL))
    env = {**os.environ, "TMPDIR": "/tmp"} if os.path.isdir("/tmp") else None
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1100,900", out.as_uri()], check=True, capture_output=True, timeout=120, env=env)
    from PIL import Image

    img = Image.open(shot).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 100 and len(img.getcolors(maxcolors=1 << 16) or []) > 20
