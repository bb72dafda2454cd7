"""Seed inputs per importer: real files found under the roots, folders of runs, and a few
containers built at run time.

Every regular file under the roots (the corpus, ``sample_logs/``, ``tests/fixtures``) whose
format ``importers.detect`` names is a file seed of that importer; the corpus is read where it
lies, never copied. A folder holding several logs of one importer, or a log and its sidecars
(``report.json``, subagent transcripts), is a folder seed, ingested with ``recursive=True``; a
folder a directory importer (OpenHands ``llm_completions/``) reads whole is one too. The repo
has no ``.eval`` zip, ``llm`` logs.db or SQLite table, so ``build_synthetic`` writes them (from
the Inspect JSON fixtures, with ``llm``'s own migrations when it is installed) into a scratch
folder at run start.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import zipfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from context_forensics import importers
from context_forensics.store.inputs import listed_file

REPO = Path(__file__).resolve().parent.parent
REPO_ROOTS = (REPO / "sample_logs", REPO / "tests" / "fixtures")
DEFAULT_CORPUS = Path(os.environ.get("CTXF_CORPUS", REPO.parent / "shared" / "corpus"))
SKIP_SUFFIXES = (".py", ".pyc", ".md")
SYNTHETIC = "synthetic"  # the folder build_synthetic writes into (its name, under a scratch dir)
FOLDER_MAX_FILES = 40
FOLDER_MAX_BYTES = 3 << 20


@dataclass(frozen=True)
class Seed:
    importer: str
    kind: str  # "file" | "folder"
    path: Path

    def label(self) -> str:
        """The seed's path relative to the repo or the corpus's parent (``synthetic/`` for the
        built containers)."""
        if SYNTHETIC in self.path.parts:
            return "/".join(self.path.parts[self.path.parts.index(SYNTHETIC):]) + ("/" if self.kind == "folder" else "")
        for root in (REPO, DEFAULT_CORPUS.parent):
            try:
                return str(self.path.relative_to(root)) + ("/" if self.kind == "folder" else "")
            except ValueError:
                continue
        return str(self.path)


def _files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
        for n in sorted(names):
            p = Path(dirpath) / n
            # dot files as the ingest walk lists them (Aider's logs); Markdown only as a chat history
            wanted = (listed_file(n) if n.startswith(".") else not n.endswith(SKIP_SUFFIXES)) or n.endswith("history.md")
            if wanted and p.is_file() and not p.is_symlink():
                out.append(p)
    return out


def collect(roots: list[Path]) -> tuple[dict[str, list[Seed]], list[Path]]:
    """The seeds per importer (every registered importer has a key), and the files no importer
    recognised (used as other formats' material when mixing)."""
    reg = importers.registry()
    seeds: dict[str, list[Seed]] = {name: [] for name in reg}
    unknown: list[Path] = []
    by_dir: dict[Path, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    dir_importers = [imp for imp in reg.values() if imp.handles_directories]
    for root in roots:
        if not root.is_dir():
            continue
        for d in [root] + sorted(p for p in root.rglob("*") if p.is_dir() and not p.name.startswith((".", "__"))):
            for imp in dir_importers:
                try:
                    if imp.sniff(d, b""):
                        seeds[imp.name].append(Seed(imp.name, "folder", d))
                        break
                except OSError:
                    continue
        for f in _files(root):
            try:
                found = importers.detect(f)
            except Exception as e:  # noqa: BLE001 - a seed that breaks detection: say so, use it as material
                print(f"note: detecting the format of seed {f} raised {type(e).__name__}: {e}", file=sys.stderr)
                found = None
            if found is None:
                unknown.append(f)
                continue
            imp = found
            seeds[imp.name].append(Seed(imp.name, "file", f))
            for up in (f.parent, f.parent.parent):
                if up != root.parent and root in (up, *up.parents):
                    by_dir[up][imp.name] += 1
            try:
                if imp.sidecars(f):
                    by_dir[f.parent][imp.name] += 2  # a log with its sidecars: a folder seed
            except OSError:
                pass
    for d, counts in sorted(by_dir.items()):
        members = _files(d)
        if len(members) > FOLDER_MAX_FILES or sum(p.stat().st_size for p in members) > FOLDER_MAX_BYTES:
            continue
        for name, n in counts.items():
            if n >= 2 and not any(s.kind == "folder" and s.path == d for s in seeds[name]):
                seeds[name].append(Seed(name, "folder", d))
    return seeds, unknown


# ---------------------------------------------------------------- synthetic containers


def build_synthetic(scratch: Path) -> Path:
    """Write the containers the repo has no file of into ``scratch/synthetic``; return that folder."""
    dest = scratch / SYNTHETIC
    dest.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    inspect_dir = REPO / "tests" / "fixtures" / "inspect"
    for name in ("modern_spans.json", "legacy_v1.json"):
        src = inspect_dir / name
        if not src.exists():
            continue
        log = json.loads(src.read_text())
        header = {k: v for k, v in log.items() if k != "samples"}
        samples = log.get("samples") or []
        out = dest / f"{src.stem}.eval"
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            def put(name: str, text: str) -> None:
                z.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), text, zipfile.ZIP_DEFLATED)

            put("_journal/start.json", json.dumps({"version": 2, "eval": header.get("eval"),
                                                          "plan": header.get("plan")}))
            for i, s in enumerate(samples, start=1):
                put(f"samples/{s.get('id', i)}_epoch_{s.get('epoch', 1)}.json", json.dumps(s))
            put("summaries.json", json.dumps([{"id": s.get("id", i)} for i, s in enumerate(samples, 1)]))
            put("header.json", json.dumps(header))
        made.append(out)
    made.append(_sqlite_table(dest / "chat.sqlite"))
    made.append(_dialogstudio(dest / "dialogs.json"))
    llm_db = _llm_logs(dest / "logs.db")
    if llm_db is not None:
        made.append(llm_db)
    return dest


def _sqlite_table(path: Path) -> Path:
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, conversation_id TEXT, role TEXT, content TEXT, "
                 "token_count INTEGER, model TEXT, created_at TEXT)")
    rows = [(1, "c1", "system", "Be brief.", 4, None, "2025-01-01T00:00:00Z"),
            (2, "c1", "user", "What is 2+2?", 6, None, "2025-01-01T00:00:01Z"),
            (3, "c1", "assistant", "4.", 2, "gpt-4o", "2025-01-01T00:00:02Z"),
            (4, "c2", "user", "Name a colour.", 5, None, "2025-01-02T00:00:00Z"),
            (5, "c2", "assistant", "Blue.", 2, "gpt-4o-mini", "2025-01-02T00:00:01Z")]
    conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    return path


def _dialogstudio(path: Path) -> Path:
    doc: dict[str, Any] = {f"ShareGPT--train--{i}": {
        "original dialog id": f"d{i}", "dialog index": i, "original dialog info": {"model": "gpt-4"},
        "log": [{"turn id": t, "user utterance": f"question {i}.{t}", "system response": f"answer {i}.{t}",
                 "dialog history": "", "original user side information": {}, "original system side information": {}}
                for t in (1, 2)],
        "prompt": ""} for i in (1, 2)}
    path.write_text(json.dumps(doc, indent=4))
    return path


def _llm_logs(path: Path) -> Path | None:
    """A logs.db migrated by ``llm`` itself (a dev dependency): legacy responses and a thread."""
    try:
        import sqlite_utils
        from llm import migrations
        from llm.logs import LogStore
        from llm.parts import Message, TextPart, ToolCallPart, ToolResultPart
    except Exception:  # noqa: BLE001 - llm not installed, or another version: no logs.db seed
        return None
    path.unlink(missing_ok=True)
    db: Any = sqlite_utils.Database(path)  # its tables are Table | View to mypy; these are tables
    migrations.migrate(db)
    cols = set(db["responses"].columns_dict)
    db["conversations"].insert({"id": "01conv", "name": "weather chat", "model": "gpt-4o"})
    base = {"model": "gpt-4o", "system": "Be brief.", "options_json": "{}", "conversation_id": "01conv",
            "input_tokens": 50, "output_tokens": 9, "duration_ms": 7}
    for i, (prompt, response) in enumerate([("Weather?", "Sunny."), ("Tomorrow?", "Rain."), ("Then?", "Snow.")]):
        row = dict(base, id=f"01r{i}", prompt=prompt, response=response,
                   datetime_utc=f"2025-01-01 10:0{i}:00+00:00", token_details='{"cached_tokens": 3}')
        db["responses"].insert({k: v for k, v in row.items() if k in cols})
    try:
        store = LogStore(db)
        p1 = store.ensure_chain([Message("system", [TextPart("Be brief.")]), Message("user", [TextPart("Who?")])])
        t1 = store.ensure_chain([Message("assistant", [TextPart("Looking."),
                                                       ToolCallPart(name="lookup", arguments={"q": "who"},
                                                                    tool_call_id="c1")])], parent=p1)
        p2 = store.ensure_chain([Message("tool", [ToolResultPart(name="lookup", output="a sailor",
                                                                 tool_call_id="c1")])], parent=t1)
        t2 = store.ensure_chain([Message("assistant", [TextPart("A sailor.")])], parent=p2)
        thread = store.create_thread(name="moby", tip=t2, id="01thread")
        turn = {"thread_id": thread, "model": "claude-sonnet-4", "duration_ms": 10, "options_json": "{}",
                "datetime_utc": "2025-02-01 09:00:00+00:00"}
        tcols = set(db["turns"].columns_dict)
        for tid, parent, tip, tokens in (("T1", p1, t1, 300), ("T2", p2, t2, 400)):
            row = dict(turn, id=tid, parent_message_hash=parent, tip_message_hash=tip, input_tokens=tokens,
                       output_tokens=5)
            db["turns"].insert({k: v for k, v in row.items() if k in tcols})
    except Exception:  # noqa: BLE001 - an llm without the message store: the legacy tables alone
        pass
    # the clock's values fixed, so the database is the same bytes on every run
    for table, column in (("_llm_migrations", "applied_at"), ("threads", "datetime_utc")):
        if table in db.table_names():
            db.execute(f"UPDATE [{table}] SET [{column}] = '2025-01-01 00:00:00+00:00'")
    db.conn.commit()
    db.execute("VACUUM")
    db.conn.close()
    return path
