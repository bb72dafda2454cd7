"""``ctxf view``: the page, one self-contained HTML file (inline script, style and data).

Nothing is fetched: the Content-Security-Policy allows no source at all but the page's own
script and style (by hash), so the file works from ``file://`` and as a CI artifact and cannot
load anything even if a text tried. The data is JSON in a ``<script type="application/json">``
block with every ``<`` escaped (no ``</script>`` or ``<!--`` from a log can end it); the
script reads it with ``JSON.parse`` and sets every log text with ``textContent``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from importlib import resources
from pathlib import Path
from typing import Any


def _asset(name: str) -> str:
    return (resources.files(__package__) / "view_assets" / name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def data_json(data: dict[str, Any]) -> str:
    """The data as JSON that is safe inside a ``<script>`` element: ``<``, ``>``, ``&`` and the
    line separators escaped (JSON.parse reads the escapes back as the same characters)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _add_words(data: dict[str, Any]) -> None:
    """Each replay event gets ``words``: what the HTML report says of it (render/events.py), so
    the page and the report describe an event alike."""
    from .events import event_detail, event_label

    for run in data.get("runs") or []:
        for md in run.get("models") or []:
            for evs in [*(md.get("events") or {}).values(), md.get("after_last_call") or []]:
                for e in evs:
                    e["words"] = f"{event_label(e)}: {event_detail(e)}"


def view_html(data: dict[str, Any]) -> str:
    """The page for ``ViewResult.to_dict()`` data (``api.view``)."""
    _add_words(data)
    js, css = _asset("view.js"), _asset("view.css")
    runs = data["runs"]
    title = " vs ".join(str(r["session"].get("title") or r["session"]["id"]) for r in runs)[:200]
    csp = (f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    diverge = data.get("kind") == "diverge"
    keys = ("<kbd>←</kbd> <kbd>→</kbd> step, <kbd>PgUp</kbd> <kbd>PgDn</kbd> 10 steps, <kbd>Home</kbd> <kbd>End</kbd>"
            " first / last, <kbd>/</kbd> search" + (", aligned rows with ← → after a click" if diverge else ""))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="ctxf {html.escape(str(data.get('ctxf', '')))}">
<title>ctxf view: {html.escape(title)}</title>
<style>{css}</style></head>
<body>
<header id="head"></header>
<main>
<section id="diverge"></section>
<div id="tlwrap">
<canvas id="tl" tabindex="0" aria-label="step timeline: click a step, or use the arrow keys"></canvas>
<div class="legend" id="legend"></div>
<div class="controls">
<button id="prev" title="previous step (←)">◀</button>
<label>step <input id="stepin" type="number" min="1" value="1"></label><span id="stepof"></span>
<button id="next" title="next step (→)">▶</button>
<span id="models"></span>
<input id="q" type="search" placeholder="search message text (/)" aria-label="search message text">
<span class="muted">{keys}</span>
</div>
<div id="hits"></div>
<div id="facts"></div>
</div>
<div id="panels"></div>
</main>
<div id="tip"></div>
<script id="ctxf-data" type="application/json">{data_json(data)}</script>
<script>{js}</script>
</body></html>
"""


def write_view(path: Path, data: dict[str, Any]) -> int:
    """Write the page to ``path``: 0600 (it holds the log's text), whole or not at all; the bytes
    written. A lone surrogate in a log text is written as its JSON escape, which the page reads
    back as the same character."""
    from ..store.files import write_private_text

    page = view_html(data).encode("utf-8", errors="backslashreplace").decode("utf-8")
    write_private_text(path, page)
    return len(page.encode("utf-8"))
