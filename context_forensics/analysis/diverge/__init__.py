"""Diverge: the earliest point where two runs of the same task part ways, and what kind of
difference it was; and, for coding agents, the decisive one: where their fixes differ.

Two runs (typically a success and a failure) are compared as logical events normalized across
harnesses, not as raw messages. The modules follow the data flow:

``normalize``  text, tool outputs and paths of any harness made comparable (noise masked);
``roots``      the folder a run worked in, as its log records it (``run_roots``);
``actions``    the canonical key of a tool call or shell command (``view f``, ``edit f #h``...);
``events``     a run as logical events (system, user, action, result, answer), retries and
               harness feedback set aside (``extract_events``);
``compare``    whether two differing events say the same thing, and how that was decided
               (``Comparer``: text, lexical, status, or chunk-level embedding similarity);
``alignment``  the two runs aligned (``align``, ``align_runs``), harness framing and detours
               set aside, the first diverging row found;
``context``    each run's replayed window at the divergence and the context similarity curve;
``causes``     the cause of the divergence (``CAUSES``) and the events shown side by side;
``inputs``     the given inputs (system prompt, task, tool definitions) compared as text;
``edit_formats`` edit payloads that carry several changes (SEARCH/REPLACE blocks, apply_patch);
``edits``      the file changes a run's actions made (``run_edits``, ``shell_edits``);
``applied``    which of them took effect (``applied_edits``, ``effective_edits``);
``consistency`` the edit calls a log holds against the edits the analyses see (``edit_consistency``);
``patches``    a run's change to its repository, recorded or rebuilt, and two compared;
``decisive``   each run's final patch and the first edit of the source files that differs;
``report``     the ``Divergence`` report (``diverge_runs``, ``diverge``) and ``task_pairs``;
``display``    capped texts and diffs for the report.

``diverge(store, a, b)`` is the entry point; its result's ``to_dict()`` is ``ctxf diverge
--json``.
"""

from .actions import canonical_call, canonical_shell, edit_key, is_read_only, tool_kind
from .alignment import OPS_SAME, Alignment, Row, align, align_runs
from .applied import applied_edits, effective_edits
from .causes import CAUSES, classify, event_diff
from .compare import METHODS, Comparer, Pending, describe, line_overlap
from .consistency import edit_consistency
from .context import RunContext, context_curve, run_context
from .decisive import decisive_edit, final_patch
from .edits import EditAction, FileEdit, run_edits, script_replace, shell_edits
from .events import EVENT_TYPES, Event, RunEvents, extract_events
from .normalize import Output, given_text, mask_noise, normalize_output, normalize_path, normalize_text, strip_roots
from .patches import Block, FilePatch, Patch, Rebuild, blocks_between, compare_patches, hunk_lines, parse_patch
from .report import DIVERGE_VERSION, Divergence, diverge, diverge_runs, task_pairs
from .roots import Roots, run_roots

__all__ = [
    "CAUSES",
    "DIVERGE_VERSION",
    "EVENT_TYPES",
    "METHODS",
    "OPS_SAME",
    "Alignment",
    "Block",
    "Comparer",
    "Divergence",
    "EditAction",
    "Event",
    "FileEdit",
    "FilePatch",
    "Output",
    "Patch",
    "Pending",
    "Rebuild",
    "Roots",
    "Row",
    "RunContext",
    "RunEvents",
    "align",
    "align_runs",
    "applied_edits",
    "blocks_between",
    "canonical_call",
    "canonical_shell",
    "classify",
    "compare_patches",
    "context_curve",
    "decisive_edit",
    "describe",
    "diverge",
    "diverge_runs",
    "edit_consistency",
    "edit_key",
    "effective_edits",
    "event_diff",
    "extract_events",
    "final_patch",
    "given_text",
    "hunk_lines",
    "is_read_only",
    "line_overlap",
    "mask_noise",
    "normalize_output",
    "normalize_path",
    "normalize_text",
    "parse_patch",
    "run_context",
    "run_edits",
    "run_roots",
    "script_replace",
    "shell_edits",
    "strip_roots",
    "task_pairs",
    "tool_kind",
]
