"""UK AISI Inspect eval logs: the ``.json`` log and the zipped ``.eval`` container.

One session per sample and epoch. The conversation is the sample's ``messages``; recorded
usage comes from the sample's ``model`` events.

How a model event is tied to the message it produced: each model event's output message
(``output.choices[0].message``) is matched to an assistant message of ``messages`` -
first by message ``id`` (logs since mid-2024 give both the same id), then by content (text
plus tool-call names and arguments), searching forward from the last match so repeated
answers ("Yes", "Yes") pair in order. The matched message gets the event's usage, its
timestamp, and ``meta["request"]`` = the event's model, tools, tool choice, generate config
and the number of messages sent (``input``, or since 2025 ``input_refs`` ranges into the
sample's ``events_data.messages`` pool). When the messages sent (``event.input``) are not exactly
the messages before the reply in ``messages`` (a solver trimmed or rewrote history), the
request also carries ``input_differs`` and the content hashes of what was sent, so a replay
can rebuild the real window.

A ``compaction`` event (Inspect's own history compaction, 2025-) becomes a
``compaction_boundary`` record placed before the reply of the first model call after it; the
compacted input that call was sent is in its ``input_hashes``.

Model events that produce no message in ``messages`` are not invented into the
conversation: scorer calls (inside a scorer step/span) are counted as skipped; other ones
(self-critique calls, sub-agents, history a solver reset) are counted, warned about once per
sample, and their usage totals kept in session metadata.

Layouts read: ``.json`` (``version`` 1 and 2: ``samples[]``; v1 samples keep events and
attachment text under ``transcript``), ``.eval`` with ``header.json`` (finished),
``_journal/start.json`` only (a run still in progress or killed), and the first ``.eval``
layout (``start.json`` + ``results.json``). Text moved out to ``attachments``
(``attachment://<hash>``, earlier ``tc://<hash>``) is resolved back in.

The package: ``container`` (the .json and .eval layouts as header and sample pairs),
``messages`` (ChatMessages and attachments), ``events`` (model and compaction events),
``sample`` (one sample as a session) and ``importer`` (the registered ``inspect``).
"""

from __future__ import annotations

from .container import eval_samples, json_samples
from .importer import InspectLog
from .sample import sample_session

__all__ = ["InspectLog", "eval_samples", "json_samples", "sample_session"]
