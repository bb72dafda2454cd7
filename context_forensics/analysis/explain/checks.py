"""Checks: the failing action of a failed run, read from its actions when no fact is involved.

A **check** is an action that runs tests or a build (``pytest``, ``manage.py test``, ``npm run
build``, ``go test``, ``cargo build``, ``make``, ``tsc``, ...): ``checks`` lists them, with
whether each passed (from its output's summary, else its return code) and whether it failed for
reasons of the **environment** (settings not configured, the test runner not installed, a test
dependency missing, an ASCII locale) rather than of the code under test.

The edits that count are those that applied, of the files the task is about (``applied``:
``effective_edits``, ``source_edits``, re-exported here). ``failing_action`` picks the decisive
step: rule A (``failing_check``), the run's last check failed and it never got past it; rule B
(``submission``), the run ends in a final submission."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from ..diverge.actions import parse_args, shell_segments, shell_tokens, tool_kind
from ..diverge.decisive import final_patch, unsubmitted_words
from ..diverge.display import one_line
from ..diverge.edits import EditAction
from ..diverge.events import Event, RunEvents
from .applied import (
    applied_edits,
    bash_syntax_line,
    command_lines,
    effective_edits,
    source_edits,
    strip_wrappers,
    task_files,
)

__all__ = ["Check", "Decision", "applied_edits", "checks", "command_kind", "effective_edits", "env_cause",
           "failing_action", "judge", "names_in", "segment_kind", "source_edits", "task_files"]

FEW_STEPS = 3  # an edit this close before a failing check is taken as the change it checks

# --- which commands are checks -------------------------------------------------------------

_TEST_PROGRAMS = frozenset({"pytest", "py.test", "tox", "nox", "nosetests", "nose2", "trial", "jest", "vitest",
                            "mocha", "ava", "karma", "jasmine", "rspec", "phpunit", "pest", "ctest", "bats",
                            "playwright", "cypress", "behave", "testr", "stestr", "prove"})
_BUILD_PROGRAMS = frozenset({"tsc", "tsgo", "vue-tsc", "ninja", "bazel", "bazelisk", "msbuild", "webpack",
                             "rollup", "esbuild", "gcc", "g++", "clang", "javac", "mypy", "pyright"})
_PY_TEST_MODULES = frozenset({"pytest", "unittest", "nose", "nose2", "tox", "nox", "trial", "xmlrunner"})
_PY_BUILD_MODULES = frozenset({"build", "compileall", "py_compile", "mypy", "pyright"})
_SCRIPT_RUNNERS = re.compile(r"(?:^|/)(?:runtests|run_?tests?|run-tests?|test_?all)(?:\.py|\.sh)?$")
_MANAGERS = frozenset({"npm", "yarn", "pnpm", "bun"})
_TEST_SCRIPT = re.compile(r"^(?:test|tests|e2e|spec|unit|integration)(?:[:_-][\w:.-]*)?$|^[\w.-]*:test$")
_BUILD_SCRIPT = re.compile(r"^(?:build|compile|publish|prepublish\w*|check|typecheck|type-check|tsc|dist|release"
                           r"|bundle|package)(?:[:_-][\w:.-]*)?$")
_TB = {"test": "test", "build": "build"}
_TOOL_TASKS = {"go": {**_TB, "vet": "build", "install": "build"}, "dotnet": _TB, "swift": _TB,  # program -> {sub: kind}
               "cargo": {**_TB, "nextest": "test", "check": "build", "bench": "test"}, "cabal": _TB, "zig": _TB,
               "stack": _TB, "mix": {"test": "test", "compile": "build"},
               "deno": {"test": "test", "check": "build", "compile": "build"},
               "sbt": {"test": "test", "compile": "build"}, "meson": {"test": "test", "compile": "build"},
               "bun": {"test": "test"}, "vite": {"build": "build"}}
_MAVEN = {"test": "test", "verify": "test", "integration-test": "test", "compile": "build", "package": "build",
          "install": "build", "test-compile": "build"}
_GRADLE = {"test": "test", "check": "test", "build": "build", "assemble": "build", "compilejava": "build"}
_NOT_A_RUN = frozenset({"--version", "-V", "--help", "-h", "--collect-only", "--co", "--list"})


def segment_kind(seg: list[str]) -> str | None:
    """``test`` / ``build`` when one simple command (its tokens) runs tests or a build, else None."""
    seg = strip_wrappers(seg)
    if not seg or any(t in _NOT_A_RUN for t in seg[1:]):
        return None
    prog, args = posixpath.basename(seg[0]), seg[1:]
    words = [a for a in args if not a.startswith("-")]
    if prog in _TEST_PROGRAMS or prog in _BUILD_PROGRAMS:
        return "test" if prog in _TEST_PROGRAMS else "build"
    if re.fullmatch(r"python[\d.]*|pypy3?|coverage", prog):
        if prog == "coverage":
            args = args[1:] if args[:1] == ["run"] else args
        if "-m" in args and args.index("-m") + 1 < len(args):
            mod = args[args.index("-m") + 1]
            if mod == "django":  # python -m django test
                return "test" if "test" in args[args.index("-m") + 2:][:1] else None
            return "test" if mod in _PY_TEST_MODULES else "build" if mod in _PY_BUILD_MODULES else None
        script = next((a for a in args if not a.startswith("-")), None)
        if script is None:
            return None
        rest = args[args.index(script) + 1:]
        if posixpath.basename(script) in ("manage.py", "django-admin.py") and rest[:1] == ["test"]:
            return "test"
        if posixpath.basename(script) == "setup.py" and rest[:1] and rest[0] in ("test", "build", "build_ext"):
            return "test" if rest[0] == "test" else "build"
        return "test" if _SCRIPT_RUNNERS.search(script) else None
    if prog == "django-admin" and words[:1] == ["test"]:
        return "test"
    if prog in ("bash", "sh", "zsh") and args:  # ``bash -c 'pytest -q'``, ``sh run_tests.sh``
        if "-c" in args[:-1] or "-lc" in args[:-1]:
            return command_kind(args[max(args.index(a) for a in ("-c", "-lc") if a in args[:-1]) + 1])
        return "test" if words and _SCRIPT_RUNNERS.search(words[0]) else None
    if _SCRIPT_RUNNERS.search(seg[0]) and not prog.endswith(".py") or prog in ("runtests.py", "run_tests.py"):
        return "test"
    if prog in _MANAGERS:
        if words[:1] in (["test"], ["t"]) or (prog != "npm" and words[:1] == ["test"]):
            return "test"
        script = words[1] if words[:1] in (["run"], ["run-script"]) and len(words) > 1 else (
            words[0] if prog != "npm" and words else None)
        if script and _TEST_SCRIPT.match(script):
            return "test"
        if script and _BUILD_SCRIPT.match(script):
            return "build"
        return None
    if prog in ("make", "gmake"):
        targets = [w for w in words if "=" not in w]
        if not targets:
            return "build"
        if any(re.match(r"(?:test|check|tests|unittest|pytest)\b", t) for t in targets):
            return "test"
        return "build" if any(t in ("all", "build", "install", "compile", "dist") for t in targets) else None
    if prog in ("cmake",) and "--build" in args:
        return "build"
    if prog in ("mvn", "mvnw", "gradle", "gradlew"):  # goals / tasks (``:app:test``)
        table = _MAVEN if prog.startswith("mvn") else _GRADLE
        kinds = [table[g] for w in words if (g := w.lower().rsplit(":", 1)[-1]) in table]
        return ("test" if "test" in kinds else "build") if kinds else None
    if prog in _TOOL_TASKS and words[:1] and words[0] in _TOOL_TASKS[prog]:
        return _TOOL_TASKS[prog][words[0]]
    return None


def command_kind(cmd: str) -> str | None:
    """``test`` / ``build`` when a shell command runs tests or a build (``test`` wins), else None."""
    kinds = [k for k, _ in _check_segments(cmd)]
    return "test" if "test" in kinds else (kinds[0] if kinds else None)


def _check_segments(cmd: str) -> list[tuple[str, int]]:
    """(kind, line number) of each check a command runs; heredoc bodies are data, not commands."""
    return [(k, start) for line, start, _ in command_lines(cmd) for seg in shell_segments(shell_tokens(line) or [])
            if seg and seg[0] not in ("|", "&&", ";", "||", "&") and (k := segment_kind(seg))]


# --- what a check's output says ---------------------------------------------------------------

_FAIL_MARKS = (
    (re.compile(r"\b([1-9]\d*) failed\b|=+ .*\b([1-9]\d*) errors? in\b"), "pytest"),
    (re.compile(r"^FAILED \(((?:failures|errors)=\d+(?:, (?:failures|errors|skipped|expected failures)=\d+)*)\)",
                re.MULTILINE), "unittest"),
    (re.compile(r"\berror TS\d+\b"), "tsc"),
    (re.compile(r"^npm (?:ERR!|error) ", re.MULTILINE), "npm"),
    (re.compile(r"^Tests?:\s+(\d+) failed", re.MULTILINE), "jest"),
    (re.compile(r"^\s*(\d+) failing\b", re.MULTILINE), "mocha"),
    (re.compile(r"^(?:--- FAIL|FAIL\s)", re.MULTILINE), "go"),
    (re.compile(r"test result: FAILED|^error(?:\[E\d+\])?: |could not compile", re.MULTILINE), "cargo"),
    (re.compile(r"^make(?:\[\d+\])?: \*\*\*", re.MULTILINE), "make"),
    (re.compile(r"BUILD FAILURE|BUILD FAILED|FAILURE: Build failed"), "maven/gradle"),
    (re.compile(r"\b\d+ examples?, ([1-9]\d*) failures?"), "rspec"),
    (re.compile(r"\b\d+ tests?, ([1-9]\d*) failures?"), "exunit"),
    (re.compile(r"^FAILURES!$|^ERRORS!$", re.MULTILINE), "phpunit"),
    (re.compile(r"^ERROR: (?:usage|file or directory not found|not found)|^ImportError while loading", re.MULTILINE),
     "pytest"),
    (re.compile(r"^(?:[\w./-]+:\d+:\d+: )?error: |^\S+\.\w+:\d+:(?:\d+:)? error\b", re.MULTILINE), "compiler"),
)
_PASS_MARKS = re.compile(
    r"=+ (?:\d+ passed|\d+ passed, \d+ \w+)[^=\n]* in [\d.]+s?\b|^\d+ passed\b|^OK(?: \(.*\))?$|\b\d+ passed\b"
    r"|^Tests?:\s+\d+ passed|^\s*\d+ passing\b|^ok\s+\S+|test result: ok\.|BUILD SUCCESS"
    r"|\b\d+ (?:examples?|tests?), 0 failures"
    r"|^OK \(\d+ tests?|^PASS\b", re.MULTILINE)
_NO_TESTS = re.compile(r"^Ran 0 tests\b|\bno tests ran\b|collected 0 items|^No tests found", re.MULTILINE)
# causes that lie in the environment, not in the code under test
_ENVIRONMENT = re.compile(
    r"ImproperlyConfigured|settings are not configured|DJANGO_SETTINGS_MODULE|AppRegistryNotReady|Apps aren't loaded"
    r"|No module named (?:'?)(?:pytest|unittest2|nose|tox|mock|hypothesis)\b|command not found|: not found$"
    r"|is not recognized as an internal or external command|can't open file|\bENOENT\b|\bEACCES\b|Permission denied"
    r"|'ascii' codec can't (?:de|en)code|Could not resolve host|ECONNREFUSED|ENOTFOUND|getaddrinfo"
    r"|could not connect to server|unrecognized arguments|^ERROR: usage:|Cannot find module '(?!\.)[^']*' from"
    r"|No such file or directory: '[^']*(?:python|node|pytest)\w*'|\bno such option\b", re.MULTILINE)
_MISSING_MODULE = re.compile(r"No module named '?([\w.]+)'?")
_SECTION = re.compile(r"^(?:={20,}$|(?=_{3,} .+ _{3,}$))", re.MULTILINE)  # unittest / pytest failure sections
_HEADLINE = re.compile(r"^(?:ERROR|FAIL|FAILED):? \S|^_{3,} .+ _{3,}$")
_EXCEPTION = re.compile(r"^(?:E\s+)?(\w+(?:\.\w+)*(?:Error|Exception|Exit|Failure|Warning|NotFound|Interrupt)"
                        r"\b.*)$", re.MULTILINE)


@dataclass
class Check:
    """An action that ran tests or a build, and what its output says."""

    step: int | None
    seq: int
    kind: str  # test | build
    command: str
    passed: bool | None  # None: its output and return code do not tell
    environment: bool  # it failed for reasons of the environment, not of the code under test
    summary: str  # one line: why passed / failed
    result_step: int | None = None
    result_seq: int | None = None
    output: str = field(default="", repr=False)
    event: Event | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "seq": self.seq, "kind": self.kind, "command": one_line(self.command, 200),
                "passed": self.passed, "environment": self.environment, "summary": self.summary,
                "result_step": self.result_step, "result_seq": self.result_seq}


def _blocks(text: str) -> list[str]:
    """The per-failure sections of a test report (unittest's ``=====`` blocks, pytest's
    ``____ name ____`` sections, else its short-summary lines); [] when it has none."""
    out = [b.strip() for b in _SECTION.split(text) if _HEADLINE.match(b.strip().split("\n", 1)[0])]
    return out or re.findall(r"^(?:FAILED|ERROR) \S+::\S+.*$", text, re.MULTILINE)


def env_cause(text: str, modules: AbstractSet[str]) -> str | None:
    """The line saying the environment is the cause, or None. A missing module is the
    environment's unless it is one of the packages the run changed (``modules``)."""
    m = _ENVIRONMENT.search(text)
    if m:
        return _line_at(text, m.start())
    for mm in _MISSING_MODULE.finditer(text):
        if mm.group(1).split(".")[0] not in modules:
            return _line_at(text, mm.start())
    return None


def _line_at(text: str, pos: int) -> str:
    end = text.find("\n", pos)
    return one_line(text[text.rfind("\n", 0, pos) + 1:end if end >= 0 else len(text)], 160)


def _first_error(text: str) -> str | None:
    """The line that says what failed: pytest's summary or ``E`` line, an exception, an error."""
    m = (re.search(r"^FAILED \S+ - .+$|^E {2,}\S.*$", text, re.MULTILINE) or _EXCEPTION.search(text)
         or re.search(r"^.*\berror\b.*$", text, re.MULTILINE | re.IGNORECASE))
    return one_line(m.group(0).removeprefix("E ").strip(), 160) if m else None


def judge(command: str, output: str, rc: int | None,
          modules: AbstractSet[str] = frozenset()) -> tuple[bool | None, bool, str]:
    """(passed, environment, summary) of one check's output; ``modules``: the top-level packages
    the run edited (a missing one of those is the code's fault, not the environment's)."""
    piped = bool(re.search(r"\|\s*(?:tail|head|grep|less|sed|awk|cut|sort|uniq|tee|wc)\b|\|\||;\s*echo\b", command))
    if re.match(r"Command running in background\b", output):
        return None, False, "it ran in the background: its output is not in the log"
    rc_known = rc is not None and not piped  # a pipe's code is its last command's (``| grep`` gives 1 on no match)
    fails: list[tuple[str, re.Match[str] | None]] = [(name, m) for rx, name in _FAIL_MARKS if (m := rx.search(output))]
    passes = _PASS_MARKS.search(output)
    if not fails and _NO_TESTS.search(output):
        return None, False, "no tests ran"
    if not fails:
        if rc_known and rc != 0:
            fails = [("rc", None)]
        elif passes:
            return True, False, f"passed ({one_line(passes.group(0).strip('= '), 80)})"
        elif rc_known:
            return True, False, "passed (return code 0)"
        else:
            if cause := env_cause(output, modules):
                return False, True, f"environment: {cause}"
            return None, False, "its output and return code do not say"
    blocks = _blocks(output)
    if blocks:
        env = [env_cause(b, modules) for b in blocks]
        if all(env):
            return False, True, f"environment: {len(blocks)} failure(s), all of the environment ({env[0]})"
        code = next(b for b, e in zip(blocks, env) if not e)
        why = _first_error(code) or one_line(code, 160)
    else:
        cause = env_cause(output, modules)
        code_marks = re.search(r"AssertionError|\bassert\b|error TS\d+|error\[E\d+\]|\bexpected\b", output)
        if cause and not code_marks:
            return False, True, f"environment: {cause}"
        why = _first_error(output) or (f"return code {rc}" if rc else "failure reported")
    name, m = fails[0]
    count = m.group(1) if m is not None and m.groups() and m.group(1) else None
    label = f"{name}: {count}" if count and name == "unittest" else f"{name}: {count} failed" if count else name
    if name == "tsc":
        label = f"tsc: {len(_FAIL_MARKS[2][0].findall(output))} error(s)"
    return False, False, f"failed ({label}): {why}"


_TEST_TOOL = re.compile(r"(?:run_?)?(?:tests?|pytest|test_?suite)")  # a tool that runs the tests itself


def _command_of(e: Event) -> str | None:
    """The command an action runs: a shell tool's, or the ``command`` argument of another
    command-running tool (Cline's ``execute_command``); a test tool's call; None for the rest."""
    kind = tool_kind(e.tool)
    if kind == "shell" or _TEST_TOOL.fullmatch((e.tool or "").lower()):
        return e.text
    if kind == "editor" or not e.arguments:
        return None
    args = parse_args(e.arguments)
    cmd = args.get("command", args.get("cmd"))
    return cmd if isinstance(cmd, str) and not isinstance(args.get("path"), str) else None


def checks(rev: RunEvents, modules: set[str] | None = None) -> list[Check]:
    """Every action of the run that ran tests or a build (one that never ran, because the shell
    could not parse the command before it, is left out), in order."""
    modules = _modules(effective_edits(rev)) if modules is None else modules
    out: list[Check] = []
    for e in rev.aligned():
        cmd = _command_of(e) if e.type == "action" else None
        if cmd is None:
            continue
        res = e.result
        text = res.text if res is not None else ""
        bad = bash_syntax_line(text)  # a check on or after the line bash could not parse never ran
        found = ["test"] if _TEST_TOOL.fullmatch((e.tool or "").lower()) else [
            k for k, ln in _check_segments(cmd) if bad is None or ln < bad]
        if not found:
            continue
        kind = "test" if "test" in found else found[0]
        passed, env, summary = judge(cmd, text, res.rc, modules) if res is not None else (
            None, False, "no result in the log")
        out.append(Check(e.step, e.seq, kind, cmd, passed, env, summary,
                         result_step=res.step if res else None, result_seq=res.seq if res else None,
                         output=text, event=e))
    return out


# --- the failing action ------------------------------------------------------------------------

@dataclass
class Decision:
    """The decisive step of a failed run and how it was chosen."""

    step: int
    seq: int
    why: str  # failing_check | submission | unsubmitted
    action: str  # one line
    files: list[str]
    check: Check | None
    text: str  # one sentence of why, with step numbers
    submission_step: int | None = None  # rule B: the step of the final submission

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "seq": self.seq, "why": self.why, "action": self.action, "files": self.files,
                "text": self.text, "check": self.check.to_dict() if self.check else None,
                "submission_step": self.submission_step}


def names_in(output: str, files: list[str]) -> list[str]:
    """The files of ``files`` that a failure output names (a path, or a path ending it)."""
    out = []
    for f in files:
        base = posixpath.basename(f)
        for m in re.finditer(rf"[\w./@+-]*{re.escape(base)}\b", output):
            p = m.group(0).lstrip("./")
            if p and (f == p or f.endswith("/" + p) or p.endswith("/" + f)):
                out.append(f)
                break
    return out


def _submission(rev: RunEvents, row: dict[str, Any] | None, edited: bool = False) -> tuple[int, int, str] | None:
    """(step, seq, what) of the run's final submission: a submission record, a submit action, the
    final answer of a graded sample (an eval's scored reply), or the final answer of a one-task run
    that changed the task's files (``edited``: an agent's "done" hands its work in; not the last
    reply of a conversation a person kept going); None otherwise."""
    live, n = rev.aligned(), len(rev.step_seqs)
    for e in reversed(live):
        if e.type == "action" and e.key == "action:submit":
            return e.step or n, e.seq, "submit action"
        if e.type == "answer" and e.submission:
            return e.step or n, e.seq, "submission record"
    meta = (row or {}).get("metadata") or {}
    # graded: the log records the answer's grading (an eval's target or scores), or the run is a
    # plain chat with an outcome (its answer is all it produced); an agent run's outcome label
    # may judge the repository, not its last words
    chat = not any(e.type == "action" for e in live)
    graded = "target" in meta or "scores" in meta or (chat and (row or {}).get("outcome") in ("success", "failure"))
    last = next((e for e in reversed(live) if e.type in ("action", "answer", "result")), None)
    # a conversation (a person spoke again after the run began) does not hand its work in with
    # its last answer: only a one-task run's "done" counts as its submission. A person's message,
    # not the harness's user text (Cline's environment details, Aider's file lists: ``Event.person``)
    first = next((e.seq for e in live if e.type in ("action", "answer")), None)
    one_task = first is not None and not any(e.person and e.seq > first for e in live)
    if (graded or (edited and one_task)) and last is not None and last.type == "answer" and last.step is not None:
        return last.step, last.seq, "final answer"
    return None


def _modules(edits: list[EditAction]) -> set[str]:
    """The top-level folders of the files the run edited (a missing module among them is the code's)."""
    return {f.path.split("/", 1)[0] for a in edits for f in a.edits if "/" in f.path}


def _failing_check(found: list[Check], src: list[EditAction]) -> Decision | None:
    """Rule A: the run's last check failed (not for the environment), and it never got past it: no
    check passed after it and no edit of the task's files changed what it checked."""
    if not found or found[-1].passed is not False or found[-1].environment:
        return None
    if src and src[-1].event.seq > found[-1].seq:  # an edit after it: what it checked is gone
        return None
    first = found[-1]
    for c in reversed(found[:-1]):  # back over the failed checks that end the run, to an edit or a pass
        if c.passed is not False or any(c.seq < a.event.seq < first.seq for a in src):
            break
        first = first if c.environment else c
    said = f"The run's checks fail from step {first.step} on ({first.summary}) and it never got past them"
    act = next((a for a in reversed(src) if a.event.seq < first.seq), None)
    gap = first.step - act.event.step if act is not None and first.step and act.event.step else None
    if act is not None:
        named = names_in(first.output, act.files)
        if named or (gap is not None and gap <= FEW_STEPS):
            how = f"its output names {', '.join(named)}" if named else f"{gap} step(s) later"
            return Decision(act.event.step or 0, act.event.seq, "failing_check", one_line(act.event.display),
                            act.files, first, f"{said}; the last change before, at step {act.event.step}, edited "
                                              f"{', '.join(act.files)} ({how}).")
    if act is not None and gap is not None:
        said += (f"; the last edit of the task's files, at step {act.event.step}, is not implicated (its files are "
                 f"not named and it is {gap} steps earlier)")
    shown = first.event.display if first.event is not None else first.command
    return Decision(first.step or 0, first.seq, "failing_check", one_line(shown), [], first, said + ".")


def failing_action(rev: RunEvents, row: dict[str, Any] | None = None) -> Decision | None:
    """The decisive step of a failed run from its actions alone; ``row``: its session row (the
    metadata's recorded submission, whether its final answer was graded).

    Rule A (``failing_check``): the run's last check failed, not for reasons of the environment.
    The failing check is the first of the failed checks that end the run (back to a check that
    passed or does not tell, or to an edit of the task's files); the decision is the last edit of
    the task's files before it when the failure output names a file it changed or it comes at
    most ``FEW_STEPS`` steps before, else the failing check's own step.
    Rule B (``submission``): the run ends in a final submission (a graded run's final answer,
    or the final answer of a run that changed the task's files, counts): the last edit of the task's files
    before it (the change it carries), else the submission's own step (not a submit action of a run
    that changed no file and whose log records no outcome: it handed in nothing, and no failure is
    known; a submission record or a graded answer is what was handed in); but when the submitted patch
    lacks the run's own fix because a ``git commit`` / ``git stash`` took it out of the diff first
    (``unsubmitted``), that command's step: the fix was made, the submission left it out. None when
    neither applies."""
    edits = effective_edits(rev)
    src = source_edits(rev, row, edits)
    decision = _failing_check(checks(rev, _modules(edits)), src)
    if decision is not None or (sub := _submission(rev, row, edited=bool(src))) is None:
        return decision
    step, seq, what = sub
    own = [u for u in final_patch(rev, row, edits).unsubmitted if u["by"] and u["by_seq"] < seq]
    if own:
        u = own[0]
        by = next(e for e in rev.events if e.seq == u["by_seq"] and e.type == "action")
        said = "; ".join(unsubmitted_words(x) for x in own)
        return Decision(u["by_step"] or 0, u["by_seq"], "unsubmitted", one_line(by.display), [], None,
                        f"The run ends in its {what} at step {step}, which does not carry its own fix: {said}.",
                        submission_step=step)
    act = next((a for a in reversed(src) if a.event.seq < seq), None)
    if act is not None:
        return Decision(act.event.step or 0, act.event.seq, "submission", one_line(act.event.display), act.files,
                        None, f"The run ends in its {what} at step {step}; the last change it carries is step "
                              f"{act.event.step}, an edit of {', '.join(act.files)}.", submission_step=step)
    if what == "submit action" and not edits and (row or {}).get("outcome") in (None, "unknown"):
        return None  # its submit hands in no change (no file edited) and no failure is recorded: nothing to explain
    display = next((one_line(e.display) for e in rev.events if e.seq == seq), what)
    return Decision(step, seq, "submission", display, [], None,
                    f"The run ends in its {what} at step {step} and made no edit of the task's files before it.",
                    submission_step=step)
