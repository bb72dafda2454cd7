"""Plots to PNG/SVG files with matplotlib, imported only when a plot is asked for.

Every label that can come from a log (titles, model names, fact texts) goes through ``label``:
inert (control characters as escapes, so no glyph warning echoes them to stderr) and with its
``$`` escaped, so a title holding two dollar signs is text, not mathtext that fails to parse.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Iterator

from ..errors import UsageError
from ..inert import inert

SUFFIXES = (".png", ".svg", ".pdf")


def _pyplot():
    from ..environ import scoped

    where: dict[str, str] = {}
    if "MPLCONFIGDIR" not in os.environ and "matplotlib" not in sys.modules:  # read at matplotlib's first import
        from ..store.files import make_private_dir
        from ..tokens.assets import matplotlib_dir

        folder = matplotlib_dir()
        try:
            make_private_dir(folder)
            where["MPLCONFIGDIR"] = str(folder)
        except OSError:
            pass  # an unwritable cache: matplotlib picks a temporary folder of its own and says so
    try:
        with scoped(where):  # for the import only: the host's environment stays as it was
            import matplotlib

            matplotlib.use("Agg")  # files only, never a window
            import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib", hint="pip install matplotlib") from None
    return plt


def label(text: Any) -> str:
    """Log text as a matplotlib label: inert, ``$`` escaped (never mathtext), each emoji by its
    name (``[rocket]``) and any other character the font has no glyph for as ``□`` (what
    matplotlib would draw, without its "Glyph missing" warning)."""
    from .glyphs import font_charmap, name_emoji

    text = name_emoji(inert(text))
    try:
        from matplotlib import font_manager

        have = font_charmap(font_manager.findfont(font_manager.FontProperties()))
    except (ImportError, OSError, RuntimeError, ValueError):
        have = None
    if have is not None:
        text = "".join(c if ord(c) in have or c in "\n\t" else "□" for c in text)
    return text.replace("$", r"\$")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Drawing without matplotlib's layout warnings on stderr: a missing glyph (a title in a
    script the font lacks draws boxes; the warning would quote the character) and a tight
    layout that a long label leaves undone (the plot is drawn as laid out)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        warnings.filterwarnings("ignore", message=r"Tight layout not applied", category=UserWarning)
        yield


def save(fig: Any, path: Path, **opts: Any) -> None:
    """``fig.savefig(path)`` as a private file: drawn in memory, written 0600 in 0700 folders
    (``store.files``), as every file ctxf writes (a plot shows a private session's figures)."""
    import io

    from ..store.files import write_private_bytes

    buf = io.BytesIO()
    with quiet():
        fig.savefig(buf, format=path.suffix.lower().lstrip("."), **opts)
    write_private_bytes(path, buf.getvalue())


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


# The marker of each event kind on the utilization curve, and its legend text.
MARKERS = {"compaction": ("D", "compaction"), "history_edit": ("D", "compaction"), "overflow": ("x", "overflow"),
           "eviction": ("v", "eviction"), "clearing": ("s", "tool results cleared")}


def utilization_plot(path: Path | None, replays: list[dict[str, Any]], title: str = "") -> Any:
    """Window utilization per step (in % of the context limit, as the text has it), one line per
    model, with each budget line, the alert line and the events marked, all named in the legend.

    A replay of one step is one point (marked and labelled), not an empty line. With a path,
    writes the file and returns the path; with None, returns the figure.
    """
    if path is not None:
        _check(path)
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    fig, ax = plt.subplots(figsize=(10, 5.2), dpi=110)
    named: set[str] = set()  # one legend entry per event kind, however many models show it
    top = 1.0
    for rep in replays:
        steps = [s["step"] for s in rep["steps"]]
        util = [s["utilization"] for s in rep["steps"]]
        top = max([top, *util])
        (line,) = ax.plot(steps, util, label=label(f"{rep['model']} ({rep['policy']})"), linewidth=1.6,
                          marker="o" if len(steps) <= 2 else None, markersize=5)
        if len(steps) == 1:
            ax.annotate(f"{util[0]:.0%}", (steps[0], util[0]), textcoords="offset points", xytext=(6, 6), fontsize=8)
        for s in rep["steps"]:
            for e in s["events"]:
                marker, text = MARKERS.get(e["type"], (None, ""))
                if marker:
                    ax.plot(s["step"], s["utilization"], marker=marker, color=line.get_color(), markersize=6,
                            linestyle="none")
                    if text not in named:  # the kind in the legend in grey: each model's marks wear its colour
                        ax.plot([], [], marker=marker, color="#555555", markersize=6, linestyle="none", label=text)
                        named.add(text)
        if rep["budget"] != rep["limit"]:
            ax.axhline(rep["budget"] / rep["limit"], color=line.get_color(), linestyle=":", linewidth=0.9,
                       label=label(f"budget {rep['model']}: limit − reserved output "
                                   f"({rep['budget'] / rep['limit']:.0%})"))
    if replays:
        alert = replays[0]["summary"]["alert_threshold"]
        ax.axhline(alert, color="red", linestyle="--", linewidth=0.8, label=f"alert threshold ({alert:.0%})")
    ax.set_xlabel("step (model call)")
    ax.set_ylabel("window / context limit (%)")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, top * 1.08)
    n = max((len(r["steps"]) for r in replays), default=0)
    if n <= 2:
        ax.set_xlim(0.5, n + 0.5)
    ax.set_title(label(title) or "context window utilization")
    ax.grid(alpha=0.3)
    # under the axes, where no curve runs: a legend inside covered the steep what-if curves
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, fontsize=8, frameon=False)
    with quiet():
        fig.tight_layout()
    if path is None:
        return fig
    save(fig, path)
    plt.close(fig)
    return path
