"""``ctxf view`` pages in a real browser: Debian's Chromium driven by Playwright (no browser
download: ``executable_path`` is the system's). Each test loads a page written by the command,
acts as a user would (clicks, keys, a deep link, the search box) and checks what the page shows
against ``ctxf replay --at`` for the same step."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import context_forensics as ctxf
from context_forensics.cli import app
from helpers import COMPACTED, FIXTURES, OVERFLOW, PAIR_BAD as BAD, PAIR_GOOD as GOOD

playwright = pytest.importorskip("playwright.sync_api",
                                 reason="the playwright package is not installed (pip install -e '.[dev]')")

XSS = FIXTURES / "view" / "xss.openai.json"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def run(*args):
    r = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian package: chromium; .ci/run installs it)")
    os.environ.setdefault("TMPDIR", "/tmp")  # Chromium's socket path must stay short
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture()
def open_page(browser):
    """Open a page file (with a hash) and fail on any script error or any request but the file."""
    pages = []

    def _open(path: Path, fragment: str = "", width: int = 1400):
        page = browser.new_page(viewport={"width": width, "height": 900})
        errors, requests = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("request", lambda r: requests.append(r.url))
        page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
        page.goto(path.as_uri() + fragment)
        page.wait_for_selector("body[data-ready='1']")
        page.errors, page.requests = errors, requests
        pages.append(page)
        return page

    yield _open
    for page in pages:
        assert page.errors == [], page.errors
        assert all(u.startswith("file://") for u in page.requests), page.requests  # nothing fetched
        page.close()


def panel_rows(page, panel: int = 0) -> list[tuple[int, str]]:
    """Every message row of a window panel as (seq, state), collapsed runs expanded first."""
    sel = f"#panels .panel >> nth={panel}"
    while page.locator(f"{sel} >> .group button").count():
        page.locator(f"{sel} >> .group button").first.click()
    return [(int(r.get_attribute("data-seq")), r.get_attribute("data-state"))
            for r in page.locator(f"{sel} >> .row[data-seq]").all()]


def replay_at(db, step, model=None):
    w = ctxf.window(OVERFLOW, step, model=model, policy=None if model else "recorded", db=db).to_dict()
    return [(m["seq"], m["state"]) for m in w["messages"]]


def step_of(page, panel: int = 0) -> int:
    return int(page.locator("#panels .panel .phead").nth(panel).get_attribute("data-step"))


@pytest.fixture(scope="module")
def overflow_page(tmp_path_factory):
    d = tmp_path_factory.mktemp("view")
    db, out = d / "v.db", d / "overflow.html"
    run("view", OVERFLOW, "-m", "gemma-7b", "--db", db, "-o", out)
    return db, out


def test_clicking_a_step_shows_the_window_replay_at_prints(open_page, overflow_page):
    db, out = overflow_page
    page = open_page(out, "#model=gemma-7b")
    canvas = page.locator("canvas#tl")
    box = canvas.bounding_box()
    bars = {r["model"]: r for r in page.evaluate("ctxfView.rows()") if r["kind"] == "util"}
    assert list(bars) == ["gpt-4o-mini", "gemma-7b"]  # the recorded replay's row first
    rec = bars["gpt-4o-mini"]
    for step in (3, 7, 10):
        x = page.evaluate(f"ctxfView.xOf(0, {step})")
        canvas.click(position={"x": x, "y": rec["y"] + rec["h"] / 2})
        assert step_of(page) == step
        assert page.locator("#panels .panel").first.get_attribute("data-model") == "gpt-4o-mini"
        assert panel_rows(page) == replay_at(db, step)
    # a click on the gemma row of the timeline selects that model
    g = bars["gemma-7b"]
    canvas.click(position={"x": page.evaluate("ctxfView.xOf(0, 8)"), "y": g["y"] + g["h"] / 2})
    assert page.locator("#panels .panel").first.get_attribute("data-model") == "gemma-7b"
    assert step_of(page) == 8 and panel_rows(page) == replay_at(db, 8, "gemma-7b")
    evicted = [s for s, st in panel_rows(page) if st == "evicted"]
    assert evicted  # gemma-7b's 8k window has lost messages by step 8
    assert box["width"] > 1000


def test_arrow_keys_home_and_end_move_through_the_steps(open_page, overflow_page):
    db, out = overflow_page
    page = open_page(out, "#step=5")
    assert step_of(page) == 5
    page.locator("canvas#tl").focus()
    page.keyboard.press("ArrowRight")
    assert step_of(page) == 6 and panel_rows(page) == replay_at(db, 6)
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert step_of(page) == 4
    page.keyboard.press("End")
    assert step_of(page) == 12 and "step=12" in page.evaluate("location.hash")
    page.keyboard.press("Home")
    assert step_of(page) == 1 and panel_rows(page) == replay_at(db, 1)
    page.keyboard.press("ArrowLeft")  # no step 0
    assert step_of(page) == 1


def test_keyboard_only(open_page, overflow_page):
    """From the page's load, Tab reaches the timeline and every move is a key."""
    db, out = overflow_page
    page = open_page(out)
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id") == "tl":
            break
    assert page.evaluate("document.activeElement.id") == "tl"
    page.keyboard.press("Home")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    assert step_of(page) == 4 and panel_rows(page) == replay_at(db, 4)
    page.keyboard.press("/")  # to the search box, type, Enter jumps to the first step it is in
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("apply_discount")
    page.keyboard.press("Enter")
    assert page.locator("#hits .hit").count() >= 1
    page.keyboard.press("Escape")
    page.keyboard.press("End")
    assert step_of(page) == 12


def test_a_deep_link_opens_at_that_state(open_page, overflow_page, tmp_path, monkeypatch):
    from context_forensics.embed import HashingEmbedder

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: HashingEmbedder())
    db, _ = overflow_page
    out = tmp_path / "facts.html"
    fact = "Add tiered discounts (5% over 100 EUR, 10% over 500 EUR)"
    run("view", OVERFLOW, "-m", "gemma-7b", "--fact", "Never modify files under tests/", "--fact", fact,
        "--db", db, "-o", out)
    page = open_page(out, "#step=9&model=gemma-7b&fact=2")
    assert step_of(page) == 9
    assert page.locator("#panels .panel").count() == 1
    assert page.locator("#panels .panel").get_attribute("data-model") == "gemma-7b"
    assert panel_rows(page) == replay_at(db, 9, "gemma-7b")
    assert page.locator("#facts button.on").get_attribute("data-fact") == "2"
    gone = ctxf.facts(OVERFLOW, [fact], model="gemma-7b", db=db).to_dict()["facts"][0]
    state = {t["step"]: t["state"] for t in gone["timeline"]}[9]
    assert f"fact 2 at this step: {state.replace('_', ' ')}" in \
        page.locator("#panels .panel .change").all_text_contents()[1]
    # the page writes the state it is in back to the address: a link to this exact moment
    page.keyboard.press("ArrowRight")
    assert page.evaluate("location.hash") == "#step=10&model=gemma-7b&fact=2"
    # side by side: both models' windows at the same step
    page2 = open_page(out, "#step=9&layout=side")
    assert page2.locator("#panels .panel").count() == 2
    assert [page2.locator("#panels .panel").nth(i).get_attribute("data-model") for i in (0, 1)] == \
        ["gpt-4o-mini", "gemma-7b"]
    assert panel_rows(page2, 1) == replay_at(db, 9, "gemma-7b") and panel_rows(page2, 0) == replay_at(db, 9)


def test_search_jumps_to_where_a_text_was_and_where_it_left(open_page, overflow_page):
    db, out = overflow_page
    page = open_page(out, "#model=gemma-7b")
    page.fill("#q", "Let me look at the layout first")
    page.press("#q", "Enter")
    (hit,) = page.locator("#hits .hit").all()
    assert "seq 2" in hit.text_content()
    buttons = hit.locator("button").all()
    assert [b.text_content() for b in buttons] == ["steps 2–6", "evicted at step 7"]
    buttons[1].click()
    assert step_of(page) == 7
    assert dict(panel_rows(page))[2] == "evicted"
    assert page.locator("#panels .row.focus").get_attribute("data-seq") == "2"
    buttons = page.locator("#hits .hit button").all()
    buttons[0].click()
    assert step_of(page) == 2 and dict(panel_rows(page))[2] == "kept"
    assert "q=Let" in page.evaluate("location.hash")


def test_log_payloads_are_text_in_the_browser(open_page, tmp_path):
    out = tmp_path / "x.html"
    run("view", XSS, "--db", tmp_path / "x.db", "-o", out)
    page = open_page(out, "#step=7")
    for b in page.locator("button.more").all():
        b.click()
    assert page.evaluate("window.__pwned") is None and page.evaluate("parent.__pwned") is None
    assert page.locator("script").count() == 2  # the data block and the page's own script
    assert page.locator("img, iframe, svg, a, body style, link, [onerror], [onload], [onmouseover], "
                        "[href]").count() == 0
    text = page.locator("#panels").text_content()
    assert "<script>window.__pwned = 1; alert('script')</script>" in text
    assert '<img src=x onerror="window.__pwned = 2">' in text and "javascript:window.__pwned=3" in text
    assert page.title().startswith("ctxf view: Fix the bug. <img src=x onerror=")


def test_the_divergence_view(open_page, tmp_path):
    out = tmp_path / "d.html"
    db = tmp_path / "d.db"
    run("view", GOOD, BAD, "--db", db, "-o", out)
    d = ctxf.diverge(GOOD, BAD, db=db).to_dict()
    page = open_page(out)
    earliest = page.locator("table.aligned tr.earliest")
    assert earliest.get_attribute("data-row") == str(d["divergence"]["row"])
    decisive = page.locator("table.aligned tr.decisive")
    assert decisive.count() == 1
    # each run's window at the divergence, side by side
    assert page.locator("#panels .panel").count() == 2
    assert (step_of(page, 0), step_of(page, 1)) == (d["divergence"]["a_step"], d["divergence"]["b_step"])
    for i, log in enumerate((GOOD, BAD)):
        w = ctxf.window(log, step_of(page, i), policy="recorded", db=db).to_dict()
        assert panel_rows(page, i) == [(m["seq"], m["state"]) for m in w["messages"]]
    last = len(d["aligned"]) - 1
    page.locator(f"table.aligned tr[data-row='{last}']").click()
    row = d["aligned"][last]
    assert (step_of(page, 0), step_of(page, 1)) == (row["a_step"] or step_of(page, 0),
                                                    row["b_step"] or step_of(page, 1))
    assert "row=" + str(last) in page.evaluate("location.hash")
    page.keyboard.press("Home")
    assert page.locator("table.aligned tr.sel").get_attribute("data-row") == "0"


def test_a_recorded_compaction_shows_its_figures_and_summary(open_page, tmp_path):
    log = COMPACTED
    if not log.exists():
        pytest.skip(f"corpus file not available: {log}")
    out, db = tmp_path / "c.html", tmp_path / "c.db"
    run("view", log, "--db", db, "-o", out)
    rep = ctxf.replay(log, db=db).to_dict()["replays"][0]
    step = rep["summary"]["compaction_steps"][0]
    (ev,) = [e for e in rep["steps"][step - 1]["events"] if e["type"] == "compaction"]
    page = open_page(out, f"#step={step}")
    li = page.locator("#panels .events li.ev-compaction")
    assert f"{ev['tokens_before']:,} → {ev['tokens_after']:,} tokens" in li.text_content()
    assert "compaction (recorded)" in li.text_content()
    summary = li.locator(".summary")
    assert "This session is being continued" in summary.text_content()
    summary.locator("button.more").click()  # whole on expand
    msgs = json.loads(run("show", log, "--db", db, "--json").stdout)["messages"]
    assert msgs[ev["at"] + 1]["text"] in summary.text_content()
    rows = dict(panel_rows(page))
    assert sum(1 for s in rows.values() if s == "summarized") == ev["summarized"]


def test_a_session_without_model_calls_says_so(open_page, tmp_path):
    log = tmp_path / "zero.openai.json"
    log.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}))
    out = tmp_path / "z.html"
    assert "0 steps" in run("view", log, "--db", tmp_path / "z.db", "-o", out).stdout
    page = open_page(out, "#step=3")
    assert page.locator("#panels .panel").text_content() == "gpt-4o: this session has no model call to show"
    page.locator("canvas#tl").focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("End")
    assert page.input_value("#stepin") == "0"
    legend = page.locator("#legend").text_content()
    assert "budget line" in legend and "compaction" not in legend  # only what the page draws


def test_a_session_names_its_subagents_and_a_subagent_its_parent(open_page, tmp_path):
    parent = FIXTURES / "subagents" / "22222222-3333-4444-8555-666666666666.jsonl"
    db = tmp_path / "s.db"
    run("ingest", parent, "--db", db)
    rows = {r["id"]: r for r in json.loads(run("sessions", "--db", db, "--json").stdout)["sessions"]}
    (pid,) = [i for i, r in rows.items() if r["children"]]
    kids = [c["id"] for c in rows[pid]["children"]]
    assert kids and all(rows[k]["parent"]["id"] == pid for k in kids)
    run("view", pid, "--db", db, "-o", tmp_path / "p.html")
    head = open_page(tmp_path / "p.html").locator("#head").text_content()
    assert f"sub-agents ({len(kids)})" in head and all(k in head for k in kids)
    run("view", kids[0], "--db", db, "-o", tmp_path / "c.html")
    head = open_page(tmp_path / "c.html").locator("#head").text_content()
    assert f"started by {pid}" in head
