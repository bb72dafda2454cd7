"""`ctxf view` at scale: the page of a generated agent session of 1,000 and 5,000 steps, replayed
under two models, written and opened in headless Chromium.

    python bench/view.py                  # 1,000 and 5,000 steps
    python bench/view.py --steps 1000     # one size
    python bench/view.py --chromium /usr/bin/chromium

Each step is an assistant tool call and its result (tool outputs of 200-3,000 characters, as in
the corpus's coding-agent logs), so a session of N steps holds 2N+2 messages. The page carries
the recorded replay and claude-code's (200k window, auto-compaction: summaries once the history outgrows it).

Columns: the data's build time (replays, parts, messages: `api.view`), the file's size, the time
from navigation to the page's first render at its default step, the last
(`body[data-ready]`, as Chromium reports it on the page's clock), the median time of a step change (→ pressed, panel
rebuilt and timeline drawn; over 30 presses from step 1) and of a jump to the last step. Targets (issue 13): 1,000 steps
open in under 2 s and the file stays under 15 MB; 5,000 steps still open.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import print_table  # first: puts this checkout's package on sys.path

import context_forensics as ctxf
from context_forensics.render.view import write_view

WORDS = ("context window token eviction compaction summary tool result assistant user function argument budget "
         "constraint pipeline replay fact drift divergence error file line test import def return class self").split()


def session(steps: int, seed: int = 7) -> dict:
    rnd = random.Random(seed)

    def text(lo: int, hi: int) -> str:
        n = rnd.randint(lo, hi)
        out, size = [], 0
        while size < n:
            w = rnd.choice(WORDS)
            out.append(w)
            size += len(w) + 1
        return " ".join(out)

    msgs = [{"role": "system", "content": "You are a coding agent. " + text(800, 1500)},
            {"role": "user", "content": "Fix the failing test in the parser. " + text(200, 600)}]
    for i in range(steps - 1):
        cid = f"call_{i}"
        msgs.append({"role": "assistant", "content": text(0, 200) or None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"command": text(20, 120)})}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": text(200, 3000)})
    msgs.append({"role": "assistant", "content": "Done: " + text(100, 300)})
    return {"model": "gpt-4o", "messages": msgs}


def open_in_chromium(path: Path, chromium: str) -> tuple[float, float, float]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = b.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri(), wait_until="commit", timeout=120_000)  # opens at the last step
        page.wait_for_selector("body[data-ready='1']", timeout=120_000)
        # on the page's own clock: from the navigation's start to the end of the first render
        opened = page.evaluate("performance.now()") / 1000
        page.locator("canvas#tl").focus()
        page.keyboard.press("Home")
        moves = []
        for _ in range(30):
            t0 = page.evaluate("performance.now()")
            page.keyboard.press("ArrowRight")
            page.evaluate("new Promise(r => requestAnimationFrame(() => r()))")
            moves.append((page.evaluate("performance.now()") - t0) / 1000)
        t0 = page.evaluate("performance.now()")
        page.keyboard.press("End")
        page.evaluate("new Promise(r => requestAnimationFrame(() => r()))")
        end = (page.evaluate("performance.now()") - t0) / 1000
        b.close()
        if errors:
            raise SystemExit(f"page errors: {errors}")
        return opened, statistics.median(moves), end


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = ap.parse_args()
    if not args.chromium:
        raise SystemExit("no Chromium found (Debian: apt-get install chromium), or pass --chromium PATH")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.steps:
            log = Path(tmp) / f"s{n}.openai.json"
            log.write_text(json.dumps(session(n)))
            db = Path(tmp) / f"s{n}.db"
            ctxf.ingest(log, db=db)
            t0 = time.perf_counter()
            data = ctxf.view(log, model=["claude-code"], db=db).to_dict()
            build = time.perf_counter() - t0
            page = Path(tmp) / f"s{n}.html"
            size = write_view(page, data)
            r = data["runs"][0]
            lost = r["models"][1]["summary"]["lost_messages"]
            opened, move, end = open_in_chromium(page, args.chromium)
            rows.append([f"{n:,}", f"{len(r['messages']):,}", f"{lost:,}", f"{build:.1f} s", f"{size / 1e6:.1f} MB",
                         f"{opened:.2f} s", f"{move * 1000:.0f} ms", f"{end * 1000:.0f} ms"])
    print_table(["steps", "messages", "lost (claude-code)", "build", "file", "open", "step →", "jump to end"], rows)


if __name__ == "__main__":
    main()
