"""Diverge: the earliest point where two runs of the same task part ways, and what kind of
difference it was.

Two runs (typically a success and a failure) are turned into **logical events** and aligned,
not their raw messages:

``system``   instructions (system / developer messages);
``user``     user inputs (the task statement and anything a person said later);
``action``   one assistant action: a tool call (tool name + normalized arguments), or the
             command of a text action for text-protocol agents (mini-swe-agent's bash block);
``result``   what the environment answered to an action (a tool message, or the observation a
             text-protocol harness sends back as a user message);
``answer``   assistant text that is not an action (a chat reply, a summary) and a harness's
             final submission record.

Cross-format comparison. Actions are canonicalized so that an OpenHands run and a
mini-swe-agent run compare: ``execute_bash``/``bash``/``shell`` calls and text actions become
the same ``shell: <command>`` (whitespace, quoting, ``cd <dir> &&`` prefixes, ``python3`` and
``python -m pytest``, and absolute repo roots such as ``/testbed`` or ``/workspace/<instance>``
normalized away), and editor tools and their shell equivalents map to one verb:

- ``cat f`` / ``cat -n f`` / editor ``view f`` / ``Read f`` are ``view f``; ``sed -n 'a,bp' f``,
  ``nl -ba f | sed -n 'a,bp'``, ``head -n b f`` and an editor ``view_range`` are ``view f[a:b]``;
- ``ls [flags] d`` is ``list d -flags``; an editor view of a folder is ``list d (2 levels)``
  (a different listing with a different output, so not the same action as any ``ls``);
- heredoc writes (``cat <<'EOF' > f``) and editor ``create`` are ``create f #<content hash>``;
- a plain ``sed -i 's/old/new/' f``, editor ``str_replace(old, new)`` and ``Edit`` are
  ``edit f #<hash of (old, new)>``; other edits hash their arguments;
- mini-swe-agent's submit command, ``finish`` and ``submit`` tools are ``submit``.

Tool outputs lose run-specific noise before they are compared: harness wrappers
(``<returncode>``/``<output>`` tags, the echoed command, shell prompts, ``[Command finished
with exit code N]``, SWE-agent's footer), ANSI escapes, ``cat -n`` line numbers, timestamps,
durations, hex ids, addresses, temp dirs and repo roots; the return code is kept apart.

Events the alignment ignores (listed under ``skipped``): harness feedback (format errors, "no
tool calls found", OpenHands' "Please continue working on the task"), the assistant turn such
feedback rejected, and **retries**: an action followed, after only its own results, by the same
action again folds into that later attempt. So a run that retried a command and then went on
like the other run has not diverged. Compaction records, cleared results and reasoning items
are context mechanics, not events: the replay accounts for them.

Alignment: a global alignment (Needleman-Wunsch, linear gaps) over the event keys, where only
events of the same type can be paired: +2 for equal keys, -1 for a substitution, -1 per gap.
The DP runs on the reversed sequences and the traceback walks forward preferring pairs, so
among the best-scoring alignments the one with the longest common start is chosen (the
divergence is as late as the evidence allows). Each DP row is vectorized with numpy (the left
gap chain is a running maximum, ``np.maximum.accumulate``); an exact common start skips the DP.
Two 2,000-event runs align in well under a second (``bench/diverge.py``).

Matching. A pair matches when the keys are equal after normalization (``match``). Substituted
pairs are then compared by content (``similar`` when they pass; ``measure`` says how):

- free text (system, user, answer): embedding similarity >= ``divergence_cosine``
  (``embedding``), computed on sentence chunks (``embed.chunk_text``, the facts' chunking, so
  their cached vectors are reused) as a BERTScore-style F1 of the best chunk cosines, so a long
  text is not truncated to MiniLM's 256 wordpieces. Chunks present in both texts match without
  the model; only the others are embedded (at most 32 per side: the first and last 16).
- tool results: different return codes never match (``returncode``); an output one harness cut
  (head ... tail) matches the full one when >= 90% of its lines are in it (``truncated``); the
  results of the same action run through different tools (the editor vs the shell) word their
  confirmations differently ("File created successfully" vs nothing), so unless they share
  content only success vs failure is compared (``tool_format``); two looks at the same file
  match when one shows a part of the other (``contained``); below 20% shared lines outputs
  differ without asking the model (``lines``: outputs are not paraphrased); otherwise
  embedding similarity >= ``divergence_cosine``.
- actions are structured: only equal keys match, except two views (or listings) of the same
  path whose outputs match (``same_output``: ``view f[1:240]`` of a short file is ``view f``).
  Otherwise a substitution's similarity is lexical (``difflib`` ratio of the canonical forms),
  for display.

Only substituted pairs are embedded, each unique chunk once, through the store's embedding
cache; the model is loaded only if some pair needs it.

Harness differences. Runs from different harnesses (format, or text vs tool-calling protocol)
get different system prompts and different task templates by construction. Then differences in
the **preamble** (system and user events before either run's first action) are reported under
``preexisting`` (with their line overlap, not embedded) and do not count as the divergence: the
earliest *meaningful* divergence is searched in what happened after the task was given. For runs
of the same harness a preamble difference is the divergence (``system_prompt`` /
``user_input``).

Detours. A stretch where both runs only looked around (read-only actions: views, listings,
``grep``/``find``/``git diff``... and their own results) and then took the same step again is a
*detour*: listed under ``detours``, not the divergence, like a retry (``--strict`` counts it).

The divergence is the first aligned row that is not a match, similar, preexisting or a detour.
Its *block* runs to the next matching row (``detail.rejoined``: where the runs line up again);
the events shown side by side are each run's first event in the block (or, for a run with none,
the event it did next). ``detail.first_state_change`` is the first differing action in or after
the block that changes something (not read-only): where the two environments parted. The cause:

``run_ended``         one run has no events left;
``system_prompt``     the first differing event is an instruction;
``user_input``        ... a user input;
``tool_output``       ... a tool result (the actions before it matched: the environment
                      answered differently);
``context_window``    the runs decided differently after the same aligned history, but their
                      windows differed: some aligned event was lost (evicted, cleared,
                      summarized) in one run's window and not in the other's at that step
                      (replay: the recorded policy, or ``--model`` as a what-if);
``assistant_action``  the same history and the same window, a different decision.

Context at the divergence, per run: the replayed window of the model call that made (or first
read) the diverging event: tokens, utilization, state counts, the aligned events already lost,
and the config's ``facts:`` that are gone (``facts.track_facts``; null when none are set).

Context similarity curve: at each aligned pair of model calls, the Jaccard similarity of the
two windows, counting an aligned pair of events (matched, similar or preexisting) as one shared
item and every other event whose content is in a window as its own: 1.0 while the runs saw the
same history, falling after the divergence, and lower when one window lost events the other
kept.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import posixpath
import re
import shlex
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .patches import Block, Patch, Rebuild, blocks_between, compare_patches, hunk_lines, parse_patch
from ..facts.polarity import polarity_flip
from ..records import KIND_MESSAGE
from ..tool_output import _FEEDBACK, text_action, tool_outputs

if TYPE_CHECKING:  # pragma: no cover
    from ..config.settings import Config
    from ..embed import Embedder
    from ..store.db import Store

DIVERGE_VERSION = 1
CAUSES = ("system_prompt", "user_input", "tool_definitions", "tool_output", "assistant_action", "context_window",
          "run_ended")
EVENT_TYPES = ("system", "user", "action", "result", "answer")
GIVEN_TYPES = ("system", "user")  # given to the model, not generated: compared as text, never by cosine
# ``not_comparable``: results of one action worded by different harnesses (both succeeded); the
# alignment goes on, but no similarity is claimed
OPS_SAME = ("match", "similar", "preexisting", "not_comparable")
METHODS = ("exact", "text", "embedding", "lexical", "polarity", "status", "n/a")
KIND_SUBMISSION = "submission"  # a harness's final output (the patch), kept by the importer as its own kind

MATCH, MISMATCH, GAP, FORBIDDEN = 2, -1, -1, -1_000_000
MAX_CHUNKS = 32  # per text, for embedding similarity: the first and last half of this
MIN_LINE_OVERLAP = 0.2  # tool results below this overlap are different without embedding
TEXT_LIMIT = 4000  # characters of an event's text in JSON output
DIFF_LINES = 60

ProgressFn = Callable[[int, int], None]

# ============================================================================================
# normalization

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_REPO_ROOT = re.compile(
    r"/workspace/[\w.-]+__[\w.-]+"  # OpenHands: /workspace/<owner>__<repo>__<version>
    r"|/testbed\b|/workspace\b|/repo\b"
    r"|(?<![\w./-])/[\w.-]+__[\w.-]+"  # SWE-agent: /<owner>__<repo>
)
# (guard, pattern, replacement): a pattern runs only when its guard substring is in the text
# (one pass per pattern over a text that cannot match is most of the cost otherwise)
_NOISE = (
    ("-", re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"),
     "<time>"),
    ("-", re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<date>"),
    ("", re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+\d{1,2}\s+(?:\d{1,2}:\d{2}|\d{4})\b"),
     "<date>"),
    (":", re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    ("", re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|minutes|min)\b"), "<dur>"),
    ("0x", re.compile(r"\b0x[0-9a-fA-F]+\b"), "<addr>"),
    ("-", re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    ("", re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"), "<hex>"),
    ("/tmp/", re.compile(r"/tmp/(?:tmp[\w-]+|pytest-of-[\w-]+/pytest-\d+)"), "<tmp>"),
    ("/var/folders/", re.compile(r"(?:/private)?/var/folders/[\w./-]+"), "<tmp>"),
)
_ROOT_HINTS = ("/testbed", "/workspace", "/repo", "__")
_LINE_NUMBER = re.compile(r"^\s*\d+\t", re.MULTILINE)  # cat -n, nl -ba, the editor's view
_WS = re.compile(r"[ \t\f\v]+")


def strip_roots(text: str) -> str:
    """Absolute repo roots removed: ``/testbed/a/b.py`` -> ``a/b.py``, a bare root -> ``.``."""
    if "/" not in text or not any(h in text for h in _ROOT_HINTS):
        return text
    out = []
    pos = 0
    for m in _REPO_ROOT.finditer(text):
        out.append(text[pos:m.start()])
        nxt = text[m.end():m.end() + 1]
        if nxt == "/":
            pos = m.end() + 1
        else:
            out.append(".")
            pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def mask_noise(text: str) -> str:
    """Run-specific noise replaced by placeholders: repo roots, times, durations, ids, temp dirs."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = strip_roots(text)
    for guard, pat, repl in _NOISE:
        if guard in text:
            text = pat.sub(repl, text)
    return text


def normalize_text(text: str) -> str:
    """Free text for comparison: noise masked, whitespace collapsed, blank lines dropped."""
    t = mask_noise(text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text)
    lines = (" ".join(line.split()) for line in t.split("\n"))
    return "\n".join(line for line in lines if line)


def given_text(text: str) -> str:
    """A given input (instructions, a user's words, tool schemas) for comparison: whitespace
    collapsed, blank lines dropped, nothing masked: any other difference is a real one."""
    t = text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
    lines = (" ".join(line.split()) for line in t.split("\n"))
    return "\n".join(line for line in lines if line)


WORD_DIFF_CONTEXT = 6  # words shown either side of a change
WORD_DIFF_LIMIT = 20  # changes listed


def word_diff(a: str, b: str) -> list[dict[str, str]]:
    """The words deleted from ``a`` and inserted in ``b`` (``difflib`` over words), each change
    with a few words of context: ``{"op", "deleted", "inserted", "before", "after"}``."""
    wa, wb = a.split(), b.split()
    out: list[dict[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if len(out) == WORD_DIFF_LIMIT:
            out.append({"op": "more", "deleted": "", "inserted": "", "before": "", "after": "",
                        "note": "further changes not listed"})
            break
        out.append({"op": tag, "deleted": _cap(" ".join(wa[i1:i2])), "inserted": _cap(" ".join(wb[j1:j2])),
                    "before": " ".join(wa[max(0, i1 - WORD_DIFF_CONTEXT):i1]),
                    "after": " ".join(wa[i2:i2 + WORD_DIFF_CONTEXT])})
    return out


def _cap(s: str, limit: int = 600) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"


_RC_TAG = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_WARNING = re.compile(r"<warning>.*?</warning>", re.DOTALL)
_ELIDED = re.compile(r"<elided_chars>.*?</elided_chars>", re.DOTALL)
_OUTPUT_TAGS = re.compile(r"</?(?:output|output_head|output_tail|stdout|stderr)>")
_OH_EXIT = re.compile(r"\[Command finished with exit code (-?\d+)\]")
_OH_INTERPRETER = re.compile(r"\[Python Interpreter: [^\]\n]*\]")
_OH_PROMPT = re.compile(r"^[\w.-]+@[\w.-]+:[^\n]*[#$] ?$", re.MULTILINE)
_OH_VIEW_HEADER = re.compile(r"^Here's the result of running `cat -n` on [^\n]*:\s*$", re.MULTILINE)
_SWE_FOOTER = re.compile(r"\(Open file: [^\n]*\)\s*\n\(Current directory: [^\n]*\)\s*\n?bash-\$\s*$")


@dataclass(frozen=True, slots=True)
class Output:
    rc: int | None
    body: str
    truncated: bool


def normalize_output(text: str, command: str | None = None, returncode: int | None = None) -> Output:
    """A tool result without its harness wrapper and run-specific noise."""
    t = text
    if "\x1b" in t:
        t = _ANSI.sub("", t)
    if "\r" in t:
        t = t.replace("\r\n", "\n").replace("\r", "\n")
    rc = returncode
    truncated = False
    if "<" in t:  # mini-swe-agent's wrapper
        m = _RC_TAG.search(t)
        if m:
            rc = int(m.group(1)) if rc is None else rc
            t = t[:m.start()] + t[m.end():]
        t = _WARNING.sub("", t)
        truncated = bool(_ELIDED.search(t))
        t = _ELIDED.sub("\n<elided>\n", t)
        t = _OUTPUT_TAGS.sub("", t)
    if "[" in t:  # OpenHands' wrapper
        m = _OH_EXIT.search(t)
        if m:
            rc = int(m.group(1)) if rc is None else rc
            t = _OH_EXIT.sub("", t)
        t = _OH_INTERPRETER.sub("", t)
    if "@" in t:
        t = _OH_PROMPT.sub("", t)
    if "Here's the result" in t:
        t = _OH_VIEW_HEADER.sub("", t)
    if "(Open file:" in t:
        t = _SWE_FOOTER.sub("", t)
    if command:  # OpenHands echoes the command on the first line(s)
        stripped = t.lstrip("\n")
        if stripped.startswith(command.strip()):
            t = stripped[len(command.strip()):]
    if "\t" in t:
        t = _LINE_NUMBER.sub("", t)
    return Output(rc, normalize_text(t), truncated)


def _h(*parts: str) -> str:
    return hashlib.blake2b("\0".join(parts).encode("utf-8", "surrogatepass"), digest_size=5).hexdigest()


def _content_key(text: str) -> str:
    return _h(" ".join(text.split()))


# ============================================================================================
# actions


SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
SHELL_TOOLS = frozenset({"bash", "execute_bash", "shell", "run_shell_command", "exec_command", "run_command",
                         "terminal", "local_shell", "container.exec", "cmd", "run"})
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "edit_file", "file_editor",
                          "text_editor"})
SUBMIT_TOOLS = frozenset({"finish", "submit", "task_complete", "attempt_completion", "done", "final_answer"})
_CD_PREFIX = re.compile(r"^cd\s+(\"[^\"]*\"|'[^']*'|[^\s;&|]+)\s*(?:&&|;)\s*")
_HEREDOC = re.compile(
    r"^cat\s+(?:<<-?\s*(['\"]?)(?P<d1>\w+)\1\s*>\s*(?P<p1>\S+)|>\s*(?P<p2>\S+)\s*<<-?\s*(['\"]?)(?P<d2>\w+)\5)\s*\n")
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+|\$))?p$")
_PATHISH = re.compile(r"^[\w.@+~-]*(?:/[\w.@+~-]*)+$|^[\w@+~-][\w.@+~-]*\.[A-Za-z]\w{0,5}$")


def _unquote(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return s


def normalize_path(p: str, cwd: str = "") -> str:
    """A path relative to the repo root: roots stripped, ``cwd`` applied, ``./`` and ``..`` folded."""
    p = strip_roots(_unquote(p.strip()))
    if cwd and cwd != "." and not p.startswith(("/", "~")):
        p = posixpath.join(cwd, p)
    if not p:
        return "."
    out = posixpath.normpath(p)
    return out


def _split(cmd: str) -> list[str] | None:
    try:
        lex = shlex.shlex(cmd, posix=True, punctuation_chars=";&|<>()")
        lex.whitespace_split = True
        lex.commenters = ""
        return list(lex)
    except ValueError:
        return None


def _range(a: str, b: str | None) -> str:
    return f"[{a}:{'' if b in (None, '$', '-1') else b}]"


def _view_of(tokens: list[str], cwd: str) -> str | None:
    """``view`` / ``list`` for read-only one-file shell commands, else None."""
    if not tokens:
        return None
    cmd, args = tokens[0], tokens[1:]
    files = [a for a in args if not a.startswith("-")]
    flags = [a for a in args if a.startswith("-")]
    if cmd == "cat" and len(files) == 1 and set(flags) <= {"-n"}:
        return f"view {normalize_path(files[0], cwd)}"
    if cmd == "ls" and len(files) <= 1:
        letters = "".join(sorted(set("".join(f.lstrip("-") for f in flags))))
        target = normalize_path(files[0], cwd) if files else normalize_path(".", cwd)
        return f"list {target}" + (f" -{letters}" if letters else "")
    if cmd == "head":
        n = None
        rest = []
        it = iter(args)
        for a in it:
            if a == "-n":
                n = next(it, None)
            elif re.fullmatch(r"-\d+", a):
                n = a[1:]
            elif a.startswith("-n") and a[2:].isdigit():
                n = a[2:]
            else:
                rest.append(a)
        if len(rest) == 1 and n and n.isdigit():
            return f"view {normalize_path(rest[0], cwd)}{_range('1', n)}"
    if cmd == "sed" and len(args) == 3 and args[0] == "-n":
        m = _SED_RANGE.match(args[1])
        if m:
            return f"view {normalize_path(args[2], cwd)}{_range(m.group(1), m.group(2) or m.group(1))}"
    return None


def _segments(tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for t in tokens:
        if t in ("|", "&&", ";", "||", "&"):
            out.append([t])
            out.append([])
        else:
            out[-1].append(t)
    return out


def canonical_shell(cmd: str) -> str:
    """A shell command's canonical key (see the module docstring)."""
    s = cmd.strip()
    if any(m in s for m in SUBMIT_MARKERS):
        return "submit"
    if s.startswith("submit") and s.split()[0] == "submit":
        return "submit"
    cwd = ""
    while True:
        m = _CD_PREFIX.match(s)
        if not m:
            break
        cwd = normalize_path(m.group(1), cwd)
        s = s[m.end():].lstrip()
    m = _HEREDOC.match(s)
    if m:
        delim = m.group("d1") or m.group("d2")
        path = normalize_path(m.group("p1") or m.group("p2"), cwd)
        body = s[m.end():]
        end = re.search(rf"^{re.escape(delim)}\s*$", body, re.MULTILINE)
        content, rest = (body[:end.start()], body[end.end():]) if end else (body, "")
        key = f"create {path} #{_content_key(content)}"
        rest = re.sub(r"^\s*(?:&&|;|\|\|)\s*", "", rest.strip())
        return f"{key} && {canonical_shell(rest)}" if rest else key
    if not s:
        return "shell:"
    tokens = _split(s) if "\n" not in s or s.count("\n") < 3 else None
    if tokens is None:  # unbalanced quotes or a script: compare it as whitespace-normalized text
        return "shell: " + " ".join(mask_noise(s).split())
    tokens = ["python" if t == "python3" else t for t in tokens]
    segs = _segments(tokens)
    if len(segs) == 1:
        v = _view_of(segs[0], cwd)
        if v:
            return v
        if segs[0][:1] == ["sed"] and any(a == "-i" or a.startswith("-i") for a in segs[0][1:]):
            args = [a for a in segs[0][1:] if not a.startswith("-")]
            target = normalize_path(args[-1], cwd) if len(args) >= 2 else "?"
            sub = _SED_SUB.match(args[0]) if len(args) == 2 else None
            if sub and not (set(sub.group(4)) - set("g")):
                # a plain s/old/new/ is the same edit as the editor's str_replace(old, new)
                return edit_key(target, {"old_str": _sed_unescape(sub.group(2)), "new_str": _sed_unescape(sub.group(3))})
            return f"edit {target} #{_content_key(' '.join(segs[0]))}"
    if len(segs) == 3 and segs[1] == ["|"]:  # nl -ba f | sed -n 'a,bp', cat -n f | sed -n ...
        left, right = segs[0], segs[2]
        if left[:2] in (["nl", "-ba"], ["cat", "-n"]) and len(left) == 3 and right[:2] == ["sed", "-n"] \
                and len(right) == 3:
            m = _SED_RANGE.match(right[2])
            if m:
                return f"view {normalize_path(left[2], cwd)}{_range(m.group(1), m.group(2) or m.group(1))}"
    out = []
    for seg in segs:
        if seg[:3] == ["python", "-m", "pytest"]:
            seg = ["pytest", *seg[3:]]
        for t in seg:
            if _PATHISH.match(t) and not t.startswith("-"):
                out.append(normalize_path(t, cwd))
            else:
                t = mask_noise(t)
                out.append(shlex.quote(t) if any(c.isspace() for c in t) else t)
    return "shell: " + " ".join(x for x in out if x)


_SED_SUB = re.compile(r"^s(.)((?:\\.|(?!\1).)*)\1((?:\\.|(?!\1).)*)\1(\w*)$", re.DOTALL)


def _sed_unescape(s: str) -> str:
    return re.sub(r"\\([^\w])", r"\1", s)


def edit_key(path: str, change: dict[str, Any]) -> str:
    """``edit <path> #<hash of the change>``; the change is normalized like every argument."""
    return f"edit {path} #{_h(json.dumps(_norm_value(change), sort_keys=True))}"


def _args(arguments: str) -> dict[str, Any]:
    try:
        v = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_raw": arguments}
    return v if isinstance(v, dict) else {"_value": v}


def _norm_value(v: Any) -> Any:
    if isinstance(v, str):
        return " ".join(strip_roots(v).split())
    if isinstance(v, list):
        return [_norm_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm_value(x) for k, x in sorted(v.items())}
    return v


def _shell_command(args: dict[str, Any]) -> str | None:
    cmd = args.get("command", args.get("cmd", args.get("script")))
    if isinstance(cmd, list) and all(isinstance(x, str) for x in cmd):
        if len(cmd) >= 3 and cmd[0] in ("bash", "sh", "zsh") and cmd[1] in ("-c", "-lc"):
            return cmd[2]
        return " ".join(shlex.quote(x) for x in cmd)
    return cmd if isinstance(cmd, str) else None


def _editor(command: str, args: dict[str, Any], result: str | None) -> str | None:
    path = args.get("path") or args.get("file_path") or args.get("file")
    if not isinstance(path, str):
        return None
    p = normalize_path(path)
    if command == "view":
        if result and result.lstrip().startswith("Here's the files and directories"):
            return f"list {p} (2 levels)"  # not ``ls``: a different listing, a different output
        rng = args.get("view_range")
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng):
            return f"view {p}{_range(str(rng[0]), str(rng[1]))}"
        return f"view {p}"
    if command == "create":
        return f"create {p} #{_content_key(str(args.get('file_text') or args.get('content') or ''))}"
    if command in ("str_replace", "insert", "edit"):
        return edit_key(p, {k: v for k, v in args.items() if k not in ("path", "command")})
    if command == "undo_edit":
        return f"undo {p}"
    return None


def canonical_call(name: str, arguments: str, result: str | None = None) -> tuple[str, str]:
    """(key, text) of a tool call: the canonical key and a readable form for diffs."""
    args = _args(arguments)
    lname = name.lower()
    if lname in SUBMIT_TOOLS:
        return "submit", f"{name} {arguments}".strip()
    if lname in SHELL_TOOLS or lname == "bash":
        cmd = _shell_command(args)
        if cmd is not None:
            return canonical_shell(cmd), cmd
    if lname == "execute_ipython_cell" and isinstance(args.get("code"), str):
        return "python: " + " ".join(mask_noise(args["code"]).split()), args["code"]
    command = args.get("command")
    if (lname in EDITOR_TOOLS or isinstance(args.get("path"), str)) and isinstance(command, str):
        key = _editor(command, args, result)
        if key:
            return key, _readable(name, args)
    # Claude Code, SWE-agent and similar file tools
    fp = args.get("file_path") or args.get("path") or args.get("filename")
    if isinstance(fp, str):
        if lname in ("read", "open", "read_file", "view"):
            return f"view {normalize_path(fp)}", _readable(name, args)
        if lname in ("write", "create", "write_file", "create_file"):
            return f"create {normalize_path(fp)} #{_content_key(str(args.get('content') or ''))}", _readable(name, args)
        if lname in ("edit", "multiedit", "apply_patch", "replace", "edit_file"):
            old, new = args.get("old_string"), args.get("new_string")
            change = {"old_str": old, "new_str": new} if isinstance(old, str) and isinstance(new, str) and len(
                args) <= 4 and not args.get("replace_all") else {k: v for k, v in args.items() if k != "file_path"}
            return edit_key(normalize_path(fp), change), _readable(name, args)
    norm = json.dumps(_norm_value(args), sort_keys=True, ensure_ascii=False)
    return f"{name} {norm}", _readable(name, args)


def _readable(name: str, args: dict[str, Any]) -> str:
    parts = [name]
    for k, v in args.items():
        parts.append(f"{k}: {v}" if not isinstance(v, str) or "\n" not in v else f"{k}:\n{v}")
    return "\n".join(parts)


# ============================================================================================
# events


@dataclass(slots=True)
class Event:
    """One logical event of a run."""

    index: int
    type: str  # system | user | action | result | answer
    key: str  # compared for exact matches (type-prefixed)
    text: str  # normalized comparable text (free text, tool output body, action command)
    display: str  # one readable line
    seq: int
    step: int | None  # action/answer: its own model call; input: the model call that reads it
    rc: int | None = None
    tool: str | None = None
    parent: int | None = None  # result -> index of its action
    skip: str | None = None  # why the alignment ignores it: retry | feedback | rejected
    truncated: bool = False
    via: str | None = None  # result: the kind of tool that produced it (shell, editor, or a tool name)
    parent_key: str | None = None  # result: its action's key
    result: Event | None = field(default=None, repr=False)  # action: its (first) result
    arguments: str | None = field(default=None, repr=False)  # tool-call action: its raw arguments (edits)
    submission: bool = False  # answer: the harness's final submission (the patch), not generated text

    def to_dict(self) -> dict[str, Any]:
        text = self.text if len(self.text) <= TEXT_LIMIT else self.text[: TEXT_LIMIT - 1] + "…"
        return {"type": self.type, "seq": self.seq, "step": self.step, "key": self.key.split(":", 1)[1],
                "display": self.display, "text": text, "tool": self.tool, "returncode": self.rc}


@dataclass
class RunEvents:
    session_id: str
    format: str
    protocol: str  # text | tools | chat
    events: list[Event]
    step_seqs: list[int]
    submission: str | None = None  # the final submission's text, when a message holds it
    submission_seq: int | None = None

    @property
    def harness(self) -> str:
        return f"{self.format}/{self.protocol}"

    def aligned(self) -> list[Event]:
        return [e for e in self.events if e.skip is None]


def _one_line(s: str, limit: int = 120) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _display_action(key: str) -> str:
    return _one_line(re.sub(r" #[0-9a-f]{10}\b", "", key))


def _next_step(step_seqs: list[int], seq: int) -> int | None:
    k = bisect_right(step_seqs, seq)
    return k + 1 if k < len(step_seqs) else None


def extract_events(messages: Sequence[Any], fmt: str, session_id: str = "") -> RunEvents:
    """A run's logical events, with retries, harness feedback and rejected turns marked ``skip``.

    ``messages`` are ``StoredMessage``s (``.seq`` and ``.message``) or plain ``Message``s.
    """
    msgs = [(getattr(sm, "seq", i), getattr(sm, "message", sm)) for i, sm in enumerate(messages)]
    step_seqs = [seq for seq, m in msgs if m.role == "assistant" and m.kind == KIND_MESSAGE]
    step_of = {seq: k + 1 for k, seq in enumerate(step_seqs)}
    outputs = tool_outputs([m for _, m in msgs], fmt)  # which messages are tool output, and the protocol
    protocol = outputs.protocol

    events: list[Event] = []
    answers: dict[str, str] = {}  # tool_call_id -> the result's text (decides `view` of a folder)
    for _, m in msgs:
        if m.role == "tool" and m.tool_call_id and m.tool_call_id not in answers:
            answers[m.tool_call_id] = m.text
    answered_calls: set[int] = set()
    calls: dict[str, int] = {}  # tool_call_id -> action event index
    pending_text: int | None = None  # a text action waiting for its observation
    last_assistant: list[int] = []  # events of the latest assistant message
    answered = False  # something non-assistant happened after it

    def add(**kw: Any) -> Event:
        e = Event(index=len(events), **kw)
        events.append(e)
        return e

    submission: tuple[int, str] | None = None
    for pos, (seq, m) in enumerate(msgs):
        meta = m.meta or {}
        if m.kind == KIND_SUBMISSION or (m.role == "user" and m.kind == KIND_MESSAGE and meta.get("exit")):
            # a harness's final submission record (the patch): compared under ``patches``
            submission = (seq, m.text)
            t = normalize_text(m.text)
            add(type="answer", key="answer:" + _content_key(t), text=t, display="submission: " + _one_line(m.text),
                seq=seq, step=_next_step(step_seqs, seq), submission=True)
            pending_text = None
            answered = True
            continue
        if m.kind != KIND_MESSAGE:
            continue  # compaction records, cleared results, reasoning items: context mechanics
        if m.role in ("system", "developer"):
            t = given_text(m.text)
            add(type="system", key="system:" + _content_key(t), text=t, display=_one_line(m.text),
                seq=seq, step=_next_step(step_seqs, seq))
            answered = True
        elif m.role == "assistant":
            step = step_of.get(seq)
            last_assistant = []
            answered = False
            pending_text = None
            if m.tool_calls:
                for c in m.tool_calls:
                    result = answers.get(c.id) if c.id else None
                    key, readable = canonical_call(c.name, c.arguments, result)
                    e = add(type="action", key="action:" + key, text=readable, display=_display_action(key),
                            seq=seq, step=step, tool=c.name, arguments=c.arguments)
                    if c.id:
                        calls[c.id] = e.index
                    last_assistant.append(e.index)
            else:
                cmd = text_action(m.text) if protocol == "text" else None
                if cmd is not None:
                    key = canonical_shell(cmd)
                    e = add(type="action", key="action:" + key, text=cmd, display=_display_action(key),
                            seq=seq, step=step, tool="bash")
                    pending_text = e.index
                    last_assistant.append(e.index)
                elif m.text.strip():
                    t = normalize_text(m.text)
                    e = add(type="answer", key="answer:" + _content_key(t), text=t, display=_one_line(m.text),
                            seq=seq, step=step)
                    last_assistant.append(e.index)
        elif m.role == "tool":
            parent = calls.get(m.tool_call_id) if m.tool_call_id else None
            if parent is None:  # no id: the first call of the latest turn without a result yet
                parent = next((i for i in last_assistant
                               if events[i].type == "action" and i not in answered_calls), None)
            if parent is not None:
                answered_calls.add(parent)
            _add_result(add, events, m, seq, step_seqs, parent, meta)
            answered = True
            pending_text = None
        else:  # user
            if meta.get("interrupt_type") == "FormatError" or _FEEDBACK.match(m.text):
                add(type="user", key="user:feedback", text=normalize_text(m.text), display=_one_line(m.text),
                    seq=seq, step=_next_step(step_seqs, seq), skip="feedback")
                if not answered:
                    for i in last_assistant:
                        events[i].skip = "rejected"
                last_assistant = []
                pending_text = None
                continue
            if outputs[pos]:  # the observation answering the pending text action
                _add_result(add, events, m, seq, step_seqs, pending_text, meta)
            else:
                t = given_text(m.text)
                add(type="user", key="user:" + _content_key(t), text=t, display=_one_line(m.text), seq=seq,
                    step=_next_step(step_seqs, seq))
            pending_text = None
            answered = True
    _mark_retries(events)
    return RunEvents(session_id, fmt, protocol, events, step_seqs, submission=submission[1] if submission else None,
                     submission_seq=submission[0] if submission else None)


def _add_result(add: Callable[..., Event], events: list[Event], m: Any, seq: int, step_seqs: list[int],
                parent: int | None, meta: dict[str, Any]) -> None:
    command = None
    if parent is not None and tool_kind(events[parent].tool) == "shell":
        command = events[parent].text
    rc = meta.get("returncode") if isinstance(meta.get("returncode"), int) else None
    out = normalize_output(m.text, command, rc)
    key = "result:" + _h(str(out.rc), out.body)
    first = out.body.split("\n", 1)[0] if out.body else "(empty)"
    display = (f"rc={out.rc} " if out.rc is not None else "") + _one_line(first, 100)
    via = tool_kind(events[parent].tool) if parent is not None else None
    e = add(type="result", key=key, text=out.body, display=display, seq=seq, step=_next_step(step_seqs, seq),
            rc=out.rc, tool=m.name, parent=parent, truncated=out.truncated, via=via,
            parent_key=events[parent].key if parent is not None else None)
    if parent is not None and events[parent].result is None:
        events[parent].result = e


def tool_kind(name: str | None) -> str | None:
    """``shell`` for shell tools and text actions, ``editor`` for file-editor tools, else the name."""
    if name is None:
        return None
    low = name.lower()
    if low in SHELL_TOOLS:
        return "shell"
    if low in EDITOR_TOOLS:
        return "editor"
    return low


def _mark_retries(events: list[Event]) -> None:
    """An action followed (after only its own results) by the same action is a retry: it and
    its results are skipped, the last attempt stands."""
    live = [e for e in events if e.skip is None]
    for k, e in enumerate(live):
        if e.type != "action":
            continue
        j = k + 1
        while j < len(live) and live[j].type == "result" and live[j].parent == e.index:
            j += 1
        if j < len(live) and live[j].type == "action" and live[j].key == e.key:
            e.skip = "retry"
            for r in live[k + 1:j]:
                r.skip = "retry"


# ============================================================================================
# alignment


def align(a_types: Sequence[int], a_keys: Sequence[int], b_types: Sequence[int], b_keys: Sequence[int], *,
          match: int = MATCH, mismatch: int = MISMATCH, gap: int = GAP) -> list[tuple[int, int]]:
    """Global alignment of two event sequences: ``(i, j)`` pairs in order, -1 for a gap.

    Only equal types pair up. Among the best-scoring alignments, the traceback prefers pairs
    as early as possible (the DP runs on the reversed sequences, the traceback walks forward).
    """
    ta, ka = np.asarray(a_types, dtype=np.int64), np.asarray(a_keys, dtype=np.int64)
    tb, kb = np.asarray(b_types, dtype=np.int64), np.asarray(b_keys, dtype=np.int64)
    n, m = len(ka), len(kb)
    # exact common prefix: no DP needed
    p = 0
    while p < n and p < m and ka[p] == kb[p] and ta[p] == tb[p]:
        p += 1
    out = [(i, i) for i in range(p)]
    if p == n or p == m:
        out += [(i, -1) for i in range(p, n)] + [(-1, j) for j in range(p, m)]
        return out
    ra_t, ra_k = ta[p:][::-1], ka[p:][::-1]
    rb_t, rb_k = tb[p:][::-1], kb[p:][::-1]
    n2, m2 = len(ra_k), len(rb_k)
    idx = np.arange(m2 + 1, dtype=np.int64)
    h_prev = idx * gap
    dirs = np.zeros((n2 + 1, m2 + 1), dtype=np.int8)
    dirs[0, 1:] = 4
    dirs[1:, 0] = 2
    for i in range(1, n2 + 1):
        same_type = rb_t == ra_t[i - 1]
        s = np.where(same_type, np.where(rb_k == ra_k[i - 1], match, mismatch), FORBIDDEN)
        diag = h_prev[:-1] + s
        up = h_prev[1:] + gap
        best = np.maximum(diag, up)
        arr = np.empty(m2 + 1, dtype=np.int64)
        arr[0] = i * gap
        arr[1:] = best
        h = gap * idx + np.maximum.accumulate(arr - gap * idx)
        row = (h[1:] == diag).astype(np.int8)
        row |= (h[1:] == up).astype(np.int8) << 1
        row |= (h[1:] == h[:-1] + gap).astype(np.int8) << 2
        dirs[i, 1:] = row
        h_prev = h
    i, j = n2, m2
    while i > 0 or j > 0:
        d = dirs[i, j]
        if i > 0 and j > 0 and d & 1:
            out.append((p + n2 - i, p + m2 - j))
            i -= 1
            j -= 1
        elif i > 0 and (j == 0 or d & 2):
            out.append((p + n2 - i, -1))
            i -= 1
        else:
            out.append((-1, p + m2 - j))
            j -= 1
    return out


# ============================================================================================
# similarity


@dataclass(frozen=True)
class Pending:
    """A pair only the embedding model can decide."""

    texts: tuple[str, str]
    proxy: tuple[str, str] | None = None  # two view actions decided by their outputs


def _by_output(v: tuple[float, str, bool], key_a: str, key_b: str) -> tuple[float, str, bool]:
    sim, _, same = v
    return (sim, "same_output", True) if same else (_lexical(key_a, key_b), "lexical", False)


class Comparer:
    """Content similarity of substituted event pairs: embeddings for free text and tool results
    (chunk-level F1, each unique chunk embedded once through the cache), lexical for actions."""

    def __init__(self, embedder: Embedder | Callable[[], Embedder] | None, store: Store | None = None, *,
                 threshold: float = 0.85, cache_enabled: bool = True, ttl_hours: float = 0,
                 progress: ProgressFn | None = None) -> None:
        self._embedder = embedder
        self.store = store
        self.threshold = threshold
        self.cache_enabled = cache_enabled
        self.ttl_hours = ttl_hours
        self.progress = progress
        self.embedded = 0  # chunks requested (for tests and benches)

    def embedder(self) -> Embedder:
        e = self._embedder
        if e is None:
            raise ValueError("no embedder")
        if callable(e) and not hasattr(e, "encode"):
            e = self._embedder = e()
        return e  # type: ignore[return-value]

    def verdict(self, a: Event, b: Event) -> tuple[float, str, bool] | Pending:
        """(similarity, measure, same) when the evidence suffices without the model, else the
        texts to embed (``Pending``)."""
        if a.key == b.key:
            return 1.0, "exact", True
        if a.type in GIVEN_TYPES or a.submission or b.submission:
            # given, not generated (instructions, a user's words, the harness's submission): the
            # texts are equal after whitespace normalization or they differ; no cosine
            return None, "text", False
        if a.type == "action":
            # a view of the same file with another range that showed the same thing is the same
            # look: decided by the two results, compared like any results
            if _same_target_read(a.key, b.key) and a.result is not None and b.result is not None:
                v = _result_verdict(a.result, b.result)
                if v is None:
                    return Pending((a.result.text, b.result.text), proxy=(a.key, b.key))
                return _by_output(v, a.key, b.key)
            return _lexical(a.key, b.key), "lexical", False
        if a.type == "result":
            v = _result_verdict(a, b)
            if v is not None:
                return v
        elif polarity_flip(a.text, b.text) is not None:
            return None, "polarity", False  # the same words said the other way round: no cosine decides
        return Pending((a.text, b.text))

    def resolve(self, pending: Sequence[Pending]) -> list[tuple[float, str, bool]]:
        """Embed the pending pairs (one batch) and decide them."""
        if not pending:
            return []
        sims = self._embedding_similarity([p.texts for p in pending])
        out = []
        for p, sim in zip(pending, sims):
            v = (round(sim, 4), "embedding", sim >= self.threshold)
            out.append(_by_output(v, *p.proxy) if p.proxy else v)
        return out

    def compare(self, pairs: Sequence[tuple[Event, Event]]) -> list[tuple[float, str, bool]]:
        """(similarity, measure, same) per pair, embedding whatever needs it."""
        out: list[Any] = [self.verdict(a, b) for a, b in pairs]
        need = [k for k, v in enumerate(out) if isinstance(v, Pending)]
        for k, v in zip(need, self.resolve([out[k] for k in need])):
            out[k] = v
        return out

    def _embedding_similarity(self, texts: list[tuple[str, str]]) -> list[float]:
        """BERTScore-style F1 over sentence chunks. A chunk present in both texts is matched
        (1.0) without the model; the others are matched by cosine among themselves (a chunk
        with no counterpart on the other side scores 0). At most ``MAX_CHUNKS`` unshared chunks
        per side are embedded (the first and last half); the rest take their sample's mean."""
        from ..embed import chunk_text, embed_texts

        half = MAX_CHUNKS // 2
        plans = []
        index: dict[str, int] = {}
        allc: list[str] = []
        for ta, tb in texts:
            ca, cb = [c.text for c in chunk_text(ta)], [c.text for c in chunk_text(tb)]
            shared = set(ca) & set(cb)
            ua = [c for c in ca if c not in shared]
            ub = [c for c in cb if c not in shared]
            sa = ua if len(ua) <= MAX_CHUNKS else ua[:half] + ua[-half:]
            sb = ub if len(ub) <= MAX_CHUNKS else ub[:half] + ub[-half:]
            if sa and sb:
                for c in (*sa, *sb):
                    if c not in index:
                        index[c] = len(allc)
                        allc.append(c)
            plans.append((ca, cb, ua, ub, sa, sb, ta, tb))
        self.embedded += len(allc)
        vecs = embed_texts(allc, self.embedder(), self.store, cache_enabled=self.cache_enabled,
                           ttl_hours=self.ttl_hours, progress=self.progress) if allc else None
        out = []
        for ca, cb, ua, ub, sa, sb, ta, tb in plans:
            if not ca or not cb:
                out.append(1.0 if not ca and not cb and ta.strip() == tb.strip() else 0.0)
                continue
            best_a = best_b = 0.0
            if sa and sb and vecs is not None:
                sim = np.clip(vecs[[index[c] for c in sa]] @ vecs[[index[c] for c in sb]].T, 0.0, 1.0)
                best_a = float(sim.max(axis=1).mean())  # mean best match of A's unshared chunks
                best_b = float(sim.max(axis=0).mean())
            prec = (len(ca) - len(ua) + best_a * len(ua)) / len(ca)
            rec = (len(cb) - len(ub) + best_b * len(ub)) / len(cb)
            out.append(0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec))
        return out


_READ = re.compile(r"^action:(view|list) (\S+)")
_ERROR = re.compile(r"^(?:error|traceback|fatal)\b|no replacement was performed|no such file or directory"
                    r"|command not found|invalid `?path", re.IGNORECASE | re.MULTILINE)


def _same_target_read(a: str, b: str) -> bool:
    ma, mb = _READ.match(a), _READ.match(b)
    if not ma or not mb or ma.group(1) != mb.group(1):
        return False
    return ma.group(2).split("[")[0] == mb.group(2).split("[")[0]


def _failed(e: Event) -> bool:
    return (e.rc is not None and e.rc != 0) or bool(_ERROR.search(e.text))


def _result_verdict(a: Event, b: Event) -> tuple[float, str, bool] | None:
    """Decide two tool results without embeddings where the evidence suffices (None: embed)."""
    if a.key == b.key:
        return 1.0, "exact", True
    if a.rc is not None and b.rc is not None and a.rc != b.rc:
        return round(line_overlap(a.text, b.text), 4), "returncode", False
    if a.parent_key and b.parent_key and a.parent_key != b.parent_key \
            and _same_target_read(a.parent_key, b.parent_key) and a.text and b.text:
        # two looks at the same file or folder: the same when one shows a part of the other
        # (a line range of the whole file, a head-and-tail cut of a long output)
        la = [x for x in a.text.split("\n") if x and x != "<elided>"]
        lb = [x for x in b.text.split("\n") if x and x != "<elided>"]
        small, big = (la, set(lb)) if len(la) <= len(lb) else (lb, set(la))
        contained = sum(x in big for x in small) / max(len(small), 1)
        return round(contained, 4), "contained", contained >= 0.9
    if a.truncated != b.truncated:  # one harness cut a long output (head ... tail), the other not
        short, full = (a, b) if a.truncated else (b, a)
        lines = [x for x in short.text.split("\n") if x and x != "<elided>"]
        if lines:
            have = set(full.text.split("\n"))
            contained = sum(x in have for x in lines) / len(lines)
            return round(contained, 4), "truncated", contained >= 0.9
    if a.via and b.via and a.via != b.via and line_overlap(a.text, b.text) < MIN_LINE_OVERLAP:
        # the same action through different tools (an editor vs the shell): each words its own
        # confirmation ("File created successfully at: f" vs nothing), so only success vs
        # failure compares; printed content (a view) is compared as usual
        same = _failed(a) == _failed(b)
        return (1.0 if same else 0.0), "tool_format", same
    overlap = line_overlap(a.text, b.text)
    if overlap < MIN_LINE_OVERLAP:
        return round(overlap, 4), "lines", False
    return None


def _lexical(a: str, b: str) -> float:
    return round(difflib.SequenceMatcher(None, a[:2000], b[:2000], autojunk=False).ratio(), 4)


def line_overlap(a: str, b: str) -> float:
    """Shared distinct lines over the smaller side's distinct lines (1.0 for two empty texts)."""
    la, lb = set(a.split("\n")) - {""}, set(b.split("\n")) - {""}
    if not la and not lb:
        return 1.0
    if not la or not lb:
        return 0.0
    return len(la & lb) / min(len(la), len(lb))


# ============================================================================================
# divergence


@dataclass
class Row:
    op: str  # match | similar | preexisting | detour | mismatch | a_only | b_only
    a: Event | None
    b: Event | None
    similarity: float | None = None
    measure: str | None = None
    verdict: str = ""  # the op before detours are marked
    pending: Pending | None = None  # not decided yet: needs the embedding model
    method: str | None = None  # how the pair was compared (METHODS); None for a gap
    reason: str | None = None  # what the comparison rests on, or why none was made

    @property
    def type(self) -> str:
        return (self.a or self.b).type  # type: ignore[union-attr]

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "type": (self.a or self.b).type,  # type: ignore[union-attr]
            "a_seq": self.a.seq if self.a else None,
            "b_seq": self.b.seq if self.b else None,
            "a_step": self.a.step if self.a else None,
            "b_step": self.b.step if self.b else None,
            "a": self.a.display if self.a else None,
            "b": self.b.display if self.b else None,
            "similarity": self.similarity,
            "measure": self.measure,
            "method": self.method,
            "reason": self.reason,
        }


NOT_EMBEDDED = "not embedded: outside the pairs that decide the divergence (--full compares them)"
NOT_COMPARABLE = "different harness result formats: not comparable"


def describe(measure: str | None, similarity: float | None, same: bool, a: Event | None, b: Event | None, *,
             threshold: float, embedded: bool = False) -> tuple[str, str, float | None]:
    """(method, reason, similarity to report) of a comparison: how it was made and what it rests
    on. A figure is reported only where it was computed and is what the verdict rests on."""
    if measure == "exact":
        return "exact", "equal after normalization", 1.0
    if measure == "text":
        what = "the final submissions (patches: see `patches`)" if (a and a.submission) or (b and b.submission) \
            else "given inputs"
        return "text", f"{what} compared as text, whitespace normalized: {'equal' if same else 'differ'}", None
    if measure == "polarity":  # facts' polarity rule: "I renamed X" vs "I did not rename X"
        flip = polarity_flip(a.text, b.text) if a and b else None
        return "polarity", f"{flip.reason if flip else 'polarity differs'} (a rule on the words, no cosine)", None
    if measure == "embedding":
        rel = "≥" if same else "<"
        return "embedding", f"cosine (chunk F1, MiniLM) {similarity:.2f} {rel} threshold {threshold:.2f}", similarity
    if measure == "same_output":
        how = "embedding" if embedded else "lexical"
        return how, "two looks at the same file: the same when their outputs are", similarity
    if measure == "lexical":
        return ("lexical", "difflib ratio of the two actions' canonical forms (display only: different actions "
                           "never match)", similarity)
    if measure == "lines":
        return "lexical", "share of shared lines below 0.20: different outputs", similarity
    if measure == "contained":
        return "lexical", "share of the shorter look's lines in the other (0.90 or more: the same look)", similarity
    if measure == "truncated":
        return "lexical", "share of the cut output's lines in the full one (0.90 or more: the same)", similarity
    if measure == "returncode":
        return "status", f"return codes differ ({a.rc if a else '–'} vs {b.rc if b else '–'})", None
    if measure == "tool_format":
        if same:
            return "n/a", f"{NOT_COMPARABLE} (both succeeded)", None
        status = {True: "failed", False: "succeeded"}
        return ("status", f"{NOT_COMPARABLE}; only success vs failure compared: A {status[_failed(a)]}, "  # type: ignore[arg-type]
                          f"B {status[_failed(b)]}", None)  # type: ignore[arg-type]
    if measure == "not_compared":
        return "n/a", NOT_EMBEDDED, None
    return "n/a", f"not compared ({measure})", similarity


@dataclass
class Alignment:
    rows: list[Row]
    first: int | None  # index of the first diverging row
    cross_harness: bool
    preexisting: list[dict[str, Any]]
    detours: list[dict[str, Any]] = field(default_factory=list)


def _preamble_end(events: list[Event]) -> int:
    """Index (in the aligned events) of the first action or answer."""
    return next((e.index for e in events if e.type in ("action", "answer")), 1 << 60)


def align_runs(a: RunEvents, b: RunEvents, comparer: Comparer, *, tolerate_detours: bool = True,
               full: bool = False) -> Alignment:
    """Align two runs' events and decide, row by row, what matches.

    With ``tolerate_detours``, a stretch where both runs only looked around (read-only actions:
    views, listings, searches, and their results) and then took the same step again is a
    *detour* (listed, not the divergence), like a retry.
    """
    ea, eb = a.aligned(), b.aligned()
    codes: dict[str, int] = {}
    tcode = {t: k for k, t in enumerate(EVENT_TYPES)}
    ka = [codes.setdefault(e.key, len(codes)) for e in ea]
    kb = [codes.setdefault(e.key, len(codes)) for e in eb]
    pairs = align([tcode[e.type] for e in ea], ka, [tcode[e.type] for e in eb], kb)
    rows: list[Row] = []
    for i, j in pairs:
        ev_a = ea[i] if i >= 0 else None
        ev_b = eb[j] if j >= 0 else None
        if ev_a is not None and ev_b is not None:
            same = ev_a.key == ev_b.key
            rows.append(Row("match" if same else "mismatch", ev_a, ev_b, 1.0 if same else None,
                            "exact" if same else None, method="exact" if same else None,
                            reason="equal after normalization" if same else None))
        else:
            rows.append(Row("a_only" if ev_a is not None else "b_only", ev_a, ev_b,
                            reason=f"only in {'A' if ev_a is not None else 'B'}"))
    cross = a.harness != b.harness
    pre: list[dict[str, Any]] = []
    if cross:
        # Harness framing differs by construction: not compared by the model (these texts are
        # long, and no similarity would change the verdict); line overlap is shown for reference.
        end_a, end_b = _preamble_end(a.events), _preamble_end(b.events)
        for r in rows:
            ev = r.a or r.b
            if ev is None or ev.type not in ("system", "user") or r.op == "match":
                continue
            if (r.a is None or r.a.index < end_a) and (r.b is None or r.b.index < end_b):
                r.op = "preexisting"
                r.method = "text"
                r.reason = "given inputs compared as text: differ (by construction between harnesses)"
                if r.a is not None and r.b is not None:
                    r.similarity, r.measure = round(line_overlap(r.a.text, r.b.text), 4), "lines"
                pre.append({"cause": "system_prompt" if ev.type == "system" else "user_input",
                            "a_seq": r.a.seq if r.a else None, "b_seq": r.b.seq if r.b else None,
                            "similarity": r.similarity, "measure": r.measure, "method": "text",
                            "note": "differs between harnesses by construction "
                                    f"({a.harness} vs {b.harness}); not counted as the divergence"})
    for r in rows:
        if r.op == "mismatch":
            v = comparer.verdict(r.a, r.b)  # type: ignore[arg-type]
            if isinstance(v, Pending):
                r.pending = v
            else:
                _decide(r, v, comparer.threshold)
        r.verdict = r.op
    # The model decides only what decides the divergence: pairs up to the end of the first
    # diverging block, resolved in rounds (a pair found similar can move the divergence on).
    # With ``full``, every pending pair is embedded.
    if full:
        _resolve(comparer, [r for r in rows if r.pending is not None])
    while True:
        first, detours = _scan(rows, tolerate_detours)
        if first is None:
            break
        need = [r for r in rows[first:_block_end(rows, first)] if r.pending is not None]
        if not need:
            break
        _resolve(comparer, need)
    for r in rows:
        if r.pending is not None:  # after the divergence, left undecided: not worth the model
            r.measure = "not_compared"
            r.method, r.reason = "n/a", NOT_EMBEDDED
    return Alignment(rows, first, cross, pre, detours)


def _decide(r: Row, v: tuple[float | None, str, bool], threshold: float, embedded: bool = False) -> None:
    r.measure = v[1]
    r.method, r.reason, r.similarity = describe(v[1], v[0], v[2], r.a, r.b, threshold=threshold, embedded=embedded)
    if v[2]:
        r.op = "not_comparable" if r.method == "n/a" else "similar"
    else:
        r.op = "mismatch"
    r.verdict = r.op
    r.pending = None


def _resolve(comparer: Comparer, rows: list[Row]) -> None:
    for r, v in zip(rows, comparer.resolve([r.pending for r in rows])):  # type: ignore[misc]
        _decide(r, v, comparer.threshold, embedded=True)


def _scan(rows: list[Row], tolerate_detours: bool) -> tuple[int | None, list[dict[str, Any]]]:
    """The first diverging row and the detours before it (rows still pending count as different)."""
    for r in rows:
        r.op = r.verdict
    detours: list[dict[str, Any]] = []
    k = 0
    while k < len(rows):
        if rows[k].op in OPS_SAME:
            k += 1
            continue
        end = _block_end(rows, k)
        if tolerate_detours and end < len(rows) and _is_detour(rows[k:end]):
            for r in rows[k:end]:
                if r.op not in OPS_SAME:
                    r.op = "detour"
            a_ev = [r.a for r in rows[k:end] if r.a is not None]
            b_ev = [r.b for r in rows[k:end] if r.b is not None]
            detours.append({"a_steps": sorted({e.step for e in a_ev if e.type == "action"}),
                            "b_steps": sorted({e.step for e in b_ev if e.type == "action"}),
                            "a": [e.display for e in a_ev if e.type == "action"],
                            "b": [e.display for e in b_ev if e.type == "action"],
                            "rejoined": _position(rows[end])})
            k = end
            continue
        return k, detours
    return None, detours


_RO_PROGRAMS = frozenset({"ls", "cat", "find", "grep", "egrep", "fgrep", "rg", "ag", "head", "tail", "nl", "wc",
                          "pwd", "tree", "file", "stat", "which", "whereis", "du", "less", "more", "sort", "uniq",
                          "cut", "awk", "diff", "echo", "true", "basename", "dirname", "realpath", "readlink"})
_RO_GIT = frozenset({"diff", "log", "show", "status", "grep", "blame", "ls-files", "rev-parse", "branch"})
_RO_TOOLS = frozenset({"find_file", "search_dir", "search_file", "grep", "glob", "read", "open", "goto",
                       "scroll_up", "scroll_down", "view", "ls", "read_file", "list_dir", "list_files", "search"})


def is_read_only(key: str) -> bool:
    """An action that looks without changing anything: views, listings, searches, git diff/log."""
    body = key.split(":", 1)[1] if key.startswith("action:") else key
    if body.startswith(("view ", "list ")):
        return True
    if body.startswith("shell: "):
        tokens = _split(body[7:])
        if not tokens:
            return False
        for seg in _segments(tokens):
            if seg in (["|"], ["&&"], ["||"], [";"]):
                continue
            if not seg or any(t in (">", ">>", "&", "<") for t in seg):
                return False
            prog, args = seg[0], seg[1:]
            if prog == "git":
                if not args or args[0] not in _RO_GIT:
                    return False
            elif prog == "sed":
                if any(a.startswith("-i") for a in args):
                    return False
            elif prog == "find":
                if any(a in ("-delete", "-exec", "-execdir", "-ok", "-fprint") for a in args):
                    return False
            elif prog not in _RO_PROGRAMS:
                return False
        return True
    name = body.split(" ", 1)[0].lower()
    return name in _RO_TOOLS


def _position(r: Row) -> dict[str, Any]:
    return {"a_step": r.a.step if r.a else None, "b_step": r.b.step if r.b else None,
            "a_seq": r.a.seq if r.a else None, "b_seq": r.b.seq if r.b else None}


def _is_detour(block: list[Row]) -> bool:
    """Both runs only looked around (read-only actions and their own results) before rejoining."""
    actions = {id(e) for r in block for e in (r.a, r.b) if e is not None and e.type == "action"}
    for r in block:
        for e in (r.a, r.b):
            if e is None:
                continue
            if e.type == "action":
                if not is_read_only(e.key):
                    return False
            elif e.type == "result":
                parent_in_block = any(id(x) in actions and x.result is e for r2 in block for x in (r2.a, r2.b)
                                      if x is not None)
                if not parent_in_block:
                    return False  # a different answer to an action both runs took
            else:
                return False
    return True


@dataclass
class Divergence:
    version: int
    a: dict[str, Any]
    b: dict[str, Any]
    divergence: dict[str, Any] | None
    aligned: list[dict[str, Any]]
    curve: list[dict[str, Any]]
    preexisting: list[dict[str, Any]]
    detours: list[dict[str, Any]]
    skipped: dict[str, list[dict[str, Any]]]
    settings: dict[str, Any]
    decisive: dict[str, Any] = field(default_factory=dict)  # the first differing edit of the source files
    patches: dict[str, Any] = field(default_factory=dict)  # the two final patches compared
    inputs: dict[str, Any] = field(default_factory=dict)  # the given inputs compared as text

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "a": self.a, "b": self.b, "divergence": self.divergence,
                "decisive": self.decisive, "patches": self.patches, "inputs": self.inputs,
                "aligned": self.aligned, "curve": self.curve, "preexisting": self.preexisting,
                "detours": self.detours, "skipped": self.skipped, "settings": self.settings}

    def summary(self, task: str | None = None) -> dict[str, Any]:
        d = self.divergence or {}
        return {"task": task if task is not None else self.a.get("task"), "a": self.a["id"], "b": self.b["id"],
                "a_outcome": self.a.get("outcome"), "b_outcome": self.b.get("outcome"),
                "cause": d.get("cause"), "a_step": d.get("a_step"), "b_step": d.get("b_step"),
                "a_seq": d.get("a_seq"), "b_seq": d.get("b_seq"), "similarity": d.get("similarity"),
                "method": d.get("method"), "diverged": self.divergence is not None,
                "decisive": self.decisive, "patches": self.patches}


@dataclass
class RunContext:
    """A run's replay: per-step window figures, and each message's state at any step (from the
    timeline's joins and state changes: no message x step matrix)."""

    steps: list[dict[str, Any]]  # replay.step_dicts
    timeline: Any  # replay.Timeline
    model: str
    policy: str
    prepared: Any = None

    def state_at(self, seq: int, step: int) -> int:
        from ..replay.policies.base import KEPT, NOT_YET

        j = int(self.timeline.joins[seq]) if seq < len(self.timeline.joins) else 0
        if j == 0 or step < j:
            return NOT_YET
        state = KEPT
        for at, st in self.timeline.changes.get(seq, ()):
            if at > step:
                break
            state = st
        return state

    def lost_at(self, seq: int, step: int) -> bool:
        """Evicted, cleared or summarized from the window of ``step``."""
        from ..replay.policies.base import CLEARED, EVICTED, SUMMARIZED

        if not 1 <= step <= len(self.steps):
            return False
        return self.state_at(seq, step) in (EVICTED, CLEARED, SUMMARIZED)

    def holds(self, seqs: Sequence[int], steps: np.ndarray) -> np.ndarray:
        """(len(seqs), len(steps)) bool: the message's content is in the window at that step
        (kept, or only outside a local attention span; a cleared result's content is not)."""
        from ..replay.policies.base import KEPT, OUTSIDE_LOCAL

        out = np.zeros((len(seqs), len(steps)), dtype=bool)
        joins, changes = self.timeline.joins, self.timeline.changes
        for k, seq in enumerate(seqs):
            j = int(joins[seq]) if seq < len(joins) else 0
            if j == 0:
                continue
            out[k, np.searchsorted(steps, j):] = True
            for at, st in changes.get(seq, ()):
                out[k, np.searchsorted(steps, at):] = st in (KEPT, OUTSIDE_LOCAL)
        return out


def _block_end(rows: list[Row], start: int) -> int:
    """Where the runs line up again after ``start``: the next matching row that is not a tool
    result (two results can agree after different actions: "created" and "created")."""
    end = start
    while end < len(rows) and (rows[end].op not in OPS_SAME or rows[end].type == "result"):
        end += 1
    return end


def _block(rows: list[Row], first: int) -> tuple[int, Event | None, Event | None, bool, bool]:
    """End of the diverging block, each side's first event in it (or next after it), and
    whether each side has any event at or after the block."""
    end = _block_end(rows, first)
    a_first = next((r.a for r in rows[first:end] if r.a is not None), None)
    b_first = next((r.b for r in rows[first:end] if r.b is not None), None)
    a_next = a_first or next((r.a for r in rows[end:] if r.a is not None), None)
    b_next = b_first or next((r.b for r in rows[end:] if r.b is not None), None)
    return end, a_next, b_next, a_next is not None, b_next is not None


def classify(al: Alignment, ctx_a: RunContext | None = None, ctx_b: RunContext | None = None
             ) -> tuple[str, Event | None, Event | None, dict[str, Any]]:
    """The cause of the first divergence, the two events side by side, and detail."""
    assert al.first is not None
    rows = al.rows
    _, ev_a, ev_b, has_a, has_b = _block(rows, al.first)
    detail: dict[str, Any] = {}
    if not has_a or not has_b:
        detail["ended"] = "a" if not has_a else "b"
        return "run_ended", ev_a, ev_b, detail
    first_row = rows[al.first]
    lead = [e for e in (first_row.a, first_row.b) if e is not None]
    types = {e.type for e in lead} | {ev_a.type, ev_b.type}  # type: ignore[union-attr]
    for t, cause in (("system", "system_prompt"), ("user", "user_input"), ("result", "tool_output")):
        if t in types:
            return cause, ev_a, ev_b, detail
    # a decision: same history; did the windows differ?
    if ctx_a is not None and ctx_b is not None and ev_a is not None and ev_b is not None \
            and ev_a.step is not None and ev_b.step is not None:
        lost: list[dict[str, Any]] = []
        for r in rows[: al.first]:
            if r.a is None or r.b is None or r.op not in OPS_SAME:
                continue  # only the shared history: a detour's two different looks do not pair
            la, lb = ctx_a.lost_at(r.a.seq, ev_a.step), ctx_b.lost_at(r.b.seq, ev_b.step)
            if la != lb:
                lost.append({"run": "a" if la else "b", "a_seq": r.a.seq, "b_seq": r.b.seq, "type": r.a.type,
                             "event": (r.a if la else r.b).display})
        if lost:
            detail["lost_in_one_window"] = lost
            return "context_window", ev_a, ev_b, detail
    return "assistant_action", ev_a, ev_b, detail


def _pair_similarity(comparer: Comparer, a: Event | None, b: Event | None, rows: list[Row]
                     ) -> tuple[float | None, str | None, str | None, str | None]:
    """(similarity, measure, method, reason) of the two events shown side by side."""
    if a is None or b is None:
        return None, None, None, "only one run has an event here"
    if a.type != b.type:
        return None, None, "n/a", f"not comparable: a {a.type} event and a {b.type} event"
    for r in rows:
        if r.a is a and r.b is b and r.method is not None:
            return r.similarity, r.measure, r.method, r.reason
    sim, measure, same = comparer.compare([(a, b)])[0]
    method, reason, shown = describe(measure, sim, same, a, b, threshold=comparer.threshold,
                                     embedded=measure in ("embedding", "same_output") and sim is not None)
    return shown, measure, method, reason


def event_diff(a: Event | None, b: Event | None) -> list[str]:
    """A unified diff of the two events' texts (capped)."""
    if a is None or b is None:
        return []
    lines = list(difflib.unified_diff(a.text.split("\n"), b.text.split("\n"), "a", "b", lineterm="", n=1))
    return lines if len(lines) <= DIFF_LINES else lines[:DIFF_LINES] + [f"… {len(lines) - DIFF_LINES} more line(s)"]


MAX_CURVE_POINTS = 2000


def context_curve(al: Alignment, ctx_a: RunContext, ctx_b: RunContext) -> list[dict[str, Any]]:
    """Per aligned pair of model calls: Jaccard similarity of the two windows over aligned events
    (an aligned pair counts once, when both windows hold it). Longer curves are sampled evenly
    down to ``MAX_CURVE_POINTS``."""
    ev_a = [r.a for r in al.rows if r.a is not None]
    ev_b = [r.b for r in al.rows if r.b is not None]
    pos_a = {id(e): k for k, e in enumerate(ev_a)}
    pos_b = {id(e): k for k, e in enumerate(ev_b)}
    shared = [(pos_a[id(r.a)], pos_b[id(r.b)]) for r in al.rows
              if r.op in OPS_SAME and r.a is not None and r.b is not None]
    sa_idx = np.array([p for p, _ in shared], dtype=np.int64)
    sb_idx = np.array([q for _, q in shared], dtype=np.int64)
    ma, mb = len(ctx_a.steps), len(ctx_b.steps)
    points: list[tuple[int, int]] = []
    last_a = last_b = None
    for r in al.rows:
        sa = r.a.step if r.a is not None and r.a.type in ("action", "answer") else None
        sb = r.b.step if r.b is not None and r.b.type in ("action", "answer") else None
        if sa is None and sb is None:
            continue
        last_a = sa if sa is not None else last_a
        last_b = sb if sb is not None else last_b
        if last_a is None or last_b is None or not (1 <= last_a <= ma and 1 <= last_b <= mb):
            continue
        if not points or points[-1] != (last_a, last_b):
            points.append((last_a, last_b))
    if len(points) > MAX_CURVE_POINTS:
        keep = np.linspace(0, len(points) - 1, MAX_CURVE_POINTS).round().astype(int)
        points = [points[k] for k in keep]
    if not points:
        return []
    steps_a = np.unique([p for p, _ in points])
    steps_b = np.unique([q for _, q in points])
    win_a = ctx_a.holds([e.seq for e in ev_a], steps_a)
    win_b = ctx_b.holds([e.seq for e in ev_b], steps_b)
    col_a = np.searchsorted(steps_a, [p for p, _ in points])
    col_b = np.searchsorted(steps_b, [q for _, q in points])
    count_a = win_a.sum(axis=0)[col_a]
    count_b = win_b.sum(axis=0)[col_b]
    both = (win_a[sa_idx][:, col_a] & win_b[sb_idx][:, col_b]).sum(axis=0) if len(shared) else np.zeros(len(points))
    out = []
    for k, (sa, sb) in enumerate(points):
        union = int(count_a[k]) + int(count_b[k]) - int(both[k])
        out.append({"a_step": sa, "b_step": sb, "similarity": round(int(both[k]) / union, 4) if union else 1.0,
                    "a_utilization": ctx_a.steps[sa - 1]["utilization"],
                    "b_utilization": ctx_b.steps[sb - 1]["utilization"]})
    return out


# ============================================================================================
# edits and patches: the decisive divergence


@dataclass(frozen=True)
class FileEdit:
    """One change to one file, as far as the log shows it."""

    path: str
    op: str  # create | replace | insert | delete | revert | undo | changed (how is not in the log)
    via: str  # editor | sed | heredoc | script | shell
    old: str | None = None
    new: str | None = None
    line: int | None = None
    in_repo: bool = True

    def blocks(self) -> list[Block] | None:
        """The change blocks of this edit; None when the log does not show the change."""
        if self.op == "create" and self.new is not None:
            return [b for b in [Block(self.path, (), tuple(self.new.rstrip("\n").split("\n")))] if not b.empty]
        if self.op == "replace" and self.old is not None and self.new is not None:
            return blocks_between(self.path, self.old, self.new)
        if self.op == "insert" and self.new is not None:
            return [b for b in [Block(self.path, (), tuple(self.new.split("\n")))] if not b.empty]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.path, "op": self.op, "via": self.via, "old": None if self.old is None else _cap(self.old, 2000),
                "new": None if self.new is None else _cap(self.new, 2000), "line": self.line}


@dataclass
class EditAction:
    """An action that changed files, and its edits."""

    event: Event
    edits: list[FileEdit]

    @property
    def files(self) -> list[str]:
        return sorted({e.path for e in self.edits})

    def blocks(self) -> list[Block] | None:
        out: list[Block] = []
        for e in self.edits:
            if e.op in ("delete", "revert", "undo"):
                continue  # compared by ``sig``
            b = e.blocks()
            if b is None:
                return None
            out.extend(b)
        return out

    def sig(self) -> tuple[Any, ...] | None:
        """What another run's edit must equal to be the same edit (None: the change is unknown)."""
        blocks = self.blocks()
        if blocks is None:
            return None
        marks = tuple(sorted((e.op, e.path) for e in self.edits if e.op in ("delete", "revert", "undo")))
        return tuple(sorted(b.sig for b in blocks)) + marks

    def only(self, files: set[str]) -> EditAction | None:
        kept = [e for e in self.edits if e.path in files]
        return EditAction(self.event, kept) if kept else None


_REPO_PATH = re.compile(r"^(?:/testbed|/repo|/workspace/[\w.-]+__[\w.-]+|/[\w.-]+__[\w.-]+)(?:/|$)")
_HEREDOC_OPEN = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
# a script that writes files: pathlib, open(..., "w"), shutil/os moves
_WRITES = re.compile(r"\.write_(?:text|bytes)\(|\.writelines?\(|open\([^)\n]*,\s*(?:mode\s*=\s*)?['\"](?:w|a|r\+|w\+)b?['\"]"
                     r"|shutil\.(?:copy\w*|move)\(|os\.(?:replace|rename)\(|\bfileinput\b")
_QUOTED_PATH = re.compile(r"""(['"])((?:[\w.@+~-]+/)*[\w@+~-][\w.@+~-]*\.[A-Za-z]\w{0,5})\1""")
_PYTHONS = ("python", "python3", "python2")
# what a command that changes a file has in it (redirections, heredocs, sed -i, rm, git checkout, ...)
_MAY_WRITE = re.compile(r">|<<|\bsed\b[^|;&]*\s-i|\b(?:rm|mv|cp|perl|tee|patch)\b|\bgit\s+(?:checkout|restore)\b"
                        r"|\bpython[\d.]*\s+(?:-c\b|-(?:\s|$))")


def _abs_join(cwd: str, p: str) -> str:
    p = _unquote(p)
    return p if p.startswith("/") or not cwd else posixpath.join(cwd, p)


def _in_repo(raw: str) -> bool:
    """A path inside the task's repository (relative paths are taken to be)."""
    return not raw.startswith("/") or bool(_REPO_PATH.match(raw))


def _sed_literal_repl(s: str) -> str:
    # GNU sed: ``\n`` in the replacement is a newline; other escapes stand for the character
    return re.sub(r"\\([^\w]|n)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s)


def _sed_edits(args: list[str], fe: Callable[..., FileEdit]) -> list[FileEdit]:
    exprs: list[str] = []
    plain: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-e", "--expression"):
            exprs.append(next(it, ""))
        elif not a.startswith("-"):
            plain.append(a)
    if not exprs and plain:
        exprs, plain = [plain[0]], plain[1:]
    out = []
    for f in plain:
        if len(exprs) == 1 and (m := _SED_SUB.match(exprs[0])) and not (set(m.group(4)) - set("g")):
            pat = m.group(2)
            pat = pat[1:] if pat.startswith("^") else pat  # anchors: the text is the rest
            pat = pat[:-1] if pat.endswith("$") and not pat.endswith("\\$") else pat
            out.append(fe(f, "replace", "sed", old=_sed_unescape(pat), new=_sed_literal_repl(m.group(3))))
        else:
            out.append(fe(f, "changed", "sed"))  # line commands (``12,14c\``, ``28,34d``): the text is not shown
    return out


def shell_edits(cmd: str, created: dict[str, str] | None = None, cwd: str = "") -> list[FileEdit]:
    """The file changes a shell command makes, as far as the command shows them (see the
    module docstring: sed substitutions, heredoc writes, rm, git checkout, scripts that write
    files they name). ``created`` (path -> content of files the run wrote) lets a later
    ``python script.py`` be followed into the script."""
    created = created if created is not None else {}
    out: list[FileEdit] = []
    raw = cmd.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(raw):
        line = raw[i]
        i += 1
        while line.endswith("\\") and i < len(raw):
            line = line[:-1] + " " + raw[i]
            i += 1
        body = None
        if (m := _HEREDOC_OPEN.search(line)) is not None:
            buf = []
            while i < len(raw) and raw[i].strip() != m.group(2):
                buf.append(raw[i])
                i += 1
            i += 1
            body = "\n".join(buf) + ("\n" if buf else "")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tokens = _split(line)
        if not tokens:
            continue
        for seg in _segments(tokens):
            if not seg or seg[0] in ("|", "&&", ";", "||", "&"):
                continue
            cwd = _segment_edits(seg, body, cwd, created, out)
    return out


def _segment_edits(seg: list[str], body: str | None, cwd: str, created: dict[str, str], out: list[FileEdit]) -> str:
    def fe(p: str, op: str, via: str, **kw: Any) -> FileEdit:
        full = _abs_join(cwd, p)
        return FileEdit(normalize_path(full), op, via, in_repo=_in_repo(full), **kw)

    prog, args = seg[0], seg[1:]
    if prog == "cd" and args:
        return _abs_join(cwd, args[0])
    target = None
    for k, t in enumerate(seg[:-1]):
        if t in (">", ">>") and seg[k + 1] not in ("/dev/null",) and not seg[k + 1].startswith("&"):
            target = seg[k + 1]
    files = [a for a in args if not a.startswith("-") and a not in (">", ">>", "<", "<<", "<<-") and a != target]
    if prog in ("cat", "tee") and body is not None:
        dest = target or (files[-1] if prog == "tee" and files else None)
        if dest:
            e = fe(dest, "create", "heredoc", new=body)
            created[e.path] = body
            out.append(e)
        return cwd
    if prog == "sed" and any(a.startswith("-i") or a == "--in-place" for a in args):
        out.extend(_sed_edits([a for a in args if a not in (">", ">>") and a != target], fe))
        return cwd
    if prog == "rm":
        for f in files:
            e = fe(f, "delete", "shell")
            created.pop(e.path, None)
            out.append(e)
        return cwd
    if prog == "git" and args[:1] in (["checkout"], ["restore"]):
        for f in args[1:]:
            if f != "--" and not f.startswith("-") and _PATHISH.match(f):
                out.append(fe(f, "revert", "shell"))
        return cwd
    if prog in _PYTHONS or prog.startswith("python3."):
        script = None
        if "-" in args and body is not None:
            script = body
        elif "-c" in args and args.index("-c") + 1 < len(args):
            script = args[args.index("-c") + 1]
        elif files and files[0].endswith(".py"):
            script = created.get(normalize_path(_abs_join(cwd, files[0])))
        if script and _WRITES.search(script):
            paths = list(dict.fromkeys(m.group(2) for m in _QUOTED_PATH.finditer(script)))
            change = script_replace(script) if len(paths) == 1 else None
            for path in paths:
                if change is not None:
                    out.append(fe(path, "replace", "script", old=change[0], new=change[1]))
                else:
                    out.append(fe(path, "changed", "script"))
        return cwd
    if prog in ("mv", "cp") and len(files) >= 2:
        if prog == "mv":
            out.append(fe(files[0], "delete", "shell"))
        out.append(fe(files[-1], "changed", "shell"))
        return cwd
    if prog == "perl" and any(a.startswith("-i") or a.startswith("-pi") for a in args):
        out.extend(fe(f, "changed", "shell") for f in files[1:])
        return cwd
    if target is not None:
        out.append(fe(target, "changed", "shell"))  # echo/printf/... > f: the content is the command's output
    return cwd


_SCRIPT_OTHER_CHANGES = frozenset({"sub", "subn", "insert", "append", "extend", "pop", "remove", "writelines",
                                   "splitlines", "split", "join", "format", "strip", "rstrip", "lstrip", "upper",
                                   "lower", "replace_all"})


def script_replace(script: str) -> tuple[str, str] | None:
    """(old, new) when a Python script's only change to the text it writes is one
    ``str.replace`` of literal text (``s.replace(old, new)``, the strings given inline or bound
    once to names); None when it does anything else to it (regex substitutions, line lists,
    several replacements: which ran is not in the log)."""
    import ast

    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError):
        return None
    consts: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign):
            return None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            name = node.targets[0].id
            consts[name] = node.value.value if name not in consts else None  # bound twice: ambiguous
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    if any(c.func.attr in _SCRIPT_OTHER_CHANGES for c in calls):  # type: ignore[attr-defined]
        return None
    replaces = [c for c in calls if c.func.attr == "replace"]  # type: ignore[attr-defined]
    if len(replaces) != 1 or len(replaces[0].args) < 2:
        return None

    def text(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return consts.get(node.id)
        return None

    old, new = text(replaces[0].args[0]), text(replaces[0].args[1])
    return (old, new) if old is not None and new is not None and old else None


def _editor_edits(e: Event) -> list[FileEdit]:
    args = _args(e.arguments or "")
    command = args.get("command")
    raw = args.get("path") or args.get("file_path") or args.get("filename")
    if not isinstance(raw, str):
        return []
    p, inside = normalize_path(raw), _in_repo(raw)
    name = (e.tool or "").lower()

    def s(k: str) -> str | None:
        return args[k] if isinstance(args.get(k), str) else None

    if command == "create" or name in ("write", "create_file", "write_file"):
        return [FileEdit(p, "create", "editor", new=s("file_text") or s("content") or "", in_repo=inside)]
    if command == "str_replace":
        return [FileEdit(p, "replace", "editor", old=s("old_str"), new=s("new_str"), in_repo=inside)]
    if command == "insert":
        line = args.get("insert_line")
        return [FileEdit(p, "insert", "editor", new=s("new_str"), line=line if isinstance(line, int) else None,
                         in_repo=inside)]
    if command == "undo_edit":
        return [FileEdit(p, "undo", "editor", in_repo=inside)]
    if name == "edit" and s("old_string") is not None and not args.get("replace_all"):
        return [FileEdit(p, "replace", "editor", old=s("old_string"), new=s("new_string"), in_repo=inside)]
    if name == "multiedit" and isinstance(args.get("edits"), list):
        return [FileEdit(p, "replace", "editor", old=x.get("old_string"), new=x.get("new_string"), in_repo=inside)
                for x in args["edits"] if isinstance(x, dict) and isinstance(x.get("old_string"), str)]
    if command is None and name not in ("read", "view", "open", "read_file"):
        return [FileEdit(p, "changed", "editor", in_repo=inside)]
    return []


def run_edits(rev: RunEvents) -> list[EditAction]:
    """The run's actions that changed files, in order. An editor call whose result reports a
    failure ("No replacement was performed") changed nothing and is left out; a shell command
    that returned non-zero is kept (the edit may come before the failing part)."""
    out: list[EditAction] = []
    created: dict[str, str] = {}
    for e in rev.aligned():
        if e.type != "action" or e.key == "action:submit":
            continue
        kind = tool_kind(e.tool)
        if kind == "shell":
            # most commands cannot write a file: skip them without tokenizing (a long run has thousands)
            if not _MAY_WRITE.search(e.text) and not (created and ".py" in e.text):
                continue
            edits = shell_edits(e.text, created)
        elif is_read_only(e.key):
            continue
        elif e.arguments is not None and (kind == "editor" or e.key.split(" ", 1)[0] in
                                          ("action:create", "action:edit", "action:undo")):
            if e.result is not None and _failed(e.result):
                continue
            edits = _editor_edits(e)
            for x in edits:
                if x.op == "create" and x.new is not None:
                    created[x.path] = x.new
        else:
            continue
        if edits:
            out.append(EditAction(e, edits))
    return out


def final_patch(rev: RunEvents, row: dict[str, Any] | None, edits: list[EditAction]) -> Patch:
    """The run's change to the repository: the submission it recorded (a submission message,
    else the session metadata's ``submission``), parsed; else rebuilt from its edits."""
    meta = (row or {}).get("metadata") or {}
    text, source, note, truncated = None, "", "", False
    if rev.submission is not None:
        text, source, note = rev.submission, "submission", f"read from the final submission message (seq {rev.submission_seq})"
    elif isinstance(meta.get("submission"), str):
        text, source = meta["submission"], "metadata"
        total = meta.get("submission_chars")
        truncated = isinstance(total, int) and total > len(text)
        note = "read from the session metadata's submission (mini-swe-agent info.submission)"
        if truncated:
            note += f", cut at {len(text):,} of {total:,} characters: hunks after the cut are missing"
    if text is not None:
        files = parse_patch(text)
        if files is not None:
            return Patch(source, files, note, truncated=truncated)
        note = f"{note} holds no diff; "
    else:
        note = ""
    rebuild = Rebuild()
    for act in edits:
        for x in act.edits:
            if not x.in_repo:
                continue
            if x.op == "create":
                rebuild.create(x.path, x.new or "")
            elif x.op == "replace" and x.old is not None and x.new is not None:
                rebuild.replace(x.path, x.old, x.new)
            elif x.op == "insert" and x.new is not None:
                rebuild.insert(x.path, x.line, x.new)
            elif x.op == "delete":
                rebuild.delete(x.path)
            elif x.op == "revert":
                rebuild.revert(x.path)
            elif x.op == "undo":
                rebuild.undo(x.path)
            else:
                rebuild.changed(x.path)
    n = rebuild.edits
    return rebuild.patch(note + (f"reconstructed from {n} edit(s) of repository files in the log (no recorded "
                                 "patch)" if n else "no recorded patch and no edit of a repository file in the log"))


def _source_files(pa: Patch, pb: Patch) -> set[str]:
    """The repository's own files either run changed (its patch, recorded or rebuilt); files
    the runs only added (reproduction scripts, new tests) count when no existing file changed."""
    changed = {p for pt in (pa, pb) for p, f in pt.files.items() if f.status != "added"}
    return changed or {p for pt in (pa, pb) for p in pt.files}


def _edit_side(act: EditAction | None, own: list[EditAction], other: list[EditAction], own_patch: Patch,
               other_patch: Patch) -> dict[str, Any] | None:
    if act is None:
        return None
    blocks = act.blocks()
    hunk, hunk_source, note = None, None, None
    if blocks is not None:
        hunk, hunk_source = hunk_lines(blocks), "command"
    else:
        # the command does not show the change: when it is the run's only edit of its files and the
        # run recorded its patch, the patch's hunks for those files are this edit's change
        only = all(sum(f in x.files for x in own) == 1 for f in act.files)
        if only and not own_patch.reconstructed and all(f in own_patch.files for f in act.files):
            blocks = [b for f in act.files for b in own_patch.files[f].blocks]
            hunk = hunk_lines(blocks)
            hunk_source = "final patch"
            note = "the command does not show the change; it is the run's only edit of this file, so the final " \
                   "patch's hunks are its change"
        else:
            note = "the command does not show the change"
    other_blocks: set[Any] = set()
    other_unknown = False
    for x in other:
        xb = x.blocks()
        if xb is None:
            other_unknown = other_unknown or bool(set(x.files) & set(act.files))
        else:
            other_blocks.update(b.sig for b in xb)
    same_edit = in_patch = None
    if blocks is not None:
        sigs = {b.sig for b in blocks}
        sig = act.sig() if hunk_source == "command" else None
        if (sig is not None and any(x.sig() == sig for x in other)) or (sigs and sigs <= other_blocks):
            same_edit = True
        elif not other_unknown:
            same_edit = False
        patch_sigs = {b.sig for b in other_patch.blocks()}
        if sigs and sigs <= patch_sigs:
            in_patch = True
        elif not any(other_patch.files[f].unknown for f in act.files if f in other_patch.files):
            in_patch = False
    ev = act.event
    return {"step": ev.step, "seq": ev.seq, "display": ev.display, "files": act.files,
            "edits": [x.to_dict() for x in act.edits], "change_known": hunk_source == "command", "hunk": hunk,
            "hunk_source": hunk_source, "note": note, "same_edit_in_other": same_edit, "in_other_patch": in_patch,
            "command": _cap(ev.text, 3000)}


def _lines(blocks: list[Block], which: int) -> set[str]:
    return {x for b in blocks for x in b.sig[which]}


def _final_hunk(own: list[EditAction], own_patch: Patch, other_patch: Patch) -> dict[str, Any] | None:
    """The first hunk of this run's final patch that the other's lacks, and the edit that wrote
    it: the last edit whose change holds its added lines (or, for a removal, its removed ones).
    The first differing edit may be undone or rewritten later; this is where the final fixes
    differ."""
    theirs = Counter(b.sig for b in other_patch.blocks())
    for blk in own_patch.blocks():
        if theirs[blk.sig] > 0:
            theirs[blk.sig] -= 1
            continue
        _, rem, add = blk.sig
        writer: EditAction | None = None
        hidden: list[EditAction] = []  # edits of the file that do not show their change
        for act in own:
            mine = [e for e in act.edits if e.path == blk.path]
            if not mine:
                continue
            if any(e.op == "revert" for e in mine):  # the file is back to the repository's version
                writer, hidden = None, []
                continue
            known = [b for e in mine for b in (e.blocks() or [])]
            if set(add or rem) <= _lines(known, 2 if add else 1):
                writer, hidden = act, []
            elif any(e.blocks() is None and e.op not in ("delete", "undo") for e in mine):
                hidden.append(act)
        note = None
        if writer is None and len(hidden) == 1:
            writer, note = hidden[0], "the run's only edit of this file that could have written it"
        elif writer is None:
            note = ("written by one of the edits at steps " + ", ".join(str(x.event.step) for x in hidden)
                    + ": their commands do not show the change") if hidden else "no edit in the log writes it"
        out: dict[str, Any] = {"file": blk.path, "hunk": hunk_lines([blk]), "step": None, "seq": None,
                               "display": None, "traced": writer is not None, "note": note,
                               "candidates": [x.event.step for x in hidden] if writer is None else []}
        if writer is not None:
            out.update(step=writer.event.step, seq=writer.event.seq, display=writer.event.display)
        return out
    return None


def decisive_edit(ea: list[EditAction], eb: list[EditAction], pa: Patch, pb: Patch) -> dict[str, Any]:
    """The first edit of the repository's own files that differs between the runs: each run's
    k-th such edit action is compared with the other's k-th (the same edit: the same change
    blocks in the same files); the first pair that differs, or where one run made no more."""
    src = _source_files(pa, pb)
    sa = [x for x in (y.only(src) for y in ea if any(e.in_repo for e in y.edits)) if x is not None]
    sb = [x for x in (y.only(src) for y in eb if any(e.in_repo for e in y.edits)) if x is not None]
    k = 0
    while k < len(sa) and k < len(sb) and sa[k].sig() is not None and sa[k].sig() == sb[k].sig():
        k += 1
    out: dict[str, Any] = {"source_files": sorted(src), "a_edits": len(sa), "b_edits": len(sb), "same_before": k,
                           "final": {"a": _final_hunk(sa, pa, pb), "b": _final_hunk(sb, pb, pa)}}
    if k == len(sa) and k == len(sb):
        out.update(differs=False, index=None, a=None, b=None, a_step=None, b_step=None,
                   reason=f"the runs made the same {k} edit(s) to the source files" if k else
                   "neither run edited a source file")
        return out
    act_a = sa[k] if k < len(sa) else None
    act_b = sb[k] if k < len(sb) else None
    side_a = _edit_side(act_a, sa, sb, pa, pb)
    side_b = _edit_side(act_b, sb, sa, pb, pa)
    if act_a is None or act_b is None:
        who, other = ("A", "B") if act_a is None else ("B", "A")
        reason = f"run {who} made no further edit to the source files; run {other} did"
    elif act_a.files != act_b.files:
        reason = "different files"
    elif act_a.sig() is None or act_b.sig() is None:
        hidden = [s for s, x in (("A", act_a), ("B", act_b)) if x.sig() is None]
        reason = ("the same file(s); " + (f"{hidden[0]}'s command does not show its change" if len(hidden) == 1
                                          else "neither command shows its change"))
    else:
        reason = "the same file(s), a different change"
    out.update(differs=True, index=k + 1, a=side_a, b=side_b, a_step=act_a.event.step if act_a else None,
               b_step=act_b.event.step if act_b else None, reason=reason)
    return out


# ============================================================================================
# the store-facing entry points


def run_context(store: Store, session_id: str, model: str | None, config: Config | None,
                policy: str | None = None) -> RunContext:
    """Replay one run: the recorded policy under its own model, or ``model``'s policy (what-if)."""
    from ..replay import Timeline, prepare, step_dicts

    if model is None and policy is None:
        policy = "recorded"
    alert = config.analysis_thresholds.min_context_utilization_alert if config else 0.9
    prep = prepare(store, session_id, model, config=config, policy=policy)
    results, _ = prep.run()
    timeline = Timeline.from_results(prep.inp, results)
    steps = step_dicts(results, prep.inp, prep.spec, alert, prep.counted.kind)
    return RunContext(steps=steps, timeline=timeline, model=prep.spec.name, policy=prep.policy, prepared=prep)


def _context_state(ctx: RunContext, step: int | None, events: list[Event], facts: dict[str, Any] | None
                   ) -> dict[str, Any]:
    if step is None or not 1 <= step <= len(ctx.steps):
        return {"step": step, "window_tokens": None, "utilization": None, "limit": None, "counts": None,
                "lost_events": [], **(_facts_at(facts, step) if facts else {"facts_gone": None})}
    st = ctx.steps[step - 1]
    seen = [e for e in events if e.seq < st["message_seq"]]
    lost = [{"seq": e.seq, "type": e.type, "event": e.display} for e in seen if ctx.lost_at(e.seq, step)]
    out = {"step": step, "message_seq": st["message_seq"], "window_tokens": st["window_tokens"],
           "window_tokens_kind": st["window_tokens_kind"], "utilization": st["utilization"], "limit": st["limit"],
           "counts": st["counts"], "lost_events": lost}
    out.update(_facts_at(facts, step) if facts else {"facts_gone": None})
    return out


def _facts_at(facts: dict[str, Any], step: int | None) -> dict[str, Any]:
    report = facts.get("report")
    if report is None:
        return {"facts_gone": None, "facts_note": facts.get("note")}
    if step is None or not 1 <= step <= len(report.step_seqs):
        return {"facts_gone": [], "facts": {}}
    states = {f.fact: f.state_at(step) for f in report.facts}
    return {"facts_gone": [f for f, s in states.items() if s == "gone"], "facts": states}


def _track_facts(ctx: RunContext, config: Config | None, comparer: Comparer, store: Store) -> dict[str, Any]:
    facts = list(getattr(config, "facts", ()) or ()) if config is not None else []
    if not facts:
        return {"report": None, "note": "no facts configured (`facts:` in the config)"}
    try:
        from ..facts import track_facts
    except ImportError:  # pragma: no cover - facts.py ships with ctxf; kept for partial installs
        return {"report": None, "note": "fact tracking is not available"}
    th = config.analysis_thresholds.fact_presence_cosine if config else 0.6
    emb = config.embedding if config else None
    report = track_facts(ctx.prepared, facts, comparer.embedder(), store, timeline=ctx.timeline, threshold=th,
                         cache_enabled=emb.cache_enabled if emb else True, ttl_hours=emb.cache_ttl_hours if emb else 0)
    return {"report": report}


def _run_dict(row: dict[str, Any], rev: RunEvents, ctx: RunContext | None) -> dict[str, Any]:
    return {"id": row["id"], "format": row["format"], "task": row.get("task"), "outcome": row.get("outcome"),
            "model": row.get("model"), "source": row.get("source"), "harness": rev.harness,
            "protocol": rev.protocol, "steps": len(rev.step_seqs), "events": len(rev.events),
            "aligned_events": len(rev.aligned()),
            "replay": {"model": ctx.model, "policy": ctx.policy} if ctx else None}


def diverge_runs(a: RunEvents, b: RunEvents, comparer: Comparer, *, ctx_a: RunContext | None = None,
                 ctx_b: RunContext | None = None, a_row: dict[str, Any] | None = None,
                 b_row: dict[str, Any] | None = None, facts_a: dict[str, Any] | None = None,
                 facts_b: dict[str, Any] | None = None, tolerate_detours: bool = True,
                 full: bool = False) -> Divergence:
    """The divergence report of two runs' events (pure: no store access)."""
    al = align_runs(a, b, comparer, tolerate_detours=tolerate_detours, full=full)
    div = None
    if al.first is not None:
        cause, ev_a, ev_b, detail = classify(al, ctx_a, ctx_b)
        end = _block_end(al.rows, al.first)
        detail["rejoined"] = _position(al.rows[end]) if end < len(al.rows) else None
        change = next((r for r in al.rows[al.first:] if r.op not in OPS_SAME and r.op != "detour"
                       and any(e is not None and e.type == "action" and not is_read_only(e.key) for e in (r.a, r.b))),
                      None)
        if change is not None:  # where the two environments parted (the first differing write)
            detail["first_state_change"] = {**_position(change), "a": change.a.display if change.a else None,
                                            "b": change.b.display if change.b else None}
        sim, measure, method, reason = _pair_similarity(comparer, ev_a, ev_b, al.rows)
        if cause == "run_ended":
            ended = detail["ended"]
            if ended == "a":
                ev_a = None
            else:
                ev_b = None
        a_step, b_step = (ev_a.step if ev_a else None), (ev_b.step if ev_b else None)
        if cause in ("system_prompt", "user_input") and _in_preamble(al.rows[al.first], a, b):
            # given before the first model call: step 0 (the window shown is the first call's)
            detail["read_at_step"] = {"a": a_step, "b": b_step}
            a_step = b_step = 0
        div = {
            "cause": cause,
            "a_step": a_step,
            "b_step": b_step,
            "a_seq": ev_a.seq if ev_a else None,
            "b_seq": ev_b.seq if ev_b else None,
            "similarity": sim,
            "measure": measure,
            "method": method,
            "reason": reason,
            "threshold": comparer.threshold if method == "embedding" else None,
            "a_event": ev_a.to_dict() if ev_a else None,
            "b_event": ev_b.to_dict() if ev_b else None,
            "row": al.first,
            "diff": event_diff(ev_a, ev_b),
            "detail": detail,
            "explanation": _explain(cause, ev_a, ev_b, detail),
        }
        if cause in ("system_prompt", "user_input"):
            div["word_diff"] = word_diff(ev_a.text if ev_a and ev_a.type in GIVEN_TYPES else "",
                                         ev_b.text if ev_b and ev_b.type in GIVEN_TYPES else "")
        if ctx_a is not None and ctx_b is not None:
            sa = ev_a.step if ev_a else _last_step(a)
            sb = ev_b.step if ev_b else _last_step(b)
            div["context"] = {"a": _context_state(ctx_a, sa, a.aligned(), facts_a),
                              "b": _context_state(ctx_b, sb, b.aligned(), facts_b)}
    inputs, tools_div = _given_inputs(al, a, b, a_row, b_row)
    if tools_div is not None and not (div and div["cause"] == "system_prompt" and div["a_step"] == 0):
        # the tool schemas go with the system prompt, before the task: an earlier divergence
        if div is not None:
            tools_div["detail"]["event_divergence"] = {k: div[k] for k in ("cause", "a_step", "b_step", "a_seq",
                                                                            "b_seq")}
        if ctx_a is not None and ctx_b is not None:
            tools_div["context"] = {"a": _context_state(ctx_a, 1 if a.step_seqs else None, a.aligned(), facts_a),
                                    "b": _context_state(ctx_b, 1 if b.step_seqs else None, b.aligned(), facts_b)}
        div = tools_div
    edits_a, edits_b = run_edits(a), run_edits(b)
    patch_a, patch_b = final_patch(a, a_row, edits_a), final_patch(b, b_row, edits_b)
    curve = context_curve(al, ctx_a, ctx_b) if ctx_a is not None and ctx_b is not None else []
    skipped = {side: [{"seq": e.seq, "type": e.type, "reason": e.skip, "event": e.display}
                      for e in rev.events if e.skip] for side, rev in (("a", a), ("b", b))}
    return Divergence(
        version=DIVERGE_VERSION,
        a=_run_dict(a_row or {"id": a.session_id, "format": a.format}, a, ctx_a),
        b=_run_dict(b_row or {"id": b.session_id, "format": b.format}, b, ctx_b),
        divergence=div,
        aligned=[r.to_dict() for r in al.rows],
        curve=curve,
        preexisting=al.preexisting,
        detours=al.detours,
        skipped=skipped,
        settings={"divergence_cosine": comparer.threshold, "cross_harness": al.cross_harness,
                  "tolerate_detours": tolerate_detours, "compared": "all" if full else "to_divergence",
                  "embedded_chunks": comparer.embedded},
        decisive=decisive_edit(edits_a, edits_b, patch_a, patch_b),
        patches=compare_patches(patch_a, patch_b),
        inputs=inputs,
    )


def _in_preamble(row: Row, a: RunEvents, b: RunEvents) -> bool:
    """The row is among the inputs given before either run's first action or answer."""
    return (row.a is None or row.a.index < _preamble_end(a.events)) and \
        (row.b is None or row.b.index < _preamble_end(b.events))


def _tools_text(tools: Any) -> str:
    return given_text(json.dumps(tools, indent=1, sort_keys=True, ensure_ascii=False))


def _tool_names(tools: Any) -> list[str]:
    out = []
    for t in tools if isinstance(tools, list) else []:
        fn = t.get("function") if isinstance(t, dict) and isinstance(t.get("function"), dict) else t
        name = fn.get("name") if isinstance(fn, dict) else None
        out.append(name if isinstance(name, str) else "?")
    return out


def _given_inputs(al: Alignment, a: RunEvents, b: RunEvents, a_row: dict[str, Any] | None,
                  b_row: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """How the given inputs compare (all as text, whitespace normalized): the system prompt,
    the task (the first user input) and the tool definitions (the session's recorded ``tools``);
    and the ``tool_definitions`` divergence when one run of the same harness was given other
    tools (between harnesses they differ by construction: ``preexisting``)."""
    out: dict[str, Any] = {}
    for cause, etype in (("system_prompt", "system"), ("user_input", "user")):
        ea = next((e for e in a.aligned() if e.type == etype and e.index < _preamble_end(a.events)), None)
        eb = next((e for e in b.aligned() if e.type == etype and e.index < _preamble_end(b.events)), None)
        out[cause] = {"method": "text", "equal": None if ea is None or eb is None else ea.key == eb.key,
                      "a_seq": ea.seq if ea else None, "b_seq": eb.seq if eb else None,
                      "note": None if ea is not None and eb is not None else "missing in " +
                      " and ".join(s for s, e in (("A", ea), ("B", eb)) if e is None)}
    ma, mb = (a_row or {}).get("metadata") or {}, (b_row or {}).get("metadata") or {}
    ta, tb = ma.get("tools"), mb.get("tools")
    inferred = [s for s, m in (("A", ma), ("B", mb)) if m.get("tools_inferred")]
    entry: dict[str, Any] = {"method": "text", "equal": None, "a_tools": _tool_names(ta) if ta else None,
                             "b_tools": _tool_names(tb) if tb else None, "inferred": inferred}
    out["tool_definitions"] = entry
    if not ta or not tb:
        entry["note"] = ("not recorded in " + " and ".join(s for s, t in (("A", ta), ("B", tb)) if not t)
                         + ": not compared")
        return out, None
    xa, xb = _tools_text(ta), _tools_text(tb)
    entry["equal"] = xa == xb
    if inferred:
        entry["note"] = f"{' and '.join(inferred)}: the harness's fixed schema (the log does not record it)"
    if xa == xb:
        return out, None
    if al.cross_harness:
        al.preexisting.append({"cause": "tool_definitions", "a_seq": None, "b_seq": None,
                               "similarity": round(line_overlap(xa, xb), 4), "measure": "lines", "method": "text",
                               "note": f"differs between harnesses by construction ({a.harness} vs {b.harness}); "
                                       "not counted as the divergence"})
        return out, None

    def pseudo(tools: Any, text: str) -> dict[str, Any]:
        names = _tool_names(tools)
        return {"type": "tools", "seq": None, "step": 0, "key": _content_key(text),
                "display": f"{len(names)} tool(s): {', '.join(names)}", "text": _cap(text, TEXT_LIMIT), "tool": None,
                "returncode": None}

    la, lb = xa.split("\n"), xb.split("\n")
    diff = list(difflib.unified_diff(la, lb, "a", "b", lineterm="", n=1))
    div = {"cause": "tool_definitions", "a_step": 0, "b_step": 0, "a_seq": None, "b_seq": None, "similarity": None,
           "measure": "text", "method": "text",
           "reason": "given inputs compared as text, whitespace normalized: differ", "threshold": None,
           "a_event": pseudo(ta, xa), "b_event": pseudo(tb, xb), "row": None,
           "diff": diff if len(diff) <= DIFF_LINES else diff[:DIFF_LINES] + [f"… {len(diff) - DIFF_LINES} more line(s)"],
           "word_diff": word_diff(xa, xb), "detail": {"read_at_step": {"a": 1 if a.step_seqs else None,
                                                                       "b": 1 if b.step_seqs else None}},
           "explanation": "the two runs were given different tool definitions"}
    return out, div


def _last_step(rev: RunEvents) -> int | None:
    return len(rev.step_seqs) or None


def _explain(cause: str, a: Event | None, b: Event | None, detail: dict[str, Any]) -> str:
    if cause == "run_ended":
        who, other = ("A", "B") if detail.get("ended") == "a" else ("B", "A")
        nxt = b if who == "A" else a
        return f"run {who} stopped here; run {other} went on ({nxt.display if nxt else 'nothing'})"
    if cause == "system_prompt":
        return "the two runs were given different instructions"
    if cause == "user_input":
        return "the user said something different (or only in one run)"
    if cause == "tool_output":
        return "after the same actions, the environment answered differently"
    if cause == "context_window":
        n = len(detail.get("lost_in_one_window", []))
        return (f"same aligned history, but {n} event(s) had left one window and not the other; "
                "then the decisions differed")
    return "same history and window, a different decision"


def diverge(store: Store, a_id: str, b_id: str, *, model: str | None = None, config: Config | None = None,
            embedder: Embedder | Callable[[], Embedder] | None = None, policy: str | None = None,
            progress: ProgressFn | None = None, with_context: bool = True,
            tolerate_detours: bool = True, full: bool = False) -> Divergence:
    """Compare two stored runs: alignment, earliest divergence and its cause, context states.

    Pairs only the embedding model can decide are embedded up to the end of the diverging
    block; later ones are left ``not_compared`` unless ``full``.

    Without ``model`` each run is replayed under its recorded model with the ``recorded``
    policy (ground truth); with ``model`` both are replayed under that model (what-if).
    ``embedder`` may be a factory: the model is then created only if some pair needs it.
    """
    from ..config.settings import Config as _Config

    cfg = config or _Config()
    if embedder is None:
        def embedder() -> Embedder:  # type: ignore[misc]
            from ..embed.embedders import get_embedder

            return get_embedder(cfg.embedding.model)
    comparer = Comparer(embedder, store, threshold=cfg.analysis_thresholds.divergence_cosine,
                        cache_enabled=cfg.embedding.cache_enabled, ttl_hours=cfg.embedding.cache_ttl_hours,
                        progress=progress)
    rows = {sid: store.session(sid) for sid in (a_id, b_id)}
    runs = {sid: extract_events(store.messages(sid), rows[sid]["format"], sid) for sid in (a_id, b_id)}
    ctx: dict[str, RunContext | None] = {a_id: None, b_id: None}
    facts: dict[str, dict[str, Any] | None] = {a_id: None, b_id: None}
    if with_context:
        for sid in (a_id, b_id):
            ctx[sid] = run_context(store, sid, model, cfg, policy)
            facts[sid] = _track_facts(ctx[sid], cfg, comparer, store)  # type: ignore[arg-type]
    return diverge_runs(runs[a_id], runs[b_id], comparer, ctx_a=ctx[a_id], ctx_b=ctx[b_id], a_row=rows[a_id],
                        b_row=rows[b_id], facts_a=facts[a_id], facts_b=facts[b_id],
                        tolerate_detours=tolerate_detours, full=full)


def task_pairs(store: Store, task: str | None = None) -> list[tuple[str, str, str]]:
    """(task, success id, failure id) for every task with both outcomes.

    Each failure is paired with the task's first success (by start time, then id); with
    ``task`` only that task's pairs are returned.
    """
    by_task: dict[str, dict[str, list[str]]] = {}
    for r in store.sessions(task=task):
        if not r.get("task") or r.get("parent_id"):
            continue
        by_task.setdefault(r["task"], {}).setdefault(r["outcome"], []).append(r["id"])
    out = []
    for t in sorted(by_task):
        succ, fail = by_task[t].get("success", []), by_task[t].get("failure", [])
        if succ and fail:
            out.extend((t, succ[0], f) for f in fail)
    return out
