"""`ctxf config check` and `ctxf config show`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import ConfigOpt, JsonOpt, config_app, given_path, handle_errors

# ---------------------------------------------------------------- config


@config_app.command("check")
@handle_errors
def config_check(config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Validate the config file; exit 2 with the key and the fix if it is invalid."""
    from ..config.settings import load_config
    from ..render.common import print_json, safe, stdout_console

    cfg = load_config(config)
    if json_out:  # an invalid file is exit 2 with the error on stderr, as without --json
        print_json({"version": 1, "ok": True, "source": cfg.source, "model_mappings": len(cfg.model_mappings)})
        return
    stdout_console().print(safe(f"ok: {cfg.source} ({len(cfg.model_mappings)} model mapping(s))"))


@config_app.command("show")
@handle_errors
def config_show(
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    db: Annotated[Optional[Path], typer.Option(
        "--db", metavar="PATH", help="The store a command given this --db reads: shown as storage.path.",
        parser=given_path)] = None,
) -> None:
    """Print the effective configuration (file merged over built-in defaults) and which store the
    commands use, and why: --db, else $CTXF_DB, else storage.path from the config, else
    ./forensics_data/sessions.db when the working folder holds one, else the user-level store."""
    import dataclasses

    from ..api.checks import require_store
    from ..config.location import store_location
    from ..config.models import effective_mappings
    from ..config.settings import load_config
    from ..render.common import print_json, stdout_console
    from ..render.config import config_view

    cfg = load_config(config)
    if db is not None:  # what `ctxf sessions --db PATH` and the others would use
        require_store(db, given=True)
    where = store_location(cfg, db)
    cfg = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, path=where.path))
    data = {**cfg.to_dict(), "model_mappings": effective_mappings(cfg)}  # every figure, wherever it comes from
    if json_out:
        print_json({"version": 1, "source": cfg.source, "store": where.to_dict(), **data})
    else:
        config_view(stdout_console(), data, cfg.source, store=where.to_dict())
