"""``ingest --discover``: where each supported agent writes its logs, and what is there now.

``AGENTS`` is the table: per agent, the formats that read its logs and the places it writes
them, worked out from the environment given (``$HOME``, or ``%USERPROFILE%`` on Windows, and
each tool's own override: ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME``,
``PI_CODING_AGENT_DIR``, ``COPILOT_HOME`` / ``XDG_STATE_HOME`` / ``XDG_CONFIG_HOME``,
``CLINE_DIR`` / ``CLINE_DATA_DIR``, ``XDG_DATA_HOME`` (OpenCode, Goose), ``GOOSE_PATH_ROOT``,
``KIMI_CODE_HOME``, ``OH_CONVERSATIONS_PATH``,
``APPDATA``). Every layout is searched whatever the
platform (a Linux, a macOS and a Windows user-data folder for VS Code, VS Code Insiders, Cursor
and VSCodium), so a copied home folder or a mounted disk is found as well as the live one.

Places are walked with ``inputs.walk``: each folder once by device and inode (a symlink back up
is skipped and counted, never followed round), without recursion, dot-entries left out; only
Aider's dotfiles are looked up by name, in the current folder and its git root. Nothing here
opens a file's content or a socket: a log is found by where it is and what it is called, and
its format is told later, by the importers, as for any path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import UsageError
from . import inputs
from .agents import normal
from .ingest import Unit

Rel = tuple[str, ...]  # a path's parts below the root of its place


@dataclass(frozen=True)
class Env:
    """The environment a discovery reads: variables, the home folder and the current folder."""

    vars: Mapping[str, str]
    cwd: Path

    def get(self, name: str) -> str | None:
        value = self.vars.get(name)
        return value if value and value.strip() else None

    @property
    def home(self) -> Path:
        h = self.get("HOME") or self.get("USERPROFILE")
        return Path(h) if h else Path.home()

    def path(self, name: str) -> Path | None:
        """The folder variable ``name`` names (a leading ``~`` is this home), or None."""
        value = self.get(name)
        if value is None:
            return None
        if value == "~" or value.startswith(("~/", "~\\")):
            return self.home / value[2:] if len(value) > 1 else self.home
        return Path(value)


@dataclass(frozen=True)
class Place:
    """A folder an agent writes to, and which entries below it are its logs."""

    root: Path
    what: str  # what is looked for there, for the listing ("*.jsonl, any depth")
    is_log: Callable[[Rel], bool] = lambda rel: False  # a file (by its parts below root) is a log
    enter: Callable[[Rel], bool] = lambda rel: True  # walk into this folder
    unit: Callable[[Path, Rel], bool] | None = None  # this folder is one log (a Cline task)
    names: tuple[str, ...] = ()  # files looked up by name in root alone (dotfiles: no walk)


@dataclass(frozen=True)
class Agent:
    name: str
    title: str
    formats: tuple[str, ...]  # the formats that read its logs
    places: Callable[[Env], list[Place]]
    unit: str = "file"  # what one log is: a file, or a task folder


# ---------------------------------------------------------------- the places


def _ext(*suffixes: str) -> Callable[[Rel], bool]:
    return lambda rel: rel[-1].endswith(suffixes)


def _claude(env: Env) -> list[Place]:
    given = env.get("CLAUDE_CONFIG_DIR")  # Claude Code takes it instead of ~/.claude
    if given:
        bases = [Path(p.strip()) for p in given.split(",") if p.strip()]
    else:
        bases = [env.home / ".claude", (env.path("XDG_CONFIG_HOME") or env.home / ".config") / "claude"]
    return [Place(b / "projects", "*.jsonl, any depth (sub-agents in <session>/subagents/)", _ext(".jsonl"))
            for b in bases]


def _codex(env: Env) -> list[Place]:
    base = env.path("CODEX_HOME") or env.home / ".codex"
    rollout = lambda rel: rel[-1].startswith("rollout-") and rel[-1].endswith(".jsonl")  # noqa: E731
    return [Place(base / "sessions", "rollout-*.jsonl, any depth", rollout),
            Place(base / "archived_sessions", "rollout-*.jsonl, any depth", rollout)]


def _gemini_log(rel: Rel) -> bool:
    name = rel[-1]
    if len(rel) >= 3 and rel[1] == "chats":  # <project>/chats/session-*.json(l), chats/<parent>/ sub-agents
        return name.endswith((".json", ".jsonl"))
    if len(rel) == 2:  # <project>/checkpoint-<tag>.json: /chat save
        return name.startswith("checkpoint-") and name.endswith(".json")
    return len(rel) == 3 and rel[1] == "checkpoints" and name.endswith(".json")


def _gemini(env: Env) -> list[Place]:
    base = env.path("GEMINI_CLI_HOME") or env.home  # Gemini CLI's home override
    return [Place(base / ".gemini" / "tmp", "<project>/chats/*.json(l), <project>/checkpoint-*.json, "
                  "<project>/checkpoints/*.json", _gemini_log,
                  enter=lambda rel: len(rel) == 1 or rel[1] in ("chats", "checkpoints"))]


EDITORS = ("Code", "Code - Insiders", "Cursor", "VSCodium")
TASK_FILES = ("api_conversation_history.json", "ui_messages.json")


def user_data_folders(env: Env) -> list[Path]:
    """Where VS Code-like editors keep their user data, in each platform's layout."""
    roaming = env.path("APPDATA") or ((env.path("USERPROFILE") or env.home) / "AppData" / "Roaming")
    bases = [env.path("XDG_CONFIG_HOME") or env.home / ".config",  # Linux
             env.home / "Library" / "Application Support",  # macOS
             roaming]  # Windows
    folders = [b / app / "User" / "globalStorage" for b in bases for app in EDITORS]
    folders.append(env.home / ".vscode-server" / "data" / "User" / "globalStorage")  # VS Code remote
    return folders


def _task_folder(path: Path, rel: Rel) -> bool:
    return len(rel) == 1 and any(os.path.isfile(path / n) for n in TASK_FILES)


def _extension(ext_id: str, cli: bool = False) -> Callable[[Env], list[Place]]:
    def places(env: Env) -> list[Place]:
        roots = [folder / ext_id / "tasks" for folder in user_data_folders(env)]
        if cli:  # the Cline CLI (and JetBrains): CLINE_DATA_DIR, else CLINE_DIR/data, else ~/.cline/data
            data = env.path("CLINE_DATA_DIR") or (env.path("CLINE_DIR") or env.home / ".cline") / "data"
            roots.append(data / "tasks")
        return [Place(r, "tasks/<id>/ (api_conversation_history.json, ui_messages.json)",
                      enter=lambda rel: False, unit=_task_folder) for r in roots]
    return places


def _pi(env: Env) -> list[Place]:
    base = env.path("PI_CODING_AGENT_DIR") or env.home / ".pi" / "agent"
    return [Place(base / "sessions", "<--cwd-->/*.jsonl", _ext(".jsonl"), enter=lambda rel: len(rel) == 1)]


def _copilot(env: Env) -> list[Place]:
    bases = [env.path("COPILOT_HOME"), *(p / ".copilot" for p in (env.path("XDG_STATE_HOME"),
                                                                  env.path("XDG_CONFIG_HOME")) if p),
             env.home / ".copilot"]
    places = []
    for b in (b for b in bases if b is not None):
        places.append(Place(b / "session-state", "<id>/events.jsonl, *.jsonl",
                            lambda rel: rel == (rel[0],
                                                "events.jsonl") or (len(rel) == 1 and rel[0].endswith(".jsonl")),
                            enter=lambda rel: len(rel) == 1))
        places.append(Place(b / "history-session-state", "*.json (legacy)",
                            lambda rel: len(rel) == 1 and rel[0].endswith(".json"), enter=lambda rel: False))
    return places


AIDER_FILES = (".aider.chat.history.md", ".aider.llm.history")


def git_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder or a worktree's file)."""
    here = Path(os.path.abspath(start))
    for folder in (here, *here.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def _aider(env: Env) -> list[Place]:
    folders = [Path(os.path.abspath(env.cwd))]
    root = git_root(env.cwd)
    if root is not None:
        folders.append(root)
    return [Place(f, ", ".join(AIDER_FILES), names=AIDER_FILES) for f in folders]


def _opencode(env: Env) -> list[Place]:
    # Global.Path.data: xdg-basedir's data folder + "opencode", on every platform
    base = (env.path("XDG_DATA_HOME") or env.home / ".local" / "share") / "opencode"
    def storage(path: Path, rel: Rel) -> bool:
        return rel == ("storage",) and (path / "session").is_dir() and (path / "message").is_dir()

    db = lambda rel: len(rel) == 1 and rel[0].startswith("opencode") and rel[0].endswith(".db")  # noqa: E731
    return [Place(base, "storage/ (session/, message/, part/), opencode.db", db, enter=lambda rel: False,
                  unit=storage)]


def _goose(env: Env) -> list[Place]:
    # Paths::data_dir: $GOOSE_PATH_ROOT/data, else etcetera's app data folder (Block / goose)
    root = env.path("GOOSE_PATH_ROOT")
    if root is not None:
        bases = [root / "data"]
    else:
        roaming = env.path("APPDATA") or ((env.path("USERPROFILE") or env.home) / "AppData" / "Roaming")
        bases = [(env.path("XDG_DATA_HOME") or env.home / ".local" / "share") / "goose",  # Linux
                 env.home / "Library" / "Application Support" / "Block" / "goose",  # macOS
                 roaming / "Block" / "goose" / "data"]  # Windows
    log = lambda rel: len(rel) == 1 and (rel[0] == "sessions.db" or rel[0].endswith(".jsonl"))  # noqa: E731
    return [Place(b / "sessions", "sessions.db, *.jsonl (legacy)", log, enter=lambda rel: False) for b in bases]


def _kimi(env: Env) -> list[Place]:
    # Kimi Code (the TypeScript CLI): $KIMI_CODE_HOME, else ~/.kimi-code; a session is
    # sessions/<workdir>_<hash>/<session>/ (state.json), each agent's journal agents/<id>/wire.jsonl.
    # The Python Kimi CLI's ~/.kimi/sessions/<hash>/<uuid>/wire.jsonl is another format, not read.
    base = env.path("KIMI_CODE_HOME") or env.home / ".kimi-code"
    wire = lambda rel: len(rel) == 5 and rel[2] == "agents" and rel[4] == "wire.jsonl"  # noqa: E731
    return [Place(base / "sessions", "<workdir>/<session>/agents/<agent>/wire.jsonl", wire,
                  enter=lambda rel: len(rel) < 3 or rel[2] == "agents")]


def _conversation_folder(path: Path, rel: Rel) -> bool:
    return len(rel) == 1 and os.path.isdir(path / "events")


def _openhands(env: Env) -> list[Place]:
    # The OpenHands CLI (V1, Software Agent SDK): ~/.openhands/conversations/<id>/ (base_state.json,
    # events/event-NNNNN-<id>.json); OH_CONVERSATIONS_PATH moves it (the agent server's setting).
    base = env.path("OH_CONVERSATIONS_PATH") or env.home / ".openhands" / "conversations"
    return [Place(base, "<id>/ (base_state.json, events/)", enter=lambda rel: False, unit=_conversation_folder)]


AGENTS: dict[str, Agent] = {a.name: a for a in (
    Agent("claude-code", "Claude Code", ("claude_code",), _claude),
    Agent("codex", "Codex CLI", ("codex",), _codex),
    Agent("gemini-cli", "Gemini CLI", ("gemini_cli",), _gemini),
    Agent("cline", "Cline", ("cline",), _extension("saoudrizwan.claude-dev", cli=True), unit="task folder"),
    Agent("roo", "Roo Code", ("cline",), _extension("rooveterinaryinc.roo-cline"), unit="task folder"),
    Agent("kilo", "Kilo Code", ("cline",), _extension("kilocode.kilo-code"), unit="task folder"),
    Agent("pi", "Pi coding agent", ("pi",), _pi),
    Agent("copilot-cli", "GitHub Copilot CLI", ("copilot_cli",), _copilot),
    Agent("aider", "Aider (this repository)", ("aider", "aider_chat"), _aider),
    Agent("opencode", "OpenCode", ("opencode", "opencode_db"), _opencode),
    Agent("goose", "Goose", ("goose_db", "goose"), _goose),
    Agent("kimi-code", "Kimi Code CLI", ("kimi_code",), _kimi),
    Agent("openhands", "OpenHands CLI (V1)", ("openhands_v1",), _openhands, unit="conversation folder"),
)}


def agent_names(names: Iterable[str] | None) -> list[str]:
    """The agents ``names`` asks for (all when None or empty), in table order. A name is taken
    case-insensitively, ``_`` as ``-``; an unknown one is a ``UsageError`` listing the known ones."""
    wanted = [normal(n) for n in names or ()]
    unknown = [n for n in wanted if n not in AGENTS]
    if unknown:
        raise UsageError(f"unknown agent {unknown[0]!r}", hint="known agents: " + ", ".join(AGENTS))
    return [a for a in AGENTS if not wanted or a in wanted]


# ---------------------------------------------------------------- finding


@dataclass(frozen=True)
class Found:
    path: Path  # a log file, or a folder read as one log (a Cline task)
    bytes: int
    modified: float  # newest modification time of it (of its files, for a folder)

    def to_dict(self) -> dict:
        return {"path": str(self.path), "bytes": self.bytes, "modified": _iso(self.modified)}


@dataclass
class AgentLogs:
    """What one agent's places hold."""

    agent: Agent
    places: list[tuple[Place, bool]] = field(default_factory=list)  # (place, exists)
    found: list[Found] = field(default_factory=list)
    links_skipped: int = 0
    unreadable: list[tuple[Path, OSError]] = field(default_factory=list)  # folders it could not list

    @property
    def readable(self) -> bool:
        """Whether this ctxf has an importer for the agent's logs (else they are listed only)."""
        from .. import importers

        return any(f in importers.registry() for f in self.agent.formats)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.found)

    @property
    def newest(self) -> float | None:
        return max((f.modified for f in self.found), default=None)

    def to_dict(self) -> dict:
        return {
            "agent": self.agent.name,
            "title": self.agent.title,
            "formats": list(self.agent.formats),
            "readable": self.readable,
            "unit": self.agent.unit,
            "files": len(self.found),
            "bytes": self.bytes,
            "newest": _iso(self.newest),
            "places": [{"path": str(p.root), "looks_for": p.what, "exists": ok} for p, ok in self.places],
            "found": [f.to_dict() for f in self.found],
            "links_skipped": self.links_skipped,
            "unreadable": [{"path": str(p), "error": e.strerror or str(e)} for p, e in self.unreadable],
        }


@dataclass
class Discovery:
    """Every asked-for agent's logs, in table order."""

    agents: list[AgentLogs]

    def to_dict(self) -> dict:
        return {
            "version": 1,
            "totals": {
                "agents": len(self.agents),
                "agents_with_logs": sum(bool(a.found) for a in self.agents),
                "files": sum(len(a.found) for a in self.agents),
                "bytes": sum(a.bytes for a in self.agents),
                "not_readable_yet": sum(len(a.found) for a in self.agents if not a.readable),
            },
            "agents": [a.to_dict() for a in self.agents],
        }


def discover(agents: Iterable[str] | None = None, *, env: Mapping[str, str] | None = None,
             cwd: str | Path | None = None) -> Discovery:
    """Look in every place of each agent (all by default) and list the logs there."""
    names = agent_names(agents)
    e = Env(os.environ if env is None else env, Path(cwd) if cwd is not None else Path.cwd())
    return Discovery([_find(AGENTS[n], e) for n in names])


def _find(agent: Agent, env: Env) -> AgentLogs:
    logs = AgentLogs(agent)
    state = inputs.Walk()
    roots: set[str] = set()
    for place in agent.places(env):
        exists = inputs.kind_of(place.root) == "dir"
        logs.places.append((place, exists))
        key = os.path.realpath(place.root)
        if not exists or key in roots:  # two variables naming one folder: walked once
            continue
        roots.add(key)
        if place.names:
            for name in place.names:
                f = place.root / name
                if inputs.kind_of(f) == "file":  # a regular file (through a link): never a FIFO
                    _add(logs, state, f)
            continue
        for f in _walk(place, state):
            _add(logs, state, f)
    logs.links_skipped = state.links_skipped
    logs.unreadable = list(state.unreadable)
    return logs


def _walk(place: Place, state: inputs.Walk) -> list[Path]:
    units: list[Path] = []

    def dir_unit(entry: Path) -> bool:  # True: do not walk into it
        rel = entry.relative_to(place.root).parts
        if place.unit is not None and place.unit(entry, rel):
            units.append(entry)
            return True
        return not place.enter(rel)

    files = inputs.walk(place.root, True, dir_unit, state)
    logs = [f for f in files if place.is_log(f.relative_to(place.root).parts)]
    return units + logs


def _add(logs: AgentLogs, state: inputs.Walk, path: Path) -> None:
    try:
        st = path.stat()
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        logs.found.append(Found(path, st.st_size, st.st_mtime))
        return
    size, newest = 0, st.st_mtime  # a folder read whole: its files, as the ingest hashes them (an
    try:  # OpenHands conversation's events/ too; links are not followed)
        todo = [path]
        while todo:
            with os.scandir(todo.pop()) as it:
                for entry in it:
                    try:
                        est = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISREG(est.st_mode):
                        size += est.st_size
                        newest = max(newest, est.st_mtime)
                    elif stat.S_ISDIR(est.st_mode):
                        todo.append(Path(entry.path))
    except OSError as e:
        state.unreadable.append((path, e))
        return
    logs.found.append(Found(path, size, newest))


# ---------------------------------------------------------------- what the ingest reads


@dataclass
class Plan:
    """The import units a discovery gives the ingest, and what it leaves out."""

    units: list[Unit] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # found, but not read as its agent's format
    not_readable: list[str] = field(default_factory=list)  # no importer of its agent's formats yet


def plan(discovery: Discovery) -> Plan:
    """The units to ingest: each found log whose format (told by the importers' sniffs, as for
    any walked path) is one of its agent's formats. A log no such importer accepts is ignored
    (listed as ignored, as a walk lists a file of unknown format); the logs of an agent this
    ctxf has no importer for are listed only."""
    from .. import importers
    from ..importers.base import read_head

    out = Plan()
    for logs in discovery.agents:
        if not logs.readable:
            out.not_readable.extend(str(f.path) for f in logs.found)
            continue
        for f in logs.found:
            units = _units(f.path, logs.agent.formats, importers, read_head)
            if units:
                out.units.extend(units)
            else:
                out.ignored.append(str(f.path))
    return out


def _units(path: Path, formats: tuple[str, ...], importers, read_head) -> list[Unit]:  # type: ignore[no-untyped-def]
    try:
        if path.is_dir():
            imp = importers.detect(path, b"")
            if imp is not None and imp.name in formats:
                return [Unit(path, imp, False)]
            # A format that reads a task's files rather than its folder: its files, less the
            # sidecars of one already taken.
            taken: list[Unit] = []
            consumed: set[Path] = set()
            for name in TASK_FILES:
                p = path / name
                if inputs.kind_of(p) != "file" or p in consumed:
                    continue
                imp = importers.detect(p, read_head(p))
                if imp is not None and imp.name in formats:
                    taken.append(Unit(p, imp, False))
                    consumed.update(imp.sidecars(p))
            return taken
        imp = importers.detect(path, read_head(path))
    except OSError:  # cannot be read: it fails on its own, by name, as in a walk
        return [Unit(path, None, False)]
    return [Unit(path, imp, False)] if imp is not None and imp.name in formats else []


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


__all__ = ["AGENTS", "Agent", "AgentLogs", "Discovery", "Env", "Found", "Place", "Plan", "agent_names", "discover",
           "git_root", "plan", "user_data_folders"]
