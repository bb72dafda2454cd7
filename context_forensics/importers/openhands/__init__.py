"""OpenHands, every layout it writes: ``completions`` (the ``llm_completions/`` folders of 0.x,
one JSON per LLM call: format ``openhands``), ``trajectory`` (0.x trajectory exports, the event
stream as one JSON list: ``openhands_trajectory``) and ``events`` (V1, the Software Agent SDK and
OpenHands CLI: an ``events/`` folder of one JSON per event, or the events as JSONL:
``openhands_v1``)."""

from __future__ import annotations

from .completions import OpenHands
from .events import OpenHandsV1
from .trajectory import OpenHandsTrajectory

__all__ = ["OpenHands", "OpenHandsTrajectory", "OpenHandsV1"]
