"""Issue 13's error and help items: what a user sees when an argument, a file or a path is wrong.

- `models`, `formats` and `config show` take `--db` (checked like the reading commands' one);
- a usage error is one line, `ctxf CMD: what (try `ctxf CMD --help`)`, exit 2;
- an empty file says "empty file", a malformed JSON one `file:line:col`, without `--format` too;
- an output path that cannot be written (`report --html`, `audit --junit`, `--plot`) is a usage
  error found before any work;
- `--config /dev/null` is the defaults, a config that is no mapping a config error, and
  `audit /nonexistent` one error and no empty table;
- help names values, not Python types, lists the rules and policies, points `--model` to
  `ctxf models`, and `audit --no-recursive` exists.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.errors import ExitCode
from helpers import FIXTURES

SHAREGPT = FIXTURES / "sharegpt_small.json"
BAD = FIXTURES / "bad"
OVERFLOW = Path(__file__).parent.parent / "sample_logs" / "agent-overflow" / "shopcart-tiered-discounts.openai.json"


def run(*args, **env):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False, env=env or None)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "s.db"
    r = run("ingest", SHAREGPT, OVERFLOW, "--db", db)
    assert r.exit_code == 0, r.output
    return db


# ---------------------------------------------------------------- 1. --db on models, formats, config show


@pytest.mark.parametrize("cmd", [["models"], ["formats"], ["config", "show"]], ids=" ".join)
def test_db_is_accepted_checked_and_explained(tmp_path, cmd):
    missing = tmp_path / "no" / "x.db"
    r = run(*cmd, "--db", missing)
    assert r.exit_code == ExitCode.USAGE, r.output
    assert r.stderr.strip() == f"error: no store at {missing}: ingest logs first with `ctxf ingest LOGS --db {missing}`"
    assert tree(tmp_path) == []  # nothing created
    help_text = run(*cmd, "--help").stdout
    assert "--db PATH" in help_text
    said = help_text.split("--db PATH", 1)[1].split("\n  -", 1)[0]
    assert len(said.split()) > 4 and "SQLite store (default" not in said  # says what the store is for here


def test_formats_db_counts_the_stores_sessions(store):
    stored = json.loads(run("sessions", "--db", store, "--json").stdout)["sessions"]
    rows = json.loads(run("formats", "--db", store, "--json").stdout)["formats"]
    counts = {r["name"]: r["sessions"] for r in rows}
    assert sum(counts.values()) == len(stored)
    for s in stored:
        assert counts[s["format"]] == sum(x["format"] == s["format"] for x in stored)
    plain = json.loads(run("formats", "--json").stdout)["formats"]
    assert all("sessions" not in r for r in plain)  # without --db: the JSON as before
    assert [dict(r, sessions=None) for r in plain] == [dict(r, sessions=None) for r in rows]
    table = run("formats", "--db", store).stdout
    assert "sessions" in table.splitlines()[1] or "sessions" in table


def test_models_db_looks_up_the_stores_models(store):
    stored = json.loads(run("sessions", "--db", store, "--json").stdout)["sessions"]
    names = sorted({m for s in stored for m in [s["model"], *s["models"]] if m})
    assert names  # the overflow sample records its model
    r = run("models", "--db", store, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == json.loads(run("models", *names, "--json").stdout)


def test_models_db_without_recorded_models_lists_the_table(tmp_path):
    db = tmp_path / "s.db"
    assert run("ingest", SHAREGPT, "--db", db).exit_code == 0  # ShareGPT records no model
    assert json.loads(run("sessions", "--db", db, "--json").stdout)["sessions"][0]["model"] is None
    assert run("models", "--db", db, "--json").stdout == run("models", "--json").stdout


def test_config_show_db_is_the_storage_path(store):
    data = json.loads(run("config", "show", "--db", store, "--json").stdout)
    base = json.loads(run("config", "show", "--json").stdout)
    assert data["storage"]["path"] == data["store"]["path"] == str(store)
    assert (data["store"]["origin"], data["store"]["reason"]) == ("--db", "given with --db")
    data["storage"]["path"] = base["storage"]["path"]
    data["store"] = base["store"]
    assert data == base  # nothing else moves


# ---------------------------------------------------------------- 2. one-line usage errors

USAGE_ERRORS = [
    (["replay", "--foo", "x"], "ctxf replay"),
    (["sessions", "--db"], "ctxf sessions"),
    (["facts", "suggest"], "ctxf facts suggest"),
    (["facts", "x", "--bogus"], "ctxf facts show"),
    (["config", "show", "--config"], "ctxf config show"),
    (["audit", "--workers", "0"], "ctxf audit"),
    (["replay", "x", "--at", "two"], "ctxf replay"),
    (["report", "x"], "ctxf report"),
    (["sesions"], "ctxf"),
    (["config", "nope"], "ctxf config"),
    (["--bogus"], "ctxf"),
]


@pytest.mark.parametrize("args,path", USAGE_ERRORS, ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_usage_error_is_one_line(args, path):
    r = run(*args)
    assert r.exit_code == ExitCode.USAGE, r.output
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert line.startswith(f"{path}: ") and line.endswith(f"(try `{path} --help`)"), line
    assert "Usage:" not in line and "Error:" not in line and "Try '" not in line
    assert line[len(path) + 2].islower()  # part of a sentence, not click's capitalised one


def test_no_such_option_names_the_closest():
    r = run("replay", "--foo", "x")
    assert r.stderr.strip() == "ctxf replay: no such option --foo, did you mean --format? (try `ctxf replay --help`)"
    r = run("sesions")
    assert r.stderr.strip() == "ctxf: no such command 'sesions', did you mean 'sessions'? (try `ctxf --help`)"


def test_no_arguments_still_prints_the_help():
    r = run()
    assert "Commands:" in r.output and "ingest" in r.output
    r = run("config")
    assert "Commands:" in r.output and "show" in r.output


def test_console_script_prints_one_line():
    script = Path(sys.executable).parent / "ctxf"  # the console script, through main()
    if not script.exists():
        pytest.skip("the ctxf console script is not installed beside this Python")
    out = subprocess.run([script, "replay", "--foo", "x"], capture_output=True, text=True, timeout=120)
    assert out.returncode == ExitCode.USAGE
    assert out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "ctxf replay: no such option --foo, did you mean --format? (try `ctxf replay --help`)"]


# ---------------------------------------------------------------- 3. empty and malformed files


def _json_position(path: Path) -> tuple[int, int]:
    try:
        json.loads(path.read_text())
    except json.JSONDecodeError as e:
        return e.lineno, e.colno
    raise AssertionError(f"{path} is valid JSON")


@pytest.mark.parametrize("content,name", [(b"", "empty.json"), (b"  \n\n", "blank.json"), (b"", "empty.jsonl"),
                                          (b"\xef\xbb\xbf", "bom.json")])
def test_empty_file_says_empty_file(tmp_path, content, name):
    f = tmp_path / name
    f.write_bytes(content)
    db = tmp_path / "s.db"
    r = run("ingest", f, "--db", db)
    assert r.exit_code == ExitCode.ERROR, r.output
    assert f"error: {f}: empty file" in r.stderr
    assert "cannot tell which log format" not in r.stderr
    assert json.loads(run("sessions", "--db", db, "--json").stdout)["sessions"] == []


def test_empty_fixture_reads_the_same_with_and_without_format(tmp_path):
    plain = run("ingest", BAD / "empty.json", "--db", tmp_path / "a.db")
    forced = run("ingest", BAD / "empty.json", "--format", "sharegpt", "--db", tmp_path / "b.db")
    assert plain.exit_code == forced.exit_code == ExitCode.ERROR
    assert f"{BAD / 'empty.json'}: empty file" in plain.stderr and f"{BAD / 'empty.json'}: empty file" in forced.stderr


def test_malformed_json_names_line_and_column_without_format(tmp_path):
    f = BAD / "malformed.json"
    line, col = _json_position(f)
    r = run("ingest", f, "--db", tmp_path / "s.db")
    assert r.exit_code == ExitCode.ERROR, r.output
    assert f"error: {f}:{line}:{col}: malformed JSON" in r.stderr
    assert "cannot tell which log format" not in r.stderr
    forced = run("ingest", f, "--format", "sharegpt", "--db", tmp_path / "t.db")
    assert f"{f}:{line}:{col}: malformed JSON" in forced.stderr  # the same place either way


@pytest.mark.parametrize("text", [
    '{"messages": [\n  {"role": "user", "content": "hi"},,\n]}',  # found by no sniffer
    '{oops',
    '[\n  {"a": 1}\n  {"b": 2}\n]',
])
def test_broken_json_documents(tmp_path, text):
    f = tmp_path / "log.json"
    f.write_text(text)
    line, col = _json_position(f)
    r = run("ingest", f, "--db", tmp_path / "s.db")
    assert r.exit_code == ExitCode.ERROR, r.output
    assert f"{f}:{line}:{col}: malformed JSON" in r.stderr


def test_broken_first_jsonl_line_is_named(tmp_path):
    f = tmp_path / "log.jsonl"
    f.write_text('\n{"type": "user", "message": oops}\n{"type": "assistant"}\n')
    r = run("ingest", f, "--db", tmp_path / "s.db")
    assert r.exit_code == ExitCode.ERROR, r.output
    col = '{"type": "user", "message": oops}'.index("oops") + 1
    assert f"{f}:2:{col}: malformed JSON" in r.stderr


@pytest.mark.parametrize("name,text", [("notes.json", '{"hello": "world"}'), ("rows.jsonl", '{"x": 1}\n{"y": 2}\n'),
                                       ("notes.txt", "just some notes\n")])
def test_well_formed_unknown_files_stay_unknown_format(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    r = run("ingest", f, "--db", tmp_path / "s.db")
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "cannot tell which log format this is" in r.stderr


# ---------------------------------------------------------------- 4. output paths checked first


def _unwritable(tmp_path: Path) -> list[Path]:
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("x")
    paths = [a_file / "x.html", tmp_path / "folder"]
    (tmp_path / "folder").mkdir()
    if Path("/proc/self").exists():
        paths.append(Path("/proc/no-such-dir/x.html"))  # not writable even by root
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        paths.append(ro / "sub" / "x.html")
    return paths


@pytest.mark.parametrize("cmd,option", [
    (["report", OVERFLOW], "--html"),
    (["audit", OVERFLOW], "--junit"),
    (["audit", OVERFLOW], "--markdown"),
    (["facts", OVERFLOW, "--fact", "10%"], "--plot"),
    (["drift", OVERFLOW], "--plot"),
    (["replay", OVERFLOW], "--plot"),
    (["view", OVERFLOW], "-o"),
], ids=lambda c: " ".join(str(a) for a in c) if isinstance(c, list) and len(c) < 2 else None)
def test_unwritable_output_is_a_usage_error_before_any_work(tmp_path, cmd, option):
    for target in _unwritable(tmp_path):
        db = tmp_path / "work" / "s.db"
        r = run(*cmd, option, target, "--db", db)
        assert r.exit_code == ExitCode.USAGE, (target, r.output)
        lines = r.stderr.strip().splitlines()
        assert lines[0].startswith(f"error: {option} {target}: "), r.stderr
        assert lines[1].startswith("  hint: "), r.stderr
        assert "internal error" not in r.stderr
        assert not (tmp_path / "work").exists()  # checked before the log was read: no store made


def test_report_still_creates_missing_folders(tmp_path):
    out = tmp_path / "reports" / "today" / "r.html"
    r = run("report", OVERFLOW, "--html", out, "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]  # the probe left nothing


# ---------------------------------------------------------------- 5. --config /dev/null, audit /nonexistent


def test_dev_null_config_is_the_defaults(tmp_path):
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    r = run("config", "check", "--config", "/dev/null")
    assert r.exit_code == 0, r.output
    null = json.loads(run("config", "show", "--config", "/dev/null", "--json").stdout)
    blank = json.loads(run("config", "show", "--config", empty, "--json").stdout)
    assert null.pop("source") == "/dev/null"
    blank.pop("source")
    assert null == blank
    assert run("sessions", "--config", "/dev/null", "--db", tmp_path / "none.db").stderr.startswith("error: no store")


@pytest.mark.parametrize("text,kind", [("- a\n- b\n", "list"), ("just words\n", "str"), ("42\n", "int")])
def test_config_that_is_no_mapping_is_a_config_error(tmp_path, text, kind):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    r = run("config", "check", "--config", cfg)
    assert r.exit_code == ExitCode.USAGE, r.output
    assert r.stderr.startswith(f"error: {cfg}: a config is a mapping of sections, got {kind}")
    assert ": : " not in r.stderr and "hint: " in r.stderr


def test_config_folder_and_missing_file(tmp_path):
    r = run("config", "check", "--config", tmp_path)
    assert r.exit_code == ExitCode.USAGE and f"error: {tmp_path}: is a folder, not a config file" in r.stderr
    r = run("config", "check", "--config", tmp_path / "nope.yaml")
    assert r.exit_code == ExitCode.USAGE and "config file not found" in r.stderr


def test_audit_nonexistent_path_is_one_error_and_no_table(tmp_path):
    missing = tmp_path / "nonexistent"
    r = run("audit", missing, "--db", tmp_path / "s.db")
    assert r.exit_code == ExitCode.USAGE, r.output
    assert r.stdout == ""  # no empty table
    assert r.stderr.strip().splitlines()[0] == f"error: {missing}: no such file or folder"
    assert tree(tmp_path) == []
    both = run("audit", OVERFLOW, missing, "--db", tmp_path / "s.db")  # one typo among good paths
    assert both.exit_code == ExitCode.USAGE and both.stdout == "" and str(missing) in both.stderr


# ---------------------------------------------------------------- 6. help


def _all_commands():
    root = typer.main.get_command(app)
    for name in root.list_commands(None):
        sub = root.get_command(None, name)
        if hasattr(sub, "commands"):
            yield [name]
            yield from ([name, s] for s in sub.commands)
        else:
            yield [name]


ALL = list(_all_commands())
# Typer's and click's type labels. (A metavar of TEXT, click's label for a string, is left to the
# command: `view --goal TEXT` chose it as a word for "a text", no type leaked.)
JARGON = re.compile(r"<[a-zA-Z][\w\[\], ]*>|\blist\[|\bLIST\[|\b(STR|INTEGER|FLOAT|BOOLEAN)\b|\{session\}")


@pytest.mark.parametrize("columns", ["80", "120", "200"])
def test_no_python_type_jargon_in_any_help(columns):
    assert len(ALL) >= 15  # every command and sub-command
    for cmd in ALL:
        r = run(*cmd, "--help", COLUMNS=columns)
        assert r.exit_code == 0, (cmd, r.output)
        bad = JARGON.findall(r.stdout)
        assert not bad, f"ctxf {' '.join(cmd)} --help: {bad}\n{r.stdout}"


def test_fail_on_lists_the_rule_names():
    from context_forensics.config.audit_rules import RULE_PARAMS

    text = " ".join(run("audit", "--help", COLUMNS="200").stdout.split())
    said = text.split("--fail-on RULES", 1)[1].split(" --junit", 1)[0]
    for rule in RULE_PARAMS:
        assert rule in said, rule


@pytest.mark.parametrize("cmd", [["replay"], ["facts", "show"], ["drift"]], ids=" ".join)
def test_policy_lists_the_policies(cmd):
    from context_forensics.analysis.replay.policies import policies

    text = " ".join(run(*cmd, "--help", COLUMNS="200").stdout.split())
    said = text.split("--policy POLICY", 1)[1].split(" --", 1)[0]
    for name in policies():
        assert name in said, name


@pytest.mark.parametrize("cmd", [["replay"], ["facts", "show"], ["drift"], ["diverge"], ["report"]], ids=" ".join)
def test_model_points_to_ctxf_models(cmd):
    text = " ".join(run(*cmd, "--help", COLUMNS="200").stdout.split())
    said = text.split("--model MODEL", 1)[1].split(" --", 1)[0]
    assert "`ctxf models`" in said


def test_root_help_imports_no_numpy():
    code = ("import sys; from typer.testing import CliRunner; from context_forensics.cli import app; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0 and 'audit' in r.stdout; "
            "print(sorted(m for m in ('numpy', 'torch', 'tiktoken', 'yaml', 'context_forensics.analysis.replay') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_audit_recursive_can_be_turned_off(tmp_path):
    top = tmp_path / "logs"
    (top / "sub").mkdir(parents=True)
    shutil.copy(SHAREGPT, top / "a.json")
    shutil.copy(OVERFLOW, top / "sub" / "b.json")

    def audited(*flags):
        r = run("audit", top, *flags, "--db", tmp_path / f"s{len(flags)}{flags[:1]}.db", "--json")
        assert r.exit_code in (0, 3), r.output
        return sorted(s["source"] for s in json.loads(r.stdout)["sessions"])

    deep = audited()
    flat = audited("--no-recursive")
    assert len(flat) < len(deep)
    assert all("/sub/" not in s for s in flat) and any("/sub/" in s for s in deep)
    assert audited("--recursive") == deep


def test_usage_lines_name_arguments_without_braces():
    """Typer writes a required argument with a metavar as {SESSION}; the usage line says SESSION."""
    for cmd in ALL:
        usage = run(*cmd, "--help", COLUMNS="200").stdout.strip().splitlines()[0]
        assert usage.startswith("Usage: ctxf") and "{" not in usage, (cmd, usage)


# ---------------------------------------------------------------- an empty path


def _path_params():
    """(command words, the parameter) of every argument and option of every command whose type holds
    a ``Path``, and audit's PATHS (strings: a URL or a glob is no path)."""
    def walk(cmd, words):
        if hasattr(cmd, "commands"):  # a group
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*words, name])
            return
        for p in cmd.params:
            desc = getattr(p, "type_descriptor", None)
            if desc is not None and "Path" in str(desc.annotation) or p.name == "paths":
                yield words, p

    return list(walk(typer.main.get_command(app), []))


def test_every_path_parameter_refuses_an_empty_path(tmp_path, monkeypatch):
    """``Path("")`` is the current folder: `ctxf ingest ""` read whatever lay where the user stood,
    `--db ""` opened "." as a store. Every PATH/FILE parameter of every command takes it as a usage
    error naming the parameter, before any work (nothing is made where the user stands)."""
    from context_forensics.cli.common import given_path

    params = _path_params()
    assert len(params) >= 15 and any(p.name == "paths" for _, p in params)
    monkeypatch.chdir(tmp_path)
    for words, p in params:
        parser = p.type_descriptor.parameter_info.parser
        assert parser is given_path or p.name == "paths" and words == ["audit"], (words, p.name)
        if isinstance(p, typer.core.TyperArgument):
            args = [*words, ""]
        else:
            args = [*words, *(["x"] if words in (["view"], ["report"]) else []), p.opts[0], ""]
        r = run(*args)
        assert r.exit_code == ExitCode.USAGE, (args, r.output)
        assert "empty path" in r.stderr, (args, r.stderr)
    assert list(tmp_path.iterdir()) == []


def test_shell_completion_completes_commands_and_options():
    """``ctxf --show-completion SHELL`` prints the script; the script's requests complete names."""
    import os
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "ctxf"
    if not exe.is_file():
        pytest.skip("the console script is not installed beside this interpreter")
    script = subprocess.run([exe, "--show-completion", "bash"], capture_output=True, text=True, timeout=60)
    assert script.returncode == 0 and "_ctxf_completion" in script.stdout

    def complete(words: str) -> list[str]:
        env = {**os.environ, "_CTXF_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - 1)}
        r = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert complete("ctxf ing") == ["ingest"]
    assert "--policy" in complete("ctxf replay --po")


def test_ctxf_errors_named_like_clicks_are_not_taken_for_usage_errors(tmp_path):
    """ctxf's own UsageError family (NotFoundError ...) shares click's class name: under
    CTXF_DEBUG it reaches the one-line usage handler, which must leave it alone."""
    exe = Path(sys.executable).parent / "ctxf"
    if not exe.is_file():
        pytest.skip("the console script is not installed beside this interpreter")
    db = tmp_path / "s.db"
    assert run("ingest", Path(__file__).parent.parent / "sample_logs" / "drift-chat", "-r", "--db", db).exit_code == 0
    r = subprocess.run([exe, "show", "nope", "--db", db], env={**os.environ, "CTXF_DEBUG": "1"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "AttributeError" not in r.stderr
    assert "NotFoundError: no session matches 'nope'" in r.stderr
