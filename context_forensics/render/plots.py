"""Plots to PNG/SVG files with matplotlib, imported only when a plot is asked for."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import UsageError

SUFFIXES = (".png", ".svg", ".pdf")


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, never a window
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib", hint="pip install matplotlib") from None
    return plt


def _check(path: Path) -> None:
    if path.suffix.lower() not in SUFFIXES:
        raise UsageError(f"cannot plot to {path.name!r}", hint="use a file name ending in " + ", ".join(SUFFIXES))


def svg_text(fig: Any) -> str:
    """A figure as inline SVG text (for the HTML report), without the XML prologue."""
    import io

    buf = io.StringIO()
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
        (line,) = ax.plot(steps, util, label=f"{rep['model']} ({rep['policy']})", linewidth=1.6)
        for s in rep["steps"]:
            for e in s["events"]:
                marker = {"compaction": "D", "overflow": "x", "eviction": "v", "clearing": "s"}.get(e["type"])
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
    ax.set_title(title or "context window utilization")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    if path is None:
        return fig
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
