"""What every API call reads from: the effective config and the open store (``Workspace``).

``open_store`` loads the config (a file, a mapping, a ``Config``, or the default search:
``$CTXF_CONFIG``, then ``./forensics_config.yaml``), opens its SQLite store (the ``db`` given, or
the one ``config.location`` finds) and checks every model name before anything is ingested. ``Workspace.session`` turns
a session reference (an id, a unique id prefix, or a log file path, ingested on the fly) into
the stored session, as every command's SESSION argument does.

Module-level imports stay light (``ctxf --help`` imports this package); the store, the config
loader and the analyses load inside the functions that use them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:  # pragma: no cover - loaded inside the functions
    from ..config.schema import Config
    from ..store.db import Store

ConfigLike = Union[str, Path, Mapping[str, Any], "Config", None]
"""A config file path, the mapping a ``forensics_config.yaml`` holds, a loaded ``Config``, or
None (``$CTXF_CONFIG``, then ``./forensics_config.yaml``, then the built-in defaults)."""

Models = Union[str, Sequence[str], None]


def load(config: ConfigLike = None) -> Config:
    """The effective config for ``config`` (see ``ConfigLike``); a mapping is validated like a
    file, so a bad key raises ``ConfigError`` naming it."""
    from ..config.schema import Config
    from ..config.settings import load_config, validate

    if isinstance(config, Config):
        return config
    if isinstance(config, Mapping):
        return validate(dict(config), "config argument")
    return load_config(config)


def model_list(model: Models) -> list[str]:
    """``model`` as a list of names (one name, several, or none)."""
    if model is None:
        return []
    return [model] if isinstance(model, str) else list(model)


def check_models(names: Models, cfg: Config) -> None:
    """Raise ``UsageError`` (exit 2 on the CLI) with the closest known names for a model the
    table and the config's ``model_mappings`` cannot place."""
    from ..config.models import resolve_model

    for name in model_list(names):
        resolve_model(name, cfg)


def recorded_unless(model: Models, policy: str | None) -> str | None:
    """The policy a replay-based call runs: without a model or a policy, ``recorded`` (ground
    truth first: what the log says happened), else the one given (None: the model's)."""
    return "recorded" if not model_list(model) and policy is None else policy


def session_json(r: Mapping[str, Any]) -> dict[str, Any]:
    """A stored session row as the ``session`` object of every command's ``--json``; ``agent``
    is the importer's ``metadata["agent"]``, else the format's agent (``store/agents.py``);
    ``parent`` (None, or ``{id, stored, title}`` and the call that started this session) and
    ``children`` (the sessions it started: its sub-agents) as ``Store.session`` gives them;
    ``reconstructed`` (None, or what the messages were rebuilt from: the log did not record what
    the model was sent) is the importer's ``metadata["reconstructed"]``."""
    from ..store.agents import agent_of

    return {
        "id": r["id"],
        "format": r["format"],
        "agent": agent_of(r["format"], r["metadata"]),
        "source": r["source"],
        "title": r["title"],
        "model": r["model"],
        "models": r["models"],
        "task": r["task"],
        "outcome": r["outcome"],
        "started_at": r["started_at"],
        "parent_id": r["parent_id"],
        "parent": r.get("parent"),
        "children": r.get("children", []),
        "external_id": r["external_id"],
        "message_count": r["message_count"],
        "step_count": r["step_count"],
        "usage_count": r["usage_count"],
        "content_hash": r["content_hash"],
        "metadata": r["metadata"],
        "reconstructed": (r["metadata"] or {}).get("reconstructed"),
    }


class Workspace:
    """The effective config (``cfg``) and the open store (``store``); closes the store on exit.

    Use it as a context manager (``with ctxf.open_store() as ws:``) and pass it as ``store=``
    to the API calls, so they share one store instead of each opening the default one.
    """

    def __init__(self, cfg: Config, store: Store) -> None:
        self.cfg = cfg
        self.store = store

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store (the workspace is unusable after)."""
        self.store.close()

    @property
    def path(self) -> Path | None:
        """The store's file (None for an in-memory store)."""
        return self.store.path

    def resolve(self, ref: str, fmt: str | None = None) -> str:
        """The id of the session ``ref`` names: an id, a unique id prefix, or a log file path
        (ingested on the fly; ``fmt`` forces its format). Raises ``NotFoundError`` or
        ``UsageError`` (ambiguous prefix) otherwise."""
        from ..store.ingest import resolve_session
        from .redaction import redactor

        return resolve_session(self.store, str(ref), fmt=fmt, redact=redactor(self.cfg))

    def session(self, ref: str, fmt: str | None = None) -> tuple[str, dict[str, Any]]:
        """The id and the stored row of the session ``ref`` names (see ``resolve``)."""
        sid = self.resolve(ref, fmt)
        return sid, self.store.session(sid)

    def sessions(self, *, fmt: str | None = None, task: str | None = None, outcome: str | None = None,
                 agent: str | None = None) -> list[dict[str, Any]]:
        """The stored sessions (optionally of one format, task, outcome or agent) as ``ctxf
        sessions --json`` lists them, in store order (by start time, then id; sessions whose logs
        record no start after them, by id)."""
        from ..store.agents import matching_agent
        from .checks import check_filters

        if fmt is not None or outcome is not None or agent is not None:  # exit 2 for a value nothing can have
            check_filters(self.store.sessions(), fmt=fmt, outcome=outcome, agent=agent)
        rows = self.store.sessions(fmt=fmt, task=task, outcome=outcome)
        return [session_json(r) for r in matching_agent(rows, agent)]


def open_store(db: str | Path | None = None, *, config: ConfigLike = None, models: Models = None,
               create: bool = True) -> Workspace:
    """Load the config, open its store, and check each name in ``models``: a misspelled model
    raises ``UsageError`` with the closest known names before anything is ingested.
    ``create=False`` (the reading commands): a store file that does not exist raises
    ``NotFoundError`` naming it, and nothing is created.

    The store is ``db`` when given, else ``$CTXF_DB``, else the config's ``storage.path``, else
    ``./forensics_data/sessions.db`` when the working folder holds one (said once on stderr),
    else the user-level store in the user data folder (``config.location``).

    >>> with open_store() as ws:   # doctest: +SKIP
    ...     print(len(ws.sessions()))
    """
    from ..config.location import store_location
    from ..store.db import Store

    cfg = load(config)
    where = store_location(cfg, db)
    if where.origin == "working folder":
        from ..store.connection import notice_once, stderr_notice

        notice_once(stderr_notice, "store:working-folder", f"the store is {where.path}, {where.reason}")
    if not create:
        from .checks import require_store

        require_store(where.path, given=where.origin == "--db", why=where.reason)
    ws = Workspace(cfg, Store.open(where.path, max_sessions=cfg.storage.max_sessions))
    try:
        check_models(models, cfg)
    except BaseException:
        ws.close()
        raise
    return ws


@contextmanager
def using(store: Workspace | None, db: str | Path | None, config: ConfigLike,
          models: Models = None, *, create: bool = True) -> Iterator[Workspace]:
    """The workspace an API call runs in: ``store`` when given (left open, its models checked),
    else one opened from ``db`` / ``config`` for the call and closed after it (``create`` as
    for ``open_store``)."""
    if store is not None:
        if db is not None or config is not None:
            from ..errors import UsageError

            raise UsageError("give store= or db=/config=, not both",
                             hint="a Workspace already has its config and its store")
        check_models(models, store.cfg)
        yield store
        return
    with open_store(db, config=config, models=models, create=create) as ws:
        yield ws
