"""The drift curve as a PNG/SVG file: scores over steps on shaded verdict bands (matplotlib, lazy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .plots import _check, _pyplot, label, quiet, save

# (name, floor, ceiling, colour) of each verdict band, bottom to top.
BANDS = (("CRITICAL", 0, 35, "#d62728"), ("SEVERE", 35, 55, "#ff7f0e"), ("MODERATE", 55, 75, "#ffdd57"),
         ("MILD", 75, 90, "#9ecae1"), ("FRESH", 90, 100, "#74c476"))


def drift_plot(path: Path, report: dict[str, Any], title: str = "") -> Path:
    """Score per step over the shaded bands; goal-left-window steps as dashed lines, drift phrases as x."""
    _check(path)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=110)
    if report.get("state") == "no_goal":  # no goal, no curve: the bands would suggest a verdict there is not
        import textwrap

        ax.axis("off")
        ax.text(0.5, 0.5, "not judged: " + textwrap.fill(label(report["goal"]["explanation"]), 90), ha="center",
                va="center", fontsize=10, transform=ax.transAxes, wrap=True)
        ax.set_title(label(title) or "goal drift")
        save(fig, path)
        plt.close(fig)
        return path
    for name, lo, hi, colour in BANDS:
        ax.axhspan(lo, hi, color=colour, alpha=0.18, linewidth=0)
        ax.text(1.005, (lo + hi) / 2, name, transform=ax.get_yaxis_transform(), fontsize=7, va="center",
                color="#444444")
    steps = [s for s in report["steps"] if s["score"] is not None]
    xs = [s["step"] for s in steps]
    ax.plot(xs, [s["score"] for s in steps], color="#1f3b73", linewidth=1.8, marker="o", markersize=3,
            label="drift score (window)")
    own = [(s["step"], s["message_score"]) for s in report["steps"] if s.get("message_score") is not None]
    if own:
        ax.plot([x for x, _ in own], [v for _, v in own],
                color="#1f3b73", linewidth=0, marker=".", markersize=4, alpha=0.45, label="single reply")
    left = phrase = False
    for s in report["steps"]:
        if any(e["type"] == "goal_left_window" for e in s["events"]):
            ax.axvline(s["step"], color="#d62728", linestyle="--", linewidth=1,
                       label=None if left else "goal left the window")
            left = True
        if s["phrases"] and s["score"] is not None:
            ax.plot(s["step"], s["score"], marker="x", color="black", markersize=7, linewidth=0,
                    label=None if phrase else "drift phrase")
            phrase = True
    ax.set_xlim(0.5, max(xs, default=1) + 0.5)
    ax.set_ylim(0, 100)
    ax.set_xlabel("step (model call)")
    ax.set_ylabel("score (100 = on the goal)")
    ax.set_title(label(title) or "goal drift")
    ax.grid(alpha=0.25)
    ax.legend(loc="lower left", fontsize=8)
    with quiet():
        fig.tight_layout()
    save(fig, path)
    plt.close(fig)
    return path
