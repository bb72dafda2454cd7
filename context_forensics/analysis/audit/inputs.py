"""The inputs an audit could not read: failed files and broken log-like files, told apart from
well-formed files of a layout no importer reads (listed, not errors).

A CI summary must not look green over logs nobody checked: every unreadable input is a row of
the audit's reports and makes its exit code 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...store.sources import LOG_SUFFIXES  # the suffixes of the files importers read (kept there)

_DIAGNOSE_MAX_BYTES = 64 << 20  # larger files are not parsed again just to word the error
UNKNOWN_LAYOUT = "no importer reads this file's layout: left alone"
UNKNOWN_LAYOUT_HINT = ("`ctxf formats` lists the formats ctxf reads; name the file with `ctxf ingest FILE "
                       "--format NAME` to force one")


def unreadable_inputs(ingest: dict[str, Any], *, exclude: tuple[str, ...] = (), redact: Any = True
                      ) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """(the inputs an audit could not read, the walked files left alone as not session logs,
    the log-like walked files of a layout no importer reads).

    ``ingest`` is an ``IngestReport.to_dict()``. Unreadable: every file that failed, and every
    walked file with a log suffix (``LOG_SUFFIXES``) that no importer recognised and that does
    not parse (empty, invalid JSON, a JSONL file without one valid line); ``exclude`` (e.g. the
    config file) is never one. A log-suffixed file that parses but whose layout no importer
    reads is not an error: it is listed (``{"path", "reason", "hint"}``) so a CI report shows
    what it did not look at. Each unreadable row is ``{"path", "format", "error", "hint"}``. The
    paths are as ingest prints them (``redact``: a secret in a file name replaced, ``units.shown_path``).
    """
    from ...store.units import shown_path

    red = _redactor(redact)
    skip = {str(Path(p).resolve()) for p in exclude}
    rows: list[dict[str, Any]] = []
    for f in ingest.get("files", []):
        if f.get("status") == "failed":
            error, _, hint = (f.get("error") or "could not be read").partition("\n")
            rows.append({"path": f["path"], "format": f.get("format"), "error": error.strip(),
                         "hint": hint.strip().removeprefix("hint:").strip() or None})
    left_alone: list[str] = []
    not_read: list[dict[str, Any]] = []
    for path in ingest.get("ignored", []):
        p = Path(path)
        path = shown_path(path, red) if red is not None else path
        if p.suffix.lower() in LOG_SUFFIXES and str(p.resolve()) not in skip:
            broken = _diagnose(p)
            if broken is None:
                not_read.append({"path": path, "reason": UNKNOWN_LAYOUT, "hint": UNKNOWN_LAYOUT_HINT})
            else:
                rows.append({"path": path, "format": None, "error": f"{path}: {broken[0]}", "hint": broken[1]})
        else:
            left_alone.append(path)
    return sorted(rows, key=lambda r: r["path"]), left_alone, not_read


def _redactor(redact: Any) -> Any:
    from ...store.units import _redactor as make

    return make(redact) if redact is not None and redact is not False else None


def _diagnose(p: Path) -> tuple[str, str] | None:
    """Why a log-like file no importer took cannot be read (where it does not parse), or None
    when it parses and only its layout is unknown."""
    import json

    try:
        if p.stat().st_size == 0:
            return "the file is empty", "re-run the agent or remove the file; an empty log has nothing to audit"
        if p.stat().st_size > _DIAGNOSE_MAX_BYTES or p.suffix.lower() not in (".json", ".traj", ".jsonl", ".ndjson"):
            return None
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return f"cannot read it: {e.strerror}", "check the file's permissions"
    broken = "the log was not fully written (a crashed or killed run?) or is corrupt; repair or remove it"
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        first_bad = None
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                json.loads(line)
                return None  # a readable line: a JSONL log of a layout no importer reads
            except ValueError as e:
                first_bad = first_bad or (n, e)
        if first_bad is None:
            return "the file holds only blank lines", "re-run the agent or remove the file"
        line_no, err = first_bad
        return (f"no line is valid JSON (line {line_no}: {getattr(err, 'msg', err)}, column "
                f"{getattr(err, 'colno', '?')})", broken)
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", broken
    return None
