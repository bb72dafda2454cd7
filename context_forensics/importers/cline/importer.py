"""The ``cline`` importer: one task folder of Cline, Roo Code or Kilo Code is one session.

The session metadata's ``cwd`` is the working folder the turns' environment details name ("# Current
Working Directory (/path) Files"): the folder the task's files are relative to."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ...records import Message, Session
from .._sniffing import AGENT_TASK_FILES
from .._stream import iter_json_array
from .._text import title_line
from ..base import ImportContext, Importer, as_dict, as_list, as_str, head_text, load_json, register
from .history import _ms_iso, history_messages
from .ui import UiLog, read_ui
from .uiconv import ui_messages

HISTORY = "api_conversation_history.json"
UI = "ui_messages.json"
METADATA = "task_metadata.json"
CONTEXT_HISTORY = "context_history.json"
# VS Code extension ids (globalStorage/<id>/tasks/<task id>/), lower case.
EXTENSIONS = {"saoudrizwan.claude-dev": "cline", "rooveterinaryinc.roo-cline": "roo", "kilocode.kilo-code": "kilo"}
ROO_KEYS = ("condenseParent", "condenseId", "isSummary", "truncationParent", "isTruncationMarker", "truncationId")
FOCUS_CHAIN_BYTES = 64 * 1024


def _folder_head(folder: Path, name: str) -> str:
    p = folder / name
    if not p.is_file():
        return ""
    with open(p, "rb") as f:
        return head_text(f.read(4096))


def _looks_ui(text: str) -> bool:
    return text.startswith("[") and '"ts"' in text and ('"say"' in text or '"ask"' in text)


def _looks_history(text: str) -> bool:
    return text.startswith("[") and '"role"' in text


def is_task_folder(folder: Path) -> bool:
    return _looks_history(_folder_head(folder, HISTORY)) or _looks_ui(_folder_head(folder, UI))


@register
class Cline(Importer):
    name = "cline"
    description = ("Cline / Roo Code / Kilo Code task folders (VS Code globalStorage/<extension>/tasks/<id>/: "
                   "api_conversation_history.json, ui_messages.json, task_metadata.json)")
    extensions = (".json",)
    priority = 18  # before openhands' folder sniff and every generic JSON importer
    handles_directories = True

    def sniff(self, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return is_task_folder(path)
        # A file of a task folder named on its own is read as its folder (one session).
        if path.name == HISTORY:
            return _looks_history(head_text(head))
        if path.name == UI:
            return _looks_ui(head_text(head))
        return False

    def sidecars(self, path: Path) -> list[Path]:
        folder = path if path.is_dir() else path.parent
        return [p for p in folder.iterdir() if p.is_file() and p != path
                and (p.name in AGENT_TASK_FILES or p.name.startswith("focus_chain_taskid_"))]

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        folder = path if path.is_dir() else path.parent
        hist_path, ui_path = folder / HISTORY, folder / UI
        if not hist_path.is_file() and not ui_path.is_file():
            raise InputError(f"no {HISTORY} or {UI} in this folder", where=str(folder),
                             hint="point at a task folder (globalStorage/<extension>/tasks/<id>/)")
        ui: UiLog | None = None
        if ui_path.is_file():
            ui = read_ui([v for _, v in iter_json_array(ui_path, ctx)], ctx)
        items: list[Any] | None = None
        if hist_path.is_file():
            items = [v for _, v in iter_json_array(hist_path, ctx)]
        meta = _sidecar_metadata(folder, ctx)
        if items is not None:
            messages, stats = history_messages(items, ui, ctx)
            meta["window"] = "api_conversation_history.json"
        else:
            assert ui is not None
            messages, stats = ui_messages(ui, ctx)
            meta["window"] = "not recorded: ui_messages.json only (messages rebuilt from the UI log)"
            meta["reconstructed"] = ("from ui_messages.json (what the extension's panel showed): the folder has no "
                                     f"{HISTORY}, the history the model was sent")
            ctx.warn(f"no {HISTORY} beside {UI}: the messages are the UI's record of the task, not the history "
                     "the model was sent")
        cwd = working_folder(messages)
        if cwd:
            meta["cwd"] = cwd
        if (folder / CONTEXT_HISTORY).is_file():
            meta["context_history"] = "present, not applied (Cline's in-place edits of old messages)"
        agent, evidence = _agent(folder, items, ui)
        meta.update(agent=agent, agent_evidence=evidence, recorded_calls=stats["calls"],
                    usage_from_ui=stats["ui_usage"], usage_from_metrics=stats["metrics_usage"],
                    history_edits=stats["edits"], results_as_text=stats["results_as_text"])
        if ui is not None and ui.restored_ranges:
            meta["deleted_range_restored"] = ui.restored_ranges
        ctx.finish()
        model = next((m.model for m in reversed(messages) if m.model), None) or meta.get("model")
        first = next((e for e in (ui.entries if ui else ()) if e.get("ts") is not None), None)
        yield Session(
            external_id=folder.name,
            format=self.name,
            messages=messages,
            title=_title(ui, messages),
            model=model,
            started_at=_ms_iso(first.get("ts")) if first else next((m.timestamp for m in messages if m.timestamp),
                                                                   None),
            metadata=meta,
        )


# the environment details each turn carries (Cline's ``getEnvironmentDetails``; Roo and Kilo say
# "Workspace"): the folder the task works in, which the file tools' relative paths start from
_WORKING_FOLDER = re.compile(r"^# Current (?:Working|Workspace) Directory \(([^)\n]+)\) Files", re.MULTILINE)


def working_folder(messages: list[Message]) -> str | None:
    """The working folder the first environment details name, or None."""
    for m in messages:
        if m.role == "user" and "Directory (" in m.text:
            found = _WORKING_FOLDER.search(m.text)
            if found:
                return found.group(1).strip()
    return None


def _agent(folder: Path, items: list[Any] | None, ui: UiLog | None) -> tuple[str, str]:
    """cline / roo / kilo: by the extension's storage folder, else by fields only Roo and Kilo write."""
    parts = [p.lower() for p in folder.resolve().parts]
    for i, part in enumerate(parts[:-1]):
        if part == "globalstorage" and parts[i + 1] in EXTENSIONS:
            return EXTENSIONS[parts[i + 1]], f"path globalStorage/{parts[i + 1]}"
        if part == "globalstorage" and "kilo" in parts[i + 1]:
            return "kilo", f"path globalStorage/{parts[i + 1]}"
        if part == "globalstorage" and "roo" in parts[i + 1]:
            return "roo", f"path globalStorage/{parts[i + 1]}"
    if items and any(isinstance(m, dict) and any(k in m for k in ROO_KEYS) for m in items):
        return "roo", "fields: Roo's condense / truncation tags in the history (Kilo Code writes the same)"
    if ui is not None and ui.roo_fields and not ui.cline_fields:
        return "roo", "fields: Roo's apiProtocol / condense_context entries in ui_messages (Kilo Code writes the same)"
    if items and any(isinstance(m, dict) and ("modelInfo" in m or "metrics" in m) for m in items):
        return "cline", "fields: Cline's modelInfo / metrics in the history"
    if ui is not None and ui.cline_fields:
        return "cline", "fields: Cline's conversationHistoryIndex / modelInfo in ui_messages"
    return "cline", "default (no path or field tells the three apart)"


def _sidecar_metadata(folder: Path, ctx: ImportContext) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    p = folder / METADATA
    if p.is_file():
        try:
            doc = as_dict(load_json(p, ctx))
        except InputError as e:
            ctx.warn(f"{METADATA} is unreadable ({e}); read the task without it")
            doc = {}
        files = []
        for f in as_list(doc.get("files_in_context")):
            name = as_str(as_dict(f).get("path"))
            if name and name not in files:
                files.append(name)
        if files:
            meta["files_in_context"] = files
        usage = [u for u in as_list(doc.get("model_usage")) if isinstance(u, dict)]
        models = [as_str(u.get("model_id")) for u in usage if as_str(u.get("model_id"))]
        if models:
            meta["model"] = models[-1]
            meta["models"] = list(dict.fromkeys(models))
        env = [e for e in as_list(doc.get("environment_history")) if isinstance(e, dict)]
        if env:
            meta["environment"] = {k: v for k, v in env[-1].items() if k != "ts" and isinstance(v, (str, int))}
    chains = sorted(folder.glob("focus_chain_taskid_*.md"))
    if chains:
        with open(chains[-1], "rb") as f:
            meta["focus_chain"] = f.read(FOCUS_CHAIN_BYTES).decode("utf-8", errors="replace")
    return meta


def _title(ui: UiLog | None, messages: list) -> str | None:
    for e in ui.entries if ui else ():
        if e.get("say") in ("task", "text") and isinstance(e.get("text"), str) and e["text"].strip():
            return title_line(e["text"])
    for m in messages:
        if m.role == "user" and m.text.strip():
            return title_line(m.text)
    return None
