"""Plots to PNG/SVG files with matplotlib, imported only when a plot is asked for.

Every label that can come from a log (titles, model names, fact texts) goes through ``label``:
inert (control characters as escapes, so no glyph warning echoes them to stderr) and with its
``$`` escaped, so a title holding two dollar signs is text, not mathtext that fails to parse.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from pathlib import Path
from typing import Any, Iterator

from ..errors import UsageError
from ..inert import inert

SUFFIXES = (".png", ".svg", ".pdf")


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, never a window
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib", hint="pip install matplotlib") from None
    return plt


def label(text: Any) -> str:
    """Log text as a matplotlib label: inert, ``$`` escaped (never mathtext)."""
    return inert(text).replace("$", r"\$")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Drawing without matplotlib's layout warnings on stderr: a missing glyph (a title in a
    script the font lacks draws boxes; the warning would quote the character) and a tight
    layout that a long label leaves undone (the plot is drawn as laid out)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        warnings.filterwarnings("ignore", message=r"Tight layout not applied", category=UserWarning)
        yield


def _check(path: Path) -> None:
    if path.suffix.lower() not in SUFFIXES:
        raise UsageError(f"cannot plot to {path.name!r}", hint="use a file name ending in " + ", ".join(SUFFIXES))


def svg_text(fig: Any) -> str:
    """A figure as inline SVG text (for the HTML report), without the XML prologue."""
    import io

    buf = io.StringIO()
    with quiet():
        fig.savefig(buf, format="svg")
    _pyplot().close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # matplotlib's RDF metadata block: namespace URLs and a creation date, nothing the page needs
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)


def utilization_plot(path: Path | None, replays: list[dict[str, Any]], title: str = "") -> Any:
    """Window utilization per step, one line per model, with the alert line and events marked.

    With a path, writes the file and returns the path; with None, returns the figure.
    """
    if path is not None:
        _check(path)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=110)
    for rep in replays:
        steps = [s["step"] for s in rep["steps"]]
        util = [s["utilization"] for s in rep["steps"]]
        (line,) = ax.plot(steps, util, label=label(f"{rep['model']} ({rep['policy']})"), linewidth=1.6)
        for s in rep["steps"]:
            for e in s["events"]:
                marker = {"compaction": "D", "history_edit": "D", "overflow": "x", "eviction": "v", "clearing": "s"}.get(e["type"])
                if marker:
                    ax.plot(s["step"], s["utilization"], marker=marker, color=line.get_color(), markersize=6)
        if rep["budget"] != rep["limit"]:
            ax.axhline(rep["budget"] / rep["limit"], color=line.get_color(), linestyle=":", linewidth=0.8)
    if replays:
        ax.axhline(replays[0]["summary"]["alert_threshold"], color="red", linestyle="--", linewidth=0.8,
                   label="alert threshold")
    ax.set_xlabel("step (model call)")
    ax.set_ylabel("window / context limit")
    ax.set_ylim(bottom=0)
    ax.set_title(label(title) or "context window utilization")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    with quiet():
        fig.tight_layout()
    if path is None:
        return fig
    path.parent.mkdir(parents=True, exist_ok=True)
    with quiet():
        fig.savefig(path)
    plt.close(fig)
    return path
