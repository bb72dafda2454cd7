"""The fact timeline chart for ``ctxf facts --plot`` (matplotlib, imported only when asked for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .plots import _check, _pyplot, label, quiet, save

COLORS = {"present": "#2e7d32", "at_risk": "#f9a825", "summarized": "#4fc3f7", "gone": "#e57373"}
LABELS = {"present": "present", "at_risk": "at risk", "summarized": "summarized", "gone": "gone"}


def _runs(states: list[str]) -> list[tuple[str, int, int]]:
    """(state, first step, length) for each run of equal states; steps are 1-based."""
    out: list[tuple[str, int, int]] = []
    for k, s in enumerate(states, start=1):
        if out and out[-1][0] == s:
            out[-1] = (s, out[-1][1], out[-1][2] + 1)
        else:
            out.append((s, k, 1))
    return out


def facts_plot(path: Path, data: dict[str, Any], title: str = "") -> Path:
    """One band per fact, coloured by state at each step; departures (x), recollections (o)
    and restatements (^) marked."""
    _check(path)
    plt = _pyplot()
    facts = data["facts"]
    m = data["steps"]
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.55 * max(len(facts), 1)), dpi=110)
    seen: set[str] = set()
    for row, f in enumerate(facts):
        y = len(facts) - 1 - row
        for state, start, length in _runs([t["state"] for t in f["timeline"]]):
            if state == "not_yet":
                continue
            ax.broken_barh([(start - 0.5, length)], (y - 0.35, 0.7), facecolors=COLORS[state],
                           label=None if state in seen else LABELS[state])
            seen.add(state)
        for d in f["departures"]:
            ax.plot(d["step"] - 0.5, y, marker="x", color="black", markersize=7)
        for r in f["recollections"]:
            ax.plot(r["step"], y, marker="o", color="black", markerfacecolor="none", markersize=6)
        for r in f["restated"]:
            ax.plot(r["step"], y, marker="^", color="black", markersize=5)
    labels = [label(f["fact"] if len(f["fact"]) <= 40 else f["fact"][:39] + "…") for f in facts]
    ax.set_yticks(range(len(facts)))
    ax.set_yticklabels(list(reversed(labels)), fontsize=8)
    ax.set_xlim(0.5, max(m, 1) + 0.5)
    ax.set_ylim(-0.7, max(len(facts), 1) - 0.3)
    ax.set_xlabel("step (model call)")
    ax.set_title(label(title or f"facts in the window ({data['model']}, {data['policy']})"))
    ax.grid(axis="x", alpha=0.3)
    ax.plot([], [], marker="x", color="black", linestyle="none", label="left the window")
    ax.plot([], [], marker="o", color="black", markerfacecolor="none", linestyle="none",
            label="recalled without source")
    ax.plot([], [], marker="^", color="black", linestyle="none", label="restated")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25 if len(facts) > 2 else -0.4), ncol=4, fontsize=7,
              frameon=False)
    with quiet():
        fig.tight_layout()
    save(fig, path, bbox_inches="tight")
    plt.close(fig)
    return path
