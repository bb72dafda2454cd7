"""``ctxf models`` and ``ctxf config show``: the model table, how a name resolves, the configuration."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .common import fit_columns, hidden_columns_note, safe


def config_view(console: Console, cfg: dict, source: str, store: dict | None = None) -> None:
    console.print(safe(f"config: {source}", style="bold"))
    if store is not None:  # which store the commands use, and why (config/location.py)
        made = "" if store["exists"] else "; not created yet: `ctxf ingest LOGS` makes it"
        console.print(safe(f"store: {store['path']}", style="bold"), soft_wrap=True)  # a path to copy: one line
        console.print(safe(f"  {store['reason']}{made}"))
    models = Table(box=box.SIMPLE_HEAD, title="model_mappings", title_justify="left")
    for col in ("model", "tokenizer", "context_limit", "reserved_output", "eviction_strategy", "preserve_system",
                "base"):
        models.add_column(col.replace("_", "_\n"), overflow="fold",
                          justify="right" if col in ("context_limit", "reserved_output") else "left")
    for name, m in cfg["model_mappings"].items():
        models.add_row(safe(name), safe(m["tokenizer"]), f"{m['context_limit']:,}", f"{m['reserved_output']:,}",
                       safe(m["eviction_strategy"]), str(m["preserve_system"]).lower(), safe(m.get("base") or ""))
    fit_columns(console, models)
    console.print(models)
    for section in ("analysis_thresholds", "storage", "embedding", "drift"):
        if not isinstance(cfg.get(section), dict):
            continue
        grid = Table(box=box.SIMPLE_HEAD, title=section, title_justify="left", show_header=False)
        grid.add_column()
        grid.add_column()
        for k, v in cfg[section].items():
            grid.add_row(safe(k), safe(str(v)))
        console.print(grid)
    if cfg.get("facts"):
        console.print(Text("facts", style="italic"))
        for f in cfg["facts"]:
            console.print(Text("  - ") + safe(f))
    if cfg.get("audit") is not None:
        console.print(Text("audit", style="italic"))
        for name, spec in ((cfg["audit"] or {}).get("rules") or {}).items():
            console.print(safe(f"  {name}: ") + safe(str(spec or {})))


def models_table(console: Console, rows: list[dict], families: list[dict] | None = None) -> None:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)  # model, tokenizer, limits and policy fit 80 columns
    for col in ("model", "tokenizer", "limit", "reserved", "policy", "params", "as of", "origin"):
        # A model name is what the user types: never folded; what does not fit is dropped (and
        # named under the table) instead, and below ~70 columns a long policy name folds.
        table.add_column(col, justify="right" if col in ("limit", "reserved") else "left",
                         no_wrap=col not in ("params", "origin", "policy"), overflow="fold")
    for m in rows:
        params = ", ".join(f"{k}={v}" for k, v in m["params"].items())
        table.add_row(safe(m["name"]), safe(m["tokenizer"]), f"{m['context_limit']:,}", f"{m['reserved_output']:,}",
                      safe(m["policy"]), safe(params), safe(m["as_of"]), safe(m["origin"]))
    dropped = fit_columns(console, table, ("params", "origin", "as of", "tokenizer"))
    console.print(table)
    hidden_columns_note(console, dropped)
    console.print(Text("Dated snapshots, -latest/-preview/-exp, provider prefixes (openai/, anthropic., …) and "
                       "4.6 for 4-6 match their entry; a name extending an entry (gpt-4o-mini-search-preview) "
                       "takes its figures. `ctxf models NAME` shows how a name resolves.", style="dim"))
    if families:
        console.print(Text("Versions newer than the table take the newest of their family, and say so: "
                           + ", ".join(f"{f['family']} → {f['entry']}" for f in families), style="dim"))
    tokenizers_legend(console, rows)


def tokenizers_legend(console: Console, rows: list[dict]) -> None:
    """What the rows' tokenizers' counts are worth, grouped: exact, vendor vocabulary unverified,
    calibrated stand-in, approx (``ctxf models NAME`` and ``--json`` say why, per tokenizer)."""
    by_label: dict[str, list[str]] = {}
    for m in rows:
        st = m.get("tokenizer_status")
        if st and m["tokenizer"] not in by_label.setdefault(st["label"], []):
            by_label[st["label"]].append(m["tokenizer"])
    if not any(by_label.values()):
        return
    order = ("exact", "vendor vocabulary, unverified", "calibrated stand-in", "approx (estimate)")
    labels = sorted(by_label, key=lambda lb: order.index(lb) if lb in order else len(order))
    parts = [f"{label}: {', '.join(by_label[label])}" for label in labels if by_label[label]]
    console.print(Text("Tokenizers — " + " · ".join(parts) + ". A vendor vocabulary counts with the vendor's own "
                       "file and framing, labelled estimated until a session's recorded usage matches it; "
                       "`ctxf models NAME` says why.", style="dim"))


def models_lookup(console: Console, specs: list[dict]) -> None:
    """How each looked-up name resolves: the entry, the rule, the figures and their source."""
    for m in specs:
        how = {"exact": "table entry", "alias": "alias of table entry", "snapshot": "snapshot of table entry",
               "variant": f"variant ({m['rule']}) of table entry", "family": f"family {m['rule']}: table entry",
               "mapping": "model_mappings entry"}.get(m["match"], m["match"])
        entry = m["entry"] + (f" {m['rule']}" if m["match"] in ("exact", "snapshot") and m.get("rule") else "")
        console.print(Text.assemble(safe(m["name"], newlines=False), (" → ", "bold"),
                                    safe(f"{how} {entry}", newlines=False)))
        console.print(safe(f"  {m['tokenizer']} tokenizer · limit {m['context_limit']:,} − reserved "
                           f"{m['reserved_output']:,} = budget {m['context_limit'] - m['reserved_output']:,} · "
                           f"{m['policy']} on overflow · as of {m['as_of'] or '–'}"))
        console.print(Text("  source: ", style="dim") + safe(m["source"] or "–"))
        st = m.get("tokenizer_status")
        if st:
            console.print(Text(f"  counts: {st['label']}: ", style="dim") + safe(st["why"]))
