"""Output is inert whatever a log holds (issue 11, items 8 and 9).

Logs of four formats (an OpenAI chat JSON whose file name is hostile too, a Claude Code JSONL,
a mini-swe-agent trajectory, a SWE-agent success/failure pair), a config, a facts file and a
pairs file put escape sequences in every string ctxf shows: model and tool names, titles,
message texts, file paths in tool calls, task names, facts, patches. Every command runs over
them through the CLI, in --json and in the human view, once as a pipe and once as a colour
terminal, and its stdout and stderr are checked byte by byte: valid UTF-8, no control or
format character but newline and tab (a terminal run: only the colour and progress-bar
sequences rich itself writes), nothing the consoles' last-resort net had to catch, no
traceback. The report files are checked as their readers would read them: the JUnit with
xml.etree, a SAX parser and the XML 1.0 character rule; the Markdown with markdown-it (no
HTML, no link, no image; every table row as many cells as its header); the HTML report with
html.parser (no tag or attribute from a log); the plots as SVG.
"""

from __future__ import annotations

import html.parser
import io
import json
import re
import sqlite3
import unicodedata
import xml.etree.ElementTree as ET
import xml.sax
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.embed import HashingEmbedder, embedders as embed_mod
from context_forensics.inert import CONTROL, inert, inert_json
from context_forensics.render import common

# Terminal attacks (OSC 52 clipboard write ended by BEL, clear-screen, an OSC 8 link ended by
# ST, 8-bit CSI and OSC ended by the 8-bit ST, cursor and line rewrites), text that hides or
# reorders (BiDi override and isolate, zero-width space, word joiner, BOM, a tag character,
# soft hyphen, line separator), and what other outputs would obey: rich markup, HTML, Markdown
# links, images and table pipes, and a dollar pair that is no valid mathtext.
EVIL = ("\x1b]52;c;ZXZpbA==\x07" "\x1b[2J\x1b[H" "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
        "\x9b31m" "\x9d0;title\x9c" "\u202e\u2066" "\u200b\u2060\ufeff\U000e0041\xad\u2028"
        "\b\r\x00\x07\x7f\x0b\x0c\x1b7\x1bc"
        "[link=https://evil.example]x[/link][bold red]R "
        "<script>alert(1)</script><img src=x onerror=alert(1)> "
        "[md](javascript:alert(1)) ![i](http://evil.example/p.png) | a | b | `tick` "
        "$x^$ end\\")
SEEN = r"\x1b]52;c;"  # how the human views show the start of EVIL (and of EVIL_NAME)
SEEN_JSON = r"\u001b]52;c;"  # and --json
# The file name: no slash or NUL, the rest as hostile.
EVIL_NAME = "chat\x1b]52;c;bmFtZQ==\x07\x1b[2J[link=https:evil]n\u202e\x9b1m"
TASK = "owner__evil-1" + EVIL

ALLOWED = {"\n", "\t", "\u200c", "\u200d"}  # newline, tab, ZWNJ and ZWJ (they shape text)


def forbidden(text: str) -> list[str]:
    """Every control, format, surrogate or separator character (by ``unicodedata``, not by the
    neutralizer's own list) but the allowed ones, with a little context."""
    out = []
    for i, ch in enumerate(text):
        if ch not in ALLOWED and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            out.append(f"{ch!r} after {text[max(0, i - 30):i]!r}")
    return out


# What rich writes on a colour terminal: SGR colours, and on stderr the transient progress bar
# (cursor hide/show, erase line, cursor up, carriage return). Anything else is not ours.
SGR = re.compile(r"\x1b\[[0-9;]*m")
PROGRESS = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[2K|\x1b\[[0-9]*A|\r")


def call(cid: str, name: str, **args) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def swe_run(edit: str) -> dict:
    return {
        "history": [
            {"role": "system", "content": "You are an agent. " + EVIL, "message_type": "system_prompt"},
            {"role": "user", "content": "Fix the bug in src/mod.py " + EVIL, "message_type": "observation"},
            {"role": "assistant", "content": "Let me look " + EVIL, "message_type": "action",
             "tool_calls": [call("c1", "bash" + EVIL, command="cat src/" + EVIL + ".py")]},
            {"role": "tool", "content": "def f():\n    return 1 " + EVIL, "message_type": "observation",
             "tool_call_ids": ["c1"]},
            {"role": "assistant", "content": "Editing " + EVIL, "message_type": "action",
             "tool_calls": [call("c2", "str_replace_editor" + EVIL, command="str_replace", path="src/" + EVIL + ".py",
                                 old_str="return 1 " + EVIL, new_str=edit)]},
            {"role": "tool", "content": "edited " + EVIL, "message_type": "observation", "tool_call_ids": ["c2"]},
            {"role": "assistant", "content": "Submitting " + EVIL, "message_type": "action",
             "tool_calls": [call("c3", "submit")]},
        ],
        "trajectory": [],
        "info": {"exit_status": "submitted" + EVIL, "model_stats": {"api_calls": 3},
                 "submission": f"diff --git a/src/{EVIL}.py b/src/{EVIL}.py\n--- a\n+++ b\n@@ -1 +1 @@\n-return 1\n"
                               f"+{edit}\n"},
        "replay_config": json.dumps({"agent": {"model": {"name": "swe-model" + EVIL}},
                                     "problem_statement": {"id": TASK}}),
    }


@dataclass
class World:
    root: Path
    logs: Path
    broken: Path
    db: Path
    cfg: Path
    ids: dict[str, str]  # "cc", "oa", "mini", "good", "bad" -> session id

    def fill(self, args: list[str]) -> list[str]:
        """``{logs}``, ``{cc}``, … replaced by this world's paths and session ids."""
        names = {"root": self.root, "logs": self.logs, "broken": self.broken, "db": self.db, **self.ids,
                 "cut": self.broken / (EVIL_NAME + "-cut.openai.json"), "torn": self.broken / "torn.jsonl"}
        return [re.sub(r"\{(\w+)\}", lambda m: str(names[m.group(1)]), a) for a in args]


def _write_logs(root: Path) -> tuple[Path, Path]:
    logs = root / "logs"
    logs.mkdir()
    chat = {"model": "gpt-4o" + EVIL,
            "tools": [{"type": "function", "function": {"name": "lookup" + EVIL, "parameters": {}}}],
            "messages": [
                {"role": "system", "content": "Never push to the main branch. " + EVIL},
                {"role": "user", "content": "Fix the parser in src/parse.py " + EVIL},
                {"role": "assistant", "content": "Reading it " + EVIL,
                 "tool_calls": [call("c1", "read_file" + EVIL, path="src/" + EVIL + ".py")]},
                {"role": "tool", "tool_call_id": "c1", "name": "read_file" + EVIL, "content": "def parse(): " + EVIL},
                {"role": "assistant", "content": "Fixed the parser " + EVIL}]}
    (logs / (EVIL_NAME + ".json")).write_text(json.dumps(chat))

    sid = "11111111-2222-4333-8444-555555555555"
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/" + EVIL, "sessionId": sid,
            "version": "2.1.40", "gitBranch": "main" + EVIL}
    records = [
        {"type": "summary", "summary": "Title " + EVIL, "leafUuid": "a-02"},
        {**base, "parentUuid": None, "type": "user", "uuid": "u-01", "timestamp": "2026-02-01T10:01:00.000Z",
         "message": {"role": "user", "content": "Fix the flaky test " + EVIL}},
        {**base, "parentUuid": "u-01", "type": "assistant", "uuid": "a-01", "timestamp": "2026-02-01T10:02:00.000Z",
         "message": {"model": "claude-opus-4-6" + EVIL, "id": "m1", "type": "message", "role": "assistant",
                     "content": [{"type": "text", "text": "Reading " + EVIL},
                                 {"type": "tool_use", "id": "t1", "name": "Read" + EVIL,
                                  "input": {"file_path": "/home/dev/" + EVIL + ".py"}}],
                     "usage": {"input_tokens": 10, "output_tokens": 5}}},
        {**base, "parentUuid": "a-01", "type": "user", "uuid": "u-02", "timestamp": "2026-02-01T10:03:00.000Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                  "content": "contents " + EVIL}]}},
        {**base, "parentUuid": "u-02", "type": "assistant", "uuid": "a-02", "timestamp": "2026-02-01T10:04:00.000Z",
         "message": {"model": "claude-opus-4-6" + EVIL, "id": "m2", "type": "message", "role": "assistant",
                     "content": [{"type": "text", "text": "Done " + EVIL}],
                     "usage": {"input_tokens": 20, "output_tokens": 5}}},
    ]
    (logs / f"{sid}.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")

    mini = {"info": {"exit_status": "Submitted" + EVIL, "submission": f"diff --git a/{EVIL} b/{EVIL}\n",
                     "model_stats": {"api_calls": 2}, "mini_version": "1.15.0",
                     "config": {"model": {"model_name": "mini-model" + EVIL}}},
            "messages": [
                {"role": "system", "content": "You are a helpful assistant. " + EVIL},
                {"role": "user", "content": "<pr_description>Fix the exporter " + EVIL + "</pr_description>"},
                {"role": "assistant", "content": "THOUGHT: look " + EVIL + "\n\n```bash\ncat " + EVIL + "\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n<output>\n" + EVIL + "\n</output>"},
                {"role": "assistant",
                 "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```"},
                {"role": "user", "content": f"diff --git a/{EVIL} b/{EVIL}\n"}],
            "trajectory_format": "mini-swe-agent-1", "instance_id": "owner__repo-1" + EVIL}
    (logs / "owner__repo-1.traj.json").write_text(json.dumps(mini))

    for name, ok, edit in (("good", True, "return 2 " + EVIL), ("bad", False, "return 3 " + EVIL)):
        run = logs / name
        run.mkdir()
        (run / "run.traj").write_text(json.dumps(swe_run(edit)))
        (run / "results.json").write_text(json.dumps({"resolved_ids": [TASK] if ok else [],
                                                      "unresolved_ids": [] if ok else [TASK]}))

    # Inputs that fail or warn, with messages quoting the log: a truncated JSON (hostile file
    # name), a JSONL of no valid line, a chat with an unknown role and a wrong-typed call
    broken = root / "broken"
    broken.mkdir()
    odd = {"model": "m" + EVIL, "messages": [
        {"role": "system", "content": "s"},
        {"role": "user" + EVIL, "content": [{"type": "weird" + EVIL}, {"type": "text", "text": "hi " + EVIL}]},
        {"role": "assistant", "content": "ok", "tool_calls": [{"id": 5, "type": "function",
                                                                "function": {"name": "f", "arguments": "{"}}]}]}
    (broken / "odd.openai.json").write_text(json.dumps(odd))
    (broken / (EVIL_NAME + "-cut.openai.json")).write_text(json.dumps(chat)[:150])
    (broken / "torn.jsonl").write_text('{"type": "' + EVIL.replace("\\", "") + '\n{"x\n')
    (broken / "good.openai.json").write_text(json.dumps(chat))
    return logs, broken


@pytest.fixture(autouse=True)
def hashing_embedder(monkeypatch):
    monkeypatch.setattr(embed_mod, "get_embedder", lambda *a, **k: HashingEmbedder())


def run(world: World, args: list[str], *, terminal: bool = False):
    env = {"CTXF_CONFIG": str(world.cfg)}
    if terminal:  # rich draws colours and the progress bars as on a real terminal
        env.update({"NO_COLOR": None, "FORCE_COLOR": "1", "COLORTERM": "truecolor", "TERM": "xterm-256color"})
    common.net_catches.clear()
    r = CliRunner().invoke(app, world.fill(args), env=env)
    return r, list(common.net_catches)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    root = tmp_path_factory.mktemp("inert")
    logs, broken = _write_logs(root)
    cfg = root / "cfg.yaml"
    cfg.write_text(json.dumps({  # JSON is YAML: every hostile character as an escape in the file
        "model_mappings": {"evil" + EVIL: {"tokenizer": "approx", "context_limit": 300, "reserved_output": 10,
                                           "eviction_strategy": "left_truncation"}},
        "facts": ["Never push to the main branch " + EVIL],
        "storage": {"path": str(root / "store.db")},
        "audit": {"rules": {"max_utilization": {"threshold": 0.01}, "facts_must_persist": {}, "max_drift": {},
                            "no_orphan_tool_results": {}, "divergence": {}}},
    }))
    (root / "facts.txt").write_text("Never push to the main branch " + EVIL + "\n")
    (root / "pairs.jsonl").write_text("".join(
        json.dumps({"fact": "Never push to main " + EVIL, "text": text, "present": present,
                    "subset": "set" + EVIL}) + "\n"
        for text, present in (("Do not push to main " + EVIL, True), ("Something else " + EVIL, False))))
    w = World(root, logs, broken, root / "store.db", cfg, {})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(embed_mod, "get_embedder", lambda *a, **k: HashingEmbedder())
        r, _ = run(w, ["ingest", str(logs), "-r"])
    assert r.exit_code == 0, r.stderr
    rows = sqlite3.connect(w.db).execute("select id, format, outcome from sessions").fetchall()
    by = {fmt: sid for sid, fmt, _ in rows if fmt != "swe_agent"}
    w.ids = {"cc": by["claude_code"], "oa": by["openai_chat"], "mini": by["mini_swe_agent"],
             "good": next(s for s, f, o in rows if f == "swe_agent" and o == "success"),
             "bad": next(s for s, f, o in rows if f == "swe_agent" and o == "failure")}
    return w


M = "evil" + EVIL  # the config's hostile model mapping
# (args, exit code, shows the log's text). Each runs as is and, where it has one, with --json.
COMMANDS: list[tuple[list[str], int, bool]] = [
    (["ingest", "{logs}", "-r", "--force", "--verbose", "--db", "{root}/again.db"], 0, True),
    (["ingest", "{cut}", "{broken}/odd.openai.json", "{broken}/good.openai.json", "-f", "openai_chat", "--verbose",
      "--db", "{root}/broken.db"], 1, True),
    (["sessions"], 0, True),
    (["formats"], 0, False),
    (["show", "{cc}"], 0, True),
    (["show", "{oa}"], 0, True),
    (["show", "{mini}"], 0, True),
    (["show", "{good}"], 0, True),
    (["show", "nope" + EVIL], 2, True),
    (["replay", "{cc}", "--all-steps"], 0, True),
    (["replay", "{oa}"], 0, True),
    (["replay", "{mini}"], 0, True),
    (["replay", "{cc}", "--at", "2"], 0, True),
    (["replay", "{oa}", "--at", "2", "--full"], 0, True),
    (["replay", "{good}", "--at", "3"], 0, True),
    (["replay", "{oa}", "-m", "gpt-4o", "-m", M], 0, True),
    (["replay", "{cc}", "-m", M, "--at", "2"], 0, True),
    (["replay", "{oa}", "--plot", "{root}/replay.svg"], 0, True),
    (["models"], 0, True),
    (["models", M], 0, True),
    (["facts", "{cc}"], 0, True),
    (["facts", "{oa}", "--fact", "Fix the parser " + EVIL, "--at", "2"], 0, True),
    (["facts", "{mini}", "--facts-file", "{root}/facts.txt", "-m", M], 0, True),
    (["facts", "{oa}", "--plot", "{root}/facts.svg"], 0, True),
    (["facts", "suggest", "{oa}"], 0, True),
    (["facts", "suggest", "{good}"], 0, True),
    (["calibrate", "--pairs", "{root}/pairs.jsonl"], 0, True),
    (["drift", "{oa}", "--all-steps"], 0, True),
    (["drift", "{good}", "--goal", "Fix the bug " + EVIL, "-m", M], 0, True),
    (["drift", "{cc}", "--plot", "{root}/drift.svg"], 0, True),
    (["diverge", "{good}", "{bad}", "--all"], 0, True),
    (["diverge", "--task", TASK], 0, True),
    (["diverge", "--all-tasks"], 0, True),
    (["audit", "--junit", "{root}/audit.xml", "--markdown", "{root}/audit.md"], 0, True),
    (["audit", "{broken}", "--db", "{root}/audit-broken.db", "--junit", "{root}/broken.xml",
      "--markdown", "{root}/broken.md"], 1, True),
    (["report", "{oa}", "--html", "{root}/report-oa.html", "-m", M], 0, False),
    (["report", "{good}", "--html", "{root}/report-good.html"], 0, False),
    (["config", "show"], 0, True),
    (["config", "check"], 0, False),
    (["rm", "nope" + EVIL], 2, True),
]
CASES = []
for args, code, shows in COMMANDS:
    CASES.append(pytest.param(args, code, shows, id=" ".join(a[:12] for a in args)[:60]))
    if args[0] not in ("report", "rm") and args[:2] != ["config", "check"] and "--plot" not in args:
        CASES.append(pytest.param([*args, "--json"], code, shows, id=" ".join(a[:12] for a in args)[:54] + " --json"))


def _strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _check_streams(r, caught: list[str], terminal: bool) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    for name, data, ours in (("stdout", r.stdout_bytes, SGR), ("stderr", r.stderr_bytes, PROGRESS)):
        text = data.decode("utf-8")  # strict: the bytes are valid UTF-8
        if terminal:
            text = ours.sub("", text)
        bad = forbidden(text)
        assert bad == [], f"{name}: {bad[:5]}"
    # every view made its own text inert where it laid it out: the net caught nothing
    assert caught == [], caught[:3]


@pytest.mark.parametrize("args, code, shows", CASES)
def test_every_command_prints_log_text_inert(world, args, code, shows):
    r, caught = run(world, args)
    assert r.exit_code == code, (r.stdout[-2000:], r.stderr[-2000:])
    _check_streams(r, caught, terminal=False)
    if "--json" in args:
        if code == 0 and shows:  # the JSON keeps the data exact: the raw characters come back once parsed
            assert any("\x1b]52;c;" in s for s in _strings(json.loads(r.stdout)))
        if shows:  # the data on stdout, an error (a message, not JSON) on stderr
            assert SEEN_JSON in r.stdout or SEEN in r.stderr
    elif shows:  # the log's text is shown (as its escapes), not dropped
        assert SEEN in r.stdout + r.stderr


@pytest.mark.parametrize("args, code, shows", [c for c in CASES if "--json" not in c.values[0]])
def test_on_a_colour_terminal_only_rich_writes_escape_sequences(world, args, code, shows):
    """A terminal run: rich styles what it prints, so the check strips its colour (and on
    stderr its progress-bar) sequences first; an OSC 8 link made by markup in a log's text, or
    any escape from the log, would remain."""
    r, caught = run(world, args, terminal=True)
    assert r.exit_code == code, (r.stdout[-2000:], r.stderr[-2000:])
    assert "\x1b]" not in r.stdout + r.stderr  # no OSC at all: no link, no clipboard, no title
    _check_streams(r, caught, terminal=True)


# ------------------------------------------------------------------ the files the commands write


def _written(world: World, args: list[str], path: str) -> str:
    r, _ = run(world, args)
    assert r.exit_code in (0, 1), r.stderr
    return (world.root / path).read_text(encoding="utf-8")


_XML_CHAR = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_strictly_valid(text: str) -> ET.Element:
    """XML 1.0 well-formed (expat through xml.etree and SAX) and only XML 1.0 ``Char``s, raw or
    as character references (the rule Java-based CI readers enforce)."""
    root = ET.fromstring(text.encode("utf-8"))
    xml.sax.parseString(text.encode("utf-8"), xml.sax.ContentHandler())
    bad = [ch for ch in text if not _XML_CHAR.fullmatch(ch)]
    assert bad == []
    for ref in re.findall(r"&#(x[0-9a-fA-F]+|[0-9]+);", text):
        ch = chr(int(ref[1:], 16) if ref.startswith("x") else int(ref))
        assert _XML_CHAR.fullmatch(ch), ref
    assert forbidden(text.replace("\r", "")) == []
    return root


@pytest.mark.parametrize("name", ["audit", "broken"])
def test_junit_is_valid_xml_whatever_the_log_holds(world, name):
    args = (["audit", "--junit", "{root}/audit.xml"] if name == "audit" else
            ["audit", "{broken}", "--db", "{root}/audit-broken2.db", "--junit", "{root}/broken.xml"])
    text = _written(world, args, f"{name}.xml")
    root = _xml_strictly_valid(text)
    cases = root.findall(".//testcase")
    assert cases and int(root.get("tests")) == len(cases)
    everything = " ".join(ET.tostring(root, encoding="unicode").split())
    assert SEEN in everything  # the text is there, as escapes
    if name == "broken":  # the unreadable inputs are error testcases naming their (hostile) files
        errors = root.findall(".//testsuite[@name='ctxf.inputs']/testcase/error")
        assert len(errors) == 2 and any(r"\x1b]52;c;bmFtZQ==" in c.get("name") for c in cases)


def _md_tables(text: str) -> list[list[str]]:
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def _cells(line: str) -> int:
    """Cells in a GFM table row: split at pipes no backslash escapes (as GitHub and markdown-it
    split them), the outer pipes dropped."""
    return len(re.split(r"(?<!\\)\|", line.strip())) - 2


@pytest.mark.parametrize("name", ["audit", "broken"])
def test_markdown_summary_is_inert_whatever_the_log_holds(world, name):
    from markdown_it import MarkdownIt

    args = (["audit", "--markdown", "{root}/audit.md"] if name == "audit" else
            ["audit", "{broken}", "--db", "{root}/audit-broken3.db", "--markdown", "{root}/broken.md"])
    text = _written(world, args, f"{name}.md")
    assert forbidden(text) == []
    assert r"\\x1b\]52;c;" in text or r"\x1b]52;c;" in text  # in a cell (escaped) or a code span
    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(text)
    flat = [t for tok in tokens for t in [tok, *(tok.children or [])]]
    kinds = {t.type for t in flat}
    assert not kinds & {"html_inline", "html_block", "link_open", "image"}, kinds
    assert "table_open" in kinds
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert "<script" not in rendered and "<img" not in rendered and "<a " not in rendered
    tables = _md_tables(text)
    assert tables
    for table in tables:
        head = _cells(table[0])
        assert all(_cells(line) == head for line in table), table
    # markdown-it reads every row of every table as a row of that table
    assert sum(t.type == "tr_open" for t in flat) == sum(len(t) - 1 for t in tables)


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.update(a for a, _ in attrs)

    def handle_data(self, data):
        self.text.append(data)


@pytest.mark.parametrize("session", ["oa", "good"])
def test_html_report_keeps_no_tag_from_a_log(world, session):
    args = ["report", "{" + session + "}", "--html", "{root}/" + f"page-{session}.html"]
    page = _written(world, args, f"page-{session}.html")
    parser = _Tags()
    parser.feed(page)
    assert not parser.tags & {"script", "img", "iframe", "a", "object", "embed", "link", "form"}, parser.tags
    assert not {a for a in parser.attrs if a.startswith("on")}, parser.attrs
    assert forbidden(page) == []
    shown = "".join(parser.text)
    assert "<script>alert(1)</script>" in shown and SEEN in shown  # shown as text, escapes visible


@pytest.mark.parametrize("plot", ["replay", "facts", "drift"])
def test_plots_are_valid_svg_with_inert_labels(world, plot):
    """The plot commands ran above with a log title holding control characters and ``$x^$``
    (no valid mathtext): they exit 0 without a glyph warning on stderr, and the SVG parses."""
    session = {"replay": "oa", "facts": "oa", "drift": "cc"}[plot]
    r, _ = run(world, [plot, "{" + session + "}", "--plot", "{root}/" + f"p-{plot}.svg"])
    assert r.exit_code == 0 and "Warning" not in r.stderr, r.stderr
    svg = (world.root / f"p-{plot}.svg").read_text(encoding="utf-8")
    ET.fromstring(svg.encode("utf-8"))
    assert forbidden(svg) == []


# ------------------------------------------------------------------ the neutralizer itself


def test_the_neutralizer_covers_every_control_and_format_character():
    """The list in inert.py against the running Python's Unicode database, so a new Unicode
    version that adds a format character fails here rather than reaching a terminal."""
    missed = [f"U+{c:04X}" for c in range(0x110000)
              if chr(c) not in ALLOWED and unicodedata.category(chr(c)) in ("Cc", "Cf", "Cs", "Zl", "Zp")
              and not CONTROL.fullmatch(chr(c))]
    assert missed == []


def test_ordinary_text_is_left_as_it_is():
    text = "Grüße, 東京 — שלום · مرحبا · 👩‍👩‍👧 naïve\tcolumns\nnext line · [bold] <b> $5 \\x1b"
    assert inert(text) == text
    assert inert("a\x1b[2Jb\u202ec\x9bd\U000e0041") == r"a\x1b[2Jb\u202ec\x9bd\U000e0041"
    assert inert("a\tb\nc", newlines=False) == r"a\x09b\x0ac"


def test_json_bytes_are_inert_and_the_data_exact(capsys):
    data = {"k" + EVIL: [EVIL, {"surrogate": "\ud800", "astral": "\U000e0041"}]}
    common.print_json(data)
    out = capsys.readouterr().out
    assert forbidden(out) == []
    assert json.loads(out) == data
    assert inert_json(json.dumps("\u202e", ensure_ascii=False)) == '"\\u202e"'


def test_the_progress_bar_shows_file_names_inert():
    """The ingest bar names the file being read: a file name is as hostile as a log."""
    from rich.console import Console

    from context_forensics.render.progress import ProgressBar

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="truecolor", width=160)
    with ProgressBar(console, "ingest", detail=True) as bar:
        bar.file(f"/logs/{EVIL_NAME}.json", 1, 3)
        bar.bar.refresh()
    out = buf.getvalue()
    assert r"chat\x1b]52;c;bmFtZQ==\x07\x1b[2J[link=https:evil]n\u202e\x9b1m.json" in out
    assert "\x1b]" not in out and forbidden(PROGRESS.sub("", out)) == []


def test_the_consoles_net_catches_what_a_view_forgot():
    """A view that prints log text without ``safe`` still prints it inert (and is recorded)."""
    buf = io.StringIO()
    console = common.stdout_console()
    console.file = buf
    common.net_catches.clear()
    console.print("[link=https://evil.example]x[/link] \x1b]52;c;eA==\x07 :smile:")
    assert buf.getvalue() == "[link=https://evil.example]x[/link] \\x1b]52;c;eA== :smile:\n"  # rich drops BEL
    assert common.net_catches and "\x1b" in common.net_catches[0]
    common.net_catches.clear()
