"""The pytest plugin (entry point ``pytest11``): an agent test suite fails on a lost constraint
as it fails on a wrong answer.

``pytest --ctxf-audit DIR [--ctxf-fail-on RULES] [--ctxf-config FILE]`` audits the session logs
the suite wrote into DIR once its tests have run: one synthetic test item, ``ctxf-audit[DIR]``,
appended after collection (after ``-k`` / ``-m`` deselection and any reordering plugin, so it
runs last and is never deselected). It fails with a readable report when a gating rule found
something (audit exit code 3) or an input could not be read (1), so the exit status and
``--junitxml`` carry the audit for free; the terminal summary has a ``ctxf audit`` section.
Under pytest-xdist the workers add no item: the controller audits at session finish, when
every worker is done, and reports the same way.

The ``ctxf`` fixture gives the Python API inside a test (``ctxf.facts(log, "...")``), bound
to a per-test in-memory store unless the call passes ``store=``, ``db=`` or ``config=``.

pytest loads this module in every run of every project that has ctxf installed, so it stays
inert without its options: nothing of ctxf is imported here at module level, no item is added
and nothing is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

if TYPE_CHECKING:  # pragma: no cover - loaded inside the hooks
    from .api import AuditResult, Workspace

NAME = "ctxf-audit"
_STATE = pytest.StashKey["AuditState"]()
_STORE_ARGS = ("store", "db", "config")


class AuditState:
    """What the plugin was asked (the options, resolved at start) and what the audit found."""

    def __init__(self, given: str, path: Path, fail_on: list[str], config: Path | None) -> None:
        self.given = given  # DIR as typed, for the item's name
        self.path = path  # resolved against the invocation folder (a test may chdir)
        self.fail_on = fail_on
        self.config = config
        self.result: AuditResult | None = None
        self.problem: str | None = None  # the audit could not run: why (the item's failure)
        self.ran = False

    @property
    def failed(self) -> bool:
        return self.problem is not None or (self.result is not None and self.result.exit_code != 0)


class AuditFailed(Exception):
    """The audit found what fails the run; the text is the report shown for the item."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ctxf", "context forensics: audit the session logs the suite wrote")
    group.addoption("--ctxf-audit", metavar="DIR", default=None,
                    help="after the tests, audit the session logs in DIR (walked with its sub-folders) with "
                         "the config's audit rules; findings of gating rules or unreadable logs fail the run")
    group.addoption("--ctxf-fail-on", metavar="RULES", default=None,
                    help="comma-separated audit rules whose failures fail the run, besides those marked "
                         "`fail: true` in the config (as `ctxf audit --fail-on`)")
    group.addoption("--ctxf-config", metavar="FILE", default=None,
                    help="the forensics_config.yaml whose `audit:` rules and models to use (default: "
                         "$CTXF_CONFIG, then ./forensics_config.yaml, then the built-in defaults)")


def pytest_configure(config: pytest.Config) -> None:
    given = config.getoption("ctxf_audit")
    fail_on = config.getoption("ctxf_fail_on")
    cfg_file = config.getoption("ctxf_config")
    base = Path(config.invocation_params.dir)
    cfg_path = None if cfg_file is None else base / cfg_file
    if cfg_path is not None and not cfg_path.is_file():
        raise pytest.UsageError(f"--ctxf-config {cfg_file}: no such file")
    if given is None:
        if fail_on is not None:
            raise pytest.UsageError("--ctxf-fail-on goes with --ctxf-audit DIR "
                                    "(the folder the suite writes its session logs to)")
        return
    names = [r.strip() for r in (fail_on or "").split(",") if r.strip()]
    state = AuditState(given, base / given, names, cfg_path)
    if not hasattr(config, "workerinput"):  # an xdist worker leaves the audit to the controller
        _check(state)
    config.stash[_STATE] = state


def _check(state: AuditState) -> None:
    """Load the config and check the rule names before the tests run, not after them: the
    audit's own checks, over an empty in-memory store."""
    from . import api
    from .errors import CtxfError

    try:
        with api.open_store(":memory:", config=state.config) as ws:
            api.audit([], fail_on=state.fail_on, store=ws)
    except CtxfError as e:
        raise pytest.UsageError(f"ctxf: {str(e).replace('--fail-on', '--ctxf-fail-on')}") from None


def _xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.hasplugin("dsession")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> Any:
    # A wrapper: this runs after every plugin's own modifyitems (deselection, reordering).
    out = yield
    state = config.stash.get(_STATE, None)
    if state is not None and not hasattr(config, "workerinput"):
        name = f"{NAME}[{state.given}]"
        items.append(AuditItem.from_parent(session, name=name, nodeid=name, path=state.path, state=state))
    return out


class AuditItem(pytest.Item):
    """The audit of the logs the suite wrote, run as the session's last test."""

    def __init__(self, *, state: AuditState, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state = state

    def runtest(self) -> None:
        text = run_audit(self.state)
        if text is not None:
            raise AuditFailed(text)
        if self.state.result is not None and not self.state.result.sessions:
            pytest.skip(f"no session logs in {self.state.given}: nothing audited")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, AuditFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


def run_audit(state: AuditState) -> str | None:
    """Audit ``state.path``: None when nothing fails the run, else the failure report."""
    from . import api
    from .errors import CtxfError

    state.ran = True
    if not state.path.exists():
        state.problem = (f"{state.given} does not exist: the suite wrote no session logs there "
                         f"(resolved to {state.path}). Write the logs there, or create the folder "
                         "(e.g. in conftest.py) if a run may legitimately write none.")
        return state.problem
    try:
        with api.open_store(":memory:", config=state.config) as ws:
            state.result = api.audit([state.path], fail_on=state.fail_on, store=ws)
    except CtxfError as e:
        state.problem = f"the audit of {state.given} could not run: {e}"
        return state.problem
    return report_text(state) if state.failed else None


def _rows(result: AuditResult) -> list[tuple[str, str, str, str, str]]:
    gating = {r["name"] for r in result.rules if r.get("fail")}
    return [(f["session"], f["rule"], "" if f.get("step") is None else str(f["step"]),
             "fails the run" if f["rule"] in gating else "", f["message"] or "")
            for f in result.failures()]


def report_text(state: AuditState) -> str:
    """The findings in words: per session, each failed rule (step, message), then the inputs the
    audit could not read."""
    if state.problem is not None:
        return state.problem
    res = state.result
    assert res is not None
    t = res.totals
    lines = [f"ctxf audit of {state.given}: {t.get('sessions', 0)} session(s), {t.get('fail', 0)} failed "
             f"result(s), {t.get('unreadable', 0)} unreadable input(s); audit exit code {res.exit_code}"]
    gating = {r["name"] for r in res.rules if r.get("fail")} | set(state.fail_on)
    by_session: dict[str, list[dict[str, Any]]] = {}
    for f in res.failures():
        by_session.setdefault(f["session"], []).append(f)
    sources = {s["id"]: s.get("source") for s in res.sessions}
    for sid, fails in by_session.items():
        lines.append(f"session {sid} ({sources.get(sid) or fails[0].get('title') or ''})")
        for f in fails:
            step = "" if f.get("step") is None else f" at step {f['step']}"
            flag = " [fails the run]" if f["rule"] in gating else ""
            lines.append(f"  {f['rule']}{step}{flag}: {f['message']}")
    for r in res.sessions:
        for x in r["results"]:
            if x["status"] == "error":
                lines.append(f"session {r['id']}: rule {x['rule']} errored: {x['message']}")
    for e in res.errors:
        hint = f" (fix: {e['hint']})" if e.get("hint") else ""
        lines.append(f"unreadable: {e['path']}: {e['error']}{hint}")
    return "\n".join(lines)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # Under xdist the controller collects nothing: it audits here, once every worker is done, and
    # hands the reports of a test to the hooks (before junitxml writes its file at this hook).
    config = session.config
    state = config.stash.get(_STATE, None)
    if state is None or state.ran or hasattr(config, "workerinput") or not _xdist_controller(config):
        return
    text = run_audit(state)
    nodeid = f"{NAME}[{state.given}]"
    skipped = text is None and state.result is not None and not state.result.sessions
    call: tuple[Literal["passed", "failed", "skipped"], str | tuple[str, int | None, str] | None] = (
        ("failed", text) if text is not None else
        ("skipped", ("", None, f"Skipped: no session logs in {state.given}: nothing audited")) if skipped
        else ("passed", None))
    phases: tuple[tuple[Literal["setup", "call", "teardown"], Literal["passed", "failed", "skipped"],
                        str | tuple[str, int | None, str] | None], ...] = (
        ("setup", "passed", None), ("call", *call), ("teardown", "passed", None))
    for when, outcome, longrepr in phases:
        # the skip's longrepr has no line (None), which pytest's summary prints as such; TestReport's hint says int
        report = pytest.TestReport(
            nodeid, (nodeid, None, nodeid), {nodeid: 1}, outcome, longrepr, when)  # type: ignore[arg-type]
        config.hook.pytest_runtest_logreport(report=report)
    if text is not None and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not state.ran:
        return
    tr = terminalreporter
    tr.section("ctxf audit", sep="=", red=state.failed, green=not state.failed, bold=True)
    tr.line(report_text(state) if (state.failed or state.result is None or state.result.failures())
            else f"ctxf audit of {state.given}: {len(state.result.sessions)} session(s), "
                 f"{len(state.result.rules)} rule(s): nothing failed")


class CtxfAPI:
    """The ``ctxf`` fixture: ``context_forensics.api``, its calls bound to a per-test store.

    ``ctxf.facts(log, "...")``, ``ctxf.audit([...])``, ``ctxf.replay(log)`` ... run in an
    in-memory store opened on first use and closed after the test (with the plugin's
    ``--ctxf-config`` when given), unless the call passes ``store=``, ``db=`` or ``config=``.
    ``ctxf.api`` is the module itself; ``ctxf.workspace`` the store.
    """

    def __init__(self, config: Path | None) -> None:
        from . import api

        self.api = api
        self._config = config
        self._ws: Workspace | None = None

    @property
    def workspace(self) -> Workspace:
        if self._ws is None:
            self._ws = self.api.open_store(":memory:", config=self._config)
        return self._ws

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self.api, name)
        if name in ("open_store", "discover") or not callable(attr) or isinstance(attr, type):
            return attr

        def bound(*args: Any, **kwargs: Any) -> Any:
            if not any(kwargs.get(k) is not None for k in _STORE_ARGS):
                kwargs["store"] = self.workspace
            return attr(*args, **kwargs)

        bound.__doc__, bound.__name__ = attr.__doc__, name
        return bound

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None


@pytest.fixture
def ctxf(request: pytest.FixtureRequest) -> Any:
    """The ctxf Python API, its calls bound to a per-test in-memory store (see ``CtxfAPI``)."""
    state = request.config.stash.get(_STATE, None)
    cfg = request.config.getoption("ctxf_config")
    api = CtxfAPI(state.config if state is not None else
                  (None if cfg is None else Path(request.config.invocation_params.dir) / cfg))
    yield api
    api.close()
