"""What the files around a ``.traj`` say about it: the predictions file (instance id, model
name), ``args.yaml`` (the model), the classic run folder's name (the model), and the traj's
``replay_config`` (a JSON string or object).

A classic (0.x) run names its model as ``--model_name`` was given, often one of SWE-agent's own
shortcuts ("gpt4"); SWE-agent called the model its ``SHORTCUTS`` table maps it to
(``classic_model``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .._json import parse_json
from .._swebench import load_small_json
from ..base import dig, str_or_none

_CLASSIC_RUN_DIR = re.compile(r"^(.+?)__.+__t-[\d.]+__p-[\d.]+__c-[\d.]+")

# SWE-agent 0.x's model shortcuts and the API model each one called (sweagent/agent/models.py:
# OpenAIModel.SHORTCUTS and AnthropicModel.SHORTCUTS, as of 0.7; earlier releases held a subset
# with the same targets). ``api_model = SHORTCUTS.get(name, name)`` there.
CLASSIC_SHORTCUTS = {
    "gpt3": "gpt-3.5-turbo-1106", "gpt3-legacy": "gpt-3.5-turbo-16k-0613", "gpt4": "gpt-4-1106-preview",
    "gpt4-legacy": "gpt-4-0613", "gpt4-0125": "gpt-4-0125-preview", "gpt3-0125": "gpt-3.5-turbo-0125",
    "gpt4-turbo": "gpt-4-turbo-2024-04-09", "gpt4o": "gpt-4o-2024-05-13", "gpt4omini": "gpt-4o-mini-2024-07-18",
    "claude-2": "claude-2.1", "claude-opus": "claude-3-opus-20240229", "claude-sonnet": "claude-3-sonnet-20240229",
    "claude-haiku": "claude-3-haiku-20240307", "claude-sonnet-3.5": "claude-3-5-sonnet-20240620",
}


def classic_model(name: str | None) -> str | None:
    """The model a classic SWE-agent run called, given the name it was run with."""
    return CLASSIC_SHORTCUTS.get(name, name) if name else name


def replay_config(raw: Any) -> dict[str, Any]:
    """A traj's ``replay_config`` (a JSON string or an object) as a dict; ``{}`` if unreadable."""
    if isinstance(raw, str):
        try:
            raw = parse_json(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


@dataclass
class Prediction:
    """What a predictions file says about a traj, and which file said it."""

    instance_id: str | None = None
    model: str | None = None
    source: Path | None = None


@lru_cache(maxsize=8)
def _preds_index(path: str, mtime_ns: int, size: int) -> tuple[dict[str, str | None], int]:
    """``{instance_id: model_name_or_path}`` of an ``all_preds.jsonl``, and its row count."""
    index: dict[str, str | None] = {}
    rows = 0
    try:
        with open(path, "rb") as f:
            for raw in f:
                try:
                    row = parse_json(raw)
                except ValueError:
                    continue
                if isinstance(row, dict) and isinstance(row.get("instance_id"), str):
                    rows += 1
                    index[row["instance_id"]] = str_or_none(row.get("model_name_or_path"))
    except OSError:
        pass
    return index, rows


def read_predictions(path: Path) -> Prediction:
    """The instance id / model name a predictions file next to the traj gives for it."""
    stem = path.name[: -len(".traj")] if path.name.endswith(".traj") else path.stem
    parent = path.parent
    for cand in (parent / f"{stem}.all_preds.jsonl", parent / "all_preds.jsonl"):
        try:
            st = cand.stat()
        except OSError:
            continue
        index, rows = _preds_index(str(cand), st.st_mtime_ns, st.st_size)
        if stem in index:
            return Prediction(stem, index[stem], cand)
        if cand.name.startswith(stem + ".") and rows == 1:  # <stem>.all_preds.jsonl with one other id
            (iid, model), = index.items()
            return Prediction(iid, model, cand)
    pred = load_small_json(parent / f"{stem}.pred")
    if isinstance(pred, dict) and isinstance(pred.get("instance_id"), str):
        return Prediction(pred["instance_id"], str_or_none(pred.get("model_name_or_path")), parent / f"{stem}.pred")
    preds = load_small_json(parent / "preds.json")
    if isinstance(preds, dict) and isinstance(preds.get(stem), dict):
        return Prediction(stem, str_or_none(preds[stem].get("model_name_or_path")), parent / "preds.json")
    return Prediction()


def model_from_run_name(name: str | None) -> str | None:
    """The model in a classic run folder's name (``<model>__<data>__t-..__p-..__c-..``)."""
    m = _CLASSIC_RUN_DIR.match(name) if isinstance(name, str) else None
    return m.group(1) if m else None


def args_yaml_model(path: Path) -> str | None:
    """The model ``args.yaml`` next to the traj names, or None."""
    args = path.parent / "args.yaml"
    if not args.is_file():
        return None
    try:
        import yaml

        data = yaml.safe_load(args.read_text(encoding="utf-8", errors="replace"))
    except Exception:  # a broken sidecar must not break the import  # noqa: BLE001
        return None
    name = dig(data, "agent", "model", "model_name")
    return name if isinstance(name, str) else None
