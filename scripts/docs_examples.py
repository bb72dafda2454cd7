"""Write the example outputs and the generated tables of README.md and docs/*.md, or check them.

    python scripts/docs_examples.py            # rewrite every marked block
    python scripts/docs_examples.py --check    # exit 1 naming each block that drifted (the test suite runs it)
    python scripts/docs_examples.py --tables-only [--check]   # only the generated tables (no command runs)

Two kinds of marked blocks:

    <!-- example: ingest sample_logs --recursive -->          the real command's stdout, run on a copy of
    ```text                                                    sample_logs/ with a private store, in an
    $ ctxf ingest sample_logs --recursive                      80-column terminal without colour
    ...
    ```
    <!-- /example -->

    <!-- generated: formats -->                                a table built from the code: `formats` from
    ...                                                        the importer registry, `config` from the
    <!-- /generated -->                                        config schema (config/schema.py)

An example's options go before the colon: ``<!-- example fresh,exit=3: audit ... -->`` (``fresh``:
an empty store, else the store holding sample_logs/; ``exit=N``: the exit code it must end with,
0 by default). Every command runs from the same folder with the same store, in document order
(README.md first, then docs/ by path), so outputs are deterministic: an output that names the
temporary folder is refused, as timings and dates would be (none of the chosen commands prints one).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A folder of this run's own (session ids are their content's, so the outputs do not depend on where the
# copies of sample_logs/ sit; two runs at once do not share it).
WORKDIR = Path(tempfile.gettempdir()) / f"ctxf-docs-examples-{os.getpid()}"
COPIED = ("sample_logs", "tests/fixtures/policies")
REGENERATE = "python scripts/docs_examples.py"

EXAMPLE = re.compile(
    r"(?P<open><!-- example(?: (?P<opts>[a-z0-9=,]+))?: (?P<args>.*?) -->\n)(?P<body>.*?)(?P<close><!-- /example -->)",
    re.S,
)
GENERATED = re.compile(r"(?P<open><!-- generated: (?P<name>[a-z_]+) -->\n)(?P<body>.*?)(?P<close><!-- /generated -->)",
                       re.S)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


# ------------------------------------------------------------------------------------------ commands


class Runner:
    """Runs ctxf commands in WORKDIR (a copy of the inputs, a private store, home and XDG folders)."""

    def __init__(self) -> None:
        self.ready = False
        self.memo: dict[tuple[str, ...], str] = {}  # the same command on the same store prints the same
        cache = os.environ.get("CTXF_CACHE_DIR") or str(
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ctxf")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXF_", "XDG_", "COLUMNS", "LINES"))}
        env.update(
            COLUMNS="80", LINES="50", NO_COLOR="1", TERM="dumb", LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8",
            PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
            HOME=str(WORKDIR / "home"), XDG_DATA_HOME=str(WORKDIR / "home/.local/share"),
            XDG_CONFIG_HOME=str(WORKDIR / "home/.config"), XDG_STATE_HOME=str(WORKDIR / "home/.local/state"),
            CTXF_CACHE_DIR=cache,  # the exported ONNX encoder is reused, not made again
        )
        self.env = env

    def _wipe_state(self) -> None:
        for p in WORKDIR.iterdir():
            if p.name not in {c.split("/")[0] for c in COPIED}:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        (WORKDIR / "home").mkdir()

    def prepare(self) -> None:
        if WORKDIR.exists():
            shutil.rmtree(WORKDIR)
        WORKDIR.mkdir(parents=True)
        for rel in COPIED:
            shutil.copytree(ROOT / rel, WORKDIR / rel)
        self._wipe_state()
        self.ready = True

    def ctxf(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "context_forensics", *args], cwd=WORKDIR, env=self.env,
                              capture_output=True, text=True, timeout=600)

    def store_with_samples(self) -> None:
        r = self.ctxf(["ingest", "sample_logs", "--recursive"])
        if r.returncode != 0:
            raise SystemExit(f"docs examples: ingesting sample_logs/ failed:\n{r.stderr}")

    def run(self, args: list[str], opts: dict[str, str], where: str) -> str:
        key = (*args, *sorted(f"{k}={v}" for k, v in opts.items()))
        if key not in self.memo:
            self.memo[key] = self._run(args, opts, where)
        return self.memo[key]

    def _run(self, args: list[str], opts: dict[str, str], where: str) -> str:
        if not self.ready:
            self.prepare()
            self.store_with_samples()
        if "fresh" in opts:
            self._wipe_state()
        r = self.ctxf(args)
        want = int(opts.get("exit", 0))
        if r.returncode != want:
            raise SystemExit(f"{where}: `ctxf {shlex.join(args)}` exited {r.returncode}, not {want}:\n"
                             f"{r.stdout}\n{r.stderr}")
        out = "\n".join(line.rstrip() for line in r.stdout.rstrip("\n").split("\n"))
        if str(WORKDIR) in out:
            raise SystemExit(f"{where}: `ctxf {shlex.join(args)}` prints the temporary folder ({WORKDIR}): "
                             "pick an example whose output names no path of this machine")
        if "fresh" in opts:
            self.store_with_samples()  # the next blocks find sample_logs/ stored, whatever this one did
        return out


def shown_command(args: list[str], width: int = 80) -> str:
    """``$ ctxf ARGS`` wrapped at argument boundaries (an option kept with its value) with `` \\``."""
    units: list[str] = ["ctxf"]
    quoted = [shlex.quote(a) for a in args]
    i = 0
    while i < len(quoted):
        if quoted[i].startswith("-") and i + 1 < len(quoted) and not quoted[i + 1].startswith("-"):
            units.append(f"{quoted[i]} {quoted[i + 1]}")
            i += 2
        else:
            units.append(quoted[i])
            i += 1
    lines, line = [], "$"
    for u in units:
        if len(line) + 1 + len(u) > width - 2 and line.strip() not in ("$", ""):
            lines.append(line + " \\")
            line = "   "
        line += " " + u
    lines.append(line)
    return "\n".join(lines)


def parse_opts(raw: str | None) -> dict[str, str]:
    opts: dict[str, str] = {}
    for item in filter(None, (raw or "").split(",")):
        key, _, value = item.partition("=")
        if key not in {"fresh", "exit"}:
            raise SystemExit(f"docs examples: unknown option {key!r} (known: fresh, exit=N)")
        opts[key] = value
    return opts


# ------------------------------------------------------------------------------------------ tables


def _cell(text: str) -> str:
    """Markdown table cell: pipes escaped, angle brackets outside code spans escaped."""
    parts = re.split(r"(`[^`]*`)", text.replace("|", "\\|"))
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts)


def formats_table() -> str:
    from context_forensics.importers import registry

    rows = ["| format | detection order | reads | suffixes |", "|---|---|---|---|"]
    for i, (name, imp) in enumerate(registry().items(), 1):
        suffixes = " ".join(f"`{e}`" for e in imp.extensions)
        if imp.handles_directories:
            suffixes = (suffixes + " folder").strip()
        order = f"{i} (priority {imp.priority}{', fallback' if imp.fallback else ''})"
        rows.append(f"| `{name}` | {order} | {_cell(imp.description)} | {suffixes or '–'} |")
    return "\n".join(rows)


# What each config key means (the schema's dataclasses give the keys, types and defaults; a key
# without an entry here, or an entry for no key, stops the generator, so the page cannot lag the schema).
CONFIG_DOC: dict[str, tuple[str, str]] = {
    # key: (constraint or default text where the schema's value is not the whole story, meaning)
    "model_mappings.<model>.base": ("the table entry of `<model>`, if any",
                                    "the model whose figures the keys left out take"),
    "model_mappings.<model>.tokenizer": ("the base's; a new model `approx`", "how to count tokens (only `o200k_base` "
                                                                             "and `cl100k_base` are exact as they "
                                                                             "stand: see [which tokenizers are "
                                                                             "exact](commands/replay.md#ctxf-replay))"),
    "model_mappings.<model>.context_limit": ("the base's; a new model must set it", "the model's window (≥ 1)"),
    "model_mappings.<model>.reserved_output": ("the base's; a new model 0",
                                               "tokens kept free for the reply (≥ 0, below the limit)"),
    "model_mappings.<model>.eviction_strategy": ("the base's; a new model `reject`", "what happens on overflow"),
    "model_mappings.<model>.preserve_system": ("the base's; a new model true", "keep system messages when evicting"),
    "model_mappings.<model>.params": ("", "policy parameters"),
    "analysis_thresholds.fact_presence_cosine": ("", "a fact is present at or above this similarity (0–1)"),
    "analysis_thresholds.divergence_cosine": ("", "two generated free-text events (answers) or tool outputs match at "
                                                  "or above this similarity (given inputs are compared as text) (0–1)"),
    "analysis_thresholds.min_context_utilization_alert": ("", "flag steps whose window is fuller than this (0–1)"),
    "storage.type": ("", "the only backend: an embedded file, no server"),
    "storage.path": ("", "unset: `$CTXF_DB`, else `./forensics_data/sessions.db` when the working folder has one, else "
                         "the user data folder ([where the store is](commands/ingest.md#where-the-store-is)); relative "
                         "to the working directory"),
    "storage.max_sessions": ("", "ingest refuses a file that would store more sessions than this (≥ 1; the file is "
                                 "rolled back, nothing is pruned); remove sessions with `ctxf rm` or raise the limit"),
    "storage.redact": ("", "replace secrets before they are stored (see [Secrets](commands/ingest.md#secrets)); "
                           "`--no-redact` turns it off for one ingest"),
    "storage.redact_patterns": ("", "your own secret shapes, a list of `{name, regex}`, besides the built-in rules; "
                                    "each becomes `[redacted:NAME]`"),
    "storage.redact_originals": ("", "under which counting schemes a redacted message's original token sums are kept: "
                                     "the log's model's, or every tokenizer's too (see "
                                     "[Secrets](commands/ingest.md#secrets))"),
    "embedding.model": ("", "the packaged MiniLM, or a local sentence-transformers folder"),
    "embedding.cache_enabled": ("", "cache embeddings in the store"),
    "embedding.cache_ttl_hours": ("", "0: cached embeddings never expire (≥ 0)"),
    "embedding.backend": ("", "what runs the model: `auto` is ONNX Runtime when it can (the model exported once into "
                              "ctxf's cache folder, hash-verified), else torch with a one-line note; "
                              "`$CTXF_EMBEDDING_BACKEND` overrides it (see [Embedding "
                              "backends](commands/facts.md#embedding-backends))"),
    "drift.goal": ("", "the reference text, always judged; default: the session's system prompt and first user "
                       "message, judged only when usable (see [drift](commands/drift.md))"),
    "drift.window_size": ("", "replies averaged per step (≥ 1)"),
    "drift.on_topic_similarity": ("", "the similarity signal's scale (−1…1): a window this similar to the goal reads 1 "
                                      "(the calibrated model's unit; for another embedding model, its on-topic level)"),
    "drift.off_topic_similarity": ("", "a window this similar reads 0 (−1…1); must be below `on_topic_similarity`"),
    "facts": ("", "facts `ctxf facts` tracks in every session (and the `facts_must_persist` audit rule's default)"),
    "audit": ("every rule but `context_caused_failure`, with its defaults",
              "`audit.rules.<rule>`: see [the audit rules](commands/audit.md#use-in-ci)"),
}
_CHOICES_OF = {"tokenizer": "TOKENIZERS", "eviction_strategy": "STRATEGIES", "backend": "EMBEDDING_BACKENDS"}
_FIXED_CHOICES = {"storage.type": ("sqlite",), "storage.redact_originals": ("model", "all")}


def _type_words(tp: object, key: str, schema: typing.Any) -> str:
    leaf = key.rsplit(".", 1)[-1]
    choices = _FIXED_CHOICES.get(key) or (getattr(schema, _CHOICES_OF[leaf]) if leaf in _CHOICES_OF else None)
    if choices:
        return " \\| ".join(f"`{c}`" for c in choices)
    if key == "storage.redact_patterns":
        return "list of `{name, regex}`"
    if key == "model_mappings.<model>.base":
        return "a table model"
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    tp = args[0] if args and typing.get_origin(tp) in (typing.Union, __import__("types").UnionType) else tp
    origin = typing.get_origin(tp) or tp
    return {bool: "bool", int: "int", float: "number", str: "string", dict: "mapping",
            tuple: "list of strings"}.get(origin, "see below")


def _default_words(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if value == () or value == []:
        return "`[]`"
    if value == {}:
        return "`{}`"
    if isinstance(value, str):
        return f"`{value}`"
    return f"{value:,}" if isinstance(value, int) else str(value)


def config_keys() -> list[tuple[str, str, str]]:
    """(key, type, default) of every key of the schema, in its order."""
    from context_forensics.config import schema

    hints = typing.get_type_hints(schema.Config)
    rows: list[tuple[str, str, str]] = []
    for f in dataclasses.fields(schema.Config):
        if f.name == "source":
            continue
        if f.name == "model_mappings":
            mhints = typing.get_type_hints(schema.ModelConfig)
            order = ["base", *[g.name for g in dataclasses.fields(schema.ModelConfig) if g.name != "base"]]
            for name in order:
                key = f"model_mappings.<model>.{name}"
                default = "`{}`" if name == "params" else ""
                rows.append((key, _type_words(mhints[name], key, schema), default))
            continue
        cls = hints[f.name]
        if dataclasses.is_dataclass(cls):
            sub = typing.get_type_hints(cls)
            for g in dataclasses.fields(cls):
                key = f"{f.name}.{g.name}"
                value = g.default if g.default is not dataclasses.MISSING else g.default_factory()  # type: ignore[misc]
                rows.append((key, _type_words(sub[g.name], key, schema), _default_words(value)))
        else:
            value = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            tp = "mapping" if f.name == "audit" else _type_words(cls, f.name, schema)
            rows.append((f.name, tp, "" if f.name == "audit" else _default_words(value)))
    return rows


def config_table() -> str:
    rows = config_keys()
    keys = [k for k, _, _ in rows]
    missing = [k for k in keys if k not in CONFIG_DOC]
    stale = [k for k in CONFIG_DOC if k not in keys]
    if missing or stale:
        raise SystemExit("scripts/docs_examples.py: CONFIG_DOC does not match config/schema.py: "
                         + "; ".join(filter(None, [missing and f"undocumented keys {missing}",
                                                   stale and f"documented keys the schema lacks {stale}"])))
    out = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, tp, default in rows:
        note, meaning = CONFIG_DOC[key]
        out.append(f"| `{key}` | {tp} | {note or default} | {meaning} |")
    return "\n".join(out)


def _commands() -> list[tuple[list[str], typing.Any]]:
    """(path, click command) of every command ``ctxf --help`` lists, in its order; a group's own
    entry (``facts`` runs without a subcommand) first, then its subcommands."""
    import typer

    from context_forensics.cli import app

    found: list[tuple[list[str], typing.Any]] = []

    def walk(path: list[str], cmd: typing.Any, ctx: typing.Any) -> None:
        subs = getattr(cmd, "list_commands", None)
        if subs is None or getattr(cmd, "invoke_without_command", False):
            found.append((path, cmd))
        if subs is not None:
            for name in subs(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not getattr(sub, "hidden", False):
                    walk([*path, name], sub, ctx)

    root = typer.main.get_command(app)
    walk([], root, root.make_context("ctxf", [], resilient_parsing=True))
    return [(path, cmd) for path, cmd in found if path]


# Options (nearly) every command has are said once, under the synopsis, with the commands that lack one.
COMMON_OPTIONS = ("--db", "--config")


def _lacking(commands: list[tuple[list[str], typing.Any]]) -> dict[str, list[str]]:
    """Each common option -> the commands (``ctxf config check``) that do not take it."""
    return {o: [" ".join(["ctxf", *path]) for path, cmd in commands if not any(o in p.opts for p in cmd.params)]
            for o in COMMON_OPTIONS}


def _synopsis_units(path: list[str], cmd: typing.Any, common: tuple[str, ...] = ()) -> list[str]:
    """``ctxf PATH`` and one unit per parameter (an option kept with its value)."""
    units = [" ".join(["ctxf", *path])]
    for prm in cmd.params:
        if getattr(prm, "param_type_name", "") == "argument":
            name = prm.metavar or (prm.name or "arg").upper()
            if "[" in name or "..." in name:  # spelled out by the command: "[SESSION|PATH]..."
                units.append(name)
                continue
            many = "..." if prm.nargs == -1 else ""
            units.append(f"{name}{many}" if prm.required else f"[{name}]{many}")
            continue
        opts = [o for o in prm.opts if o.startswith("--")] or list(prm.opts)
        if not opts or opts[0] in common:
            continue
        flag = opts[0] + (f"|{prm.secondary_opts[0]}" if prm.secondary_opts else "")
        if getattr(prm, "is_flag", False) or getattr(prm, "count", False):
            unit = flag
        else:
            ptype = getattr(prm, "type", None)
            choices = getattr(ptype, "choices", None)
            value = "|".join(map(str, choices)) if choices else prm.metavar or getattr(ptype, "name", "value").upper()
            unit = f"{flag} {value}"
        units.append((unit if prm.required else f"[{unit}]") + ("..." if prm.multiple else ""))
    return units


def synopsis_block() -> str:
    """Every command's synopsis, from the CLI's own parameters (so none can fall behind it)."""
    lines = []
    commands = _commands()
    lacking = _lacking(commands)
    common = tuple(o for o in COMMON_OPTIONS if len(lacking[o]) < len(commands))
    for path, cmd in commands:
        line = ""
        for unit in _synopsis_units(path, cmd, common):
            if line and len(line) + 1 + len(unit) > 100:
                lines.append(line)
                line = "    " + unit
            else:
                line = f"{line} {unit}" if line else unit
        lines.append(line)
    said = [f"`{o}`" + (f" (not {', '.join(f'`{c}`' for c in lacking[o])})" if lacking.get(o) else "")
            for o in (*common, "--help")]
    return ("```text\n" + "\n".join(lines) + "\n```\n\n"
            f"Every command also takes {', '.join(said)} (see the [reference](reference.md)).")


def help_reference() -> str:
    """``ctxf COMMAND --help`` of every command, at 80 columns without colour."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXF_", "COLUMNS", "LINES"))}
    env.update(COLUMNS="80", LINES="50", NO_COLOR="1", TERM="dumb", LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    # run as `ctxf` (the usage line names the program as it was started; `python -m` would show that)
    start = "import sys; sys.argv[0] = 'ctxf'; from context_forensics.cli import main; main()"
    parts = []
    for path, _ in [([], None), *_commands()]:
        r = subprocess.run([sys.executable, "-c", start, *path, "--help"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"`ctxf {' '.join(path)} --help` exited {r.returncode}:\n{r.stderr}")
        out = "\n".join(line.rstrip() for line in r.stdout.rstrip("\n").split("\n"))
        title = " ".join(["ctxf", *path])
        parts.append(f"## `{title}`\n\n```text\n$ {title} --help\n{out}\n```")
    return "\n\n".join(parts)


TABLES = {"formats": formats_table, "config": config_table, "synopsis": synopsis_block, "help": help_reference}


# ------------------------------------------------------------------------------------------ main


def render(path: Path, text: str, runner: Runner | None) -> str:
    rel = path.relative_to(ROOT)

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def table(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in TABLES:
            raise SystemExit(f"{rel}:{line_of(m.start())}: unknown generated block {name!r} (known: "
                             f"{', '.join(TABLES)})")
        return f"{m['open']}{TABLES[name]()}\n{m['close']}"

    def example(m: re.Match[str]) -> str:
        if runner is None:
            return m[0]
        args = shlex.split(m["args"])
        out = runner.run(args, parse_opts(m["opts"]), f"{rel}:{line_of(m.start())}")
        return f"{m['open']}```text\n{shown_command(args)}\n{out}\n```\n{m['close']}"

    return EXAMPLE.sub(example, GENERATED.sub(table, text))


def blocks(text: str) -> list[tuple[int, str, str]]:
    """(line, label, block text) of every marked block."""
    found = []
    for rx, label in ((EXAMPLE, "args"), (GENERATED, "name")):
        for m in rx.finditer(text):
            name = f"`ctxf {m['args']}`" if label == "args" else f"generated table '{m['name']}'"
            found.append((text.count("\n", 0, m.start()) + 1, name, m[0]))
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 naming each block that drifted")
    ap.add_argument("--tables-only", action="store_true", help="only the generated tables (runs no command)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    runner = None if a.tables_only else Runner()
    drifted: list[str] = []
    try:
        for path in documents():
            text = path.read_text()
            new = render(path, text, runner)
            if new == text:
                continue
            if not a.check:
                path.write_text(new)
                print(f"wrote {path.relative_to(ROOT)}")
                continue
            old_blocks, new_blocks = blocks(text), blocks(new)
            for (line, name, old), (_, _, fresh) in zip(old_blocks, new_blocks):
                if old != fresh:
                    diff = difflib.unified_diff(old.splitlines(), fresh.splitlines(),
                                                "in the file", "now", lineterm="", n=1)
                    drifted.append(f"{path.relative_to(ROOT)}:{line}: {name} drifted\n"
                                   + textwrap.indent("\n".join(list(diff)[:30]), "    "))
    finally:
        if runner is not None and WORKDIR.exists():
            shutil.rmtree(WORKDIR, ignore_errors=True)
    if drifted:
        print("\n".join(drifted), file=sys.stderr)
        print(f"{len(drifted)} block(s) drifted: regenerate them with `{REGENERATE}"
              f"{' --tables-only' if a.tables_only else ''}` and commit the result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
