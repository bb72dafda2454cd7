"""Normalization across harnesses: the text, tool outputs and paths of two runs made comparable.

Free text loses run-specific noise before it is compared (``normalize_text``): ANSI escapes,
timestamps, durations, hex ids, addresses, temp dirs and absolute repo roots (``/testbed``,
``/workspace/<instance>``, SWE-agent's ``/<owner>__<repo>``: ``strip_roots``). A given input
(instructions, a user's words, tool schemas) only has its whitespace collapsed
(``given_text``): any other difference is a real one. A tool output also loses its harness
wrapper (``normalize_output``: ``<returncode>``/``<output>`` tags, the echoed command, shell
prompts, ``[Command finished with exit code N]``, SWE-agent's footer, ``cat -n`` line numbers);
its return code is kept apart. Paths are made relative to the repo root (``normalize_path``),
and event keys are short content hashes (``content_key``).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# a root begins a path: not inside a word, a path (``priv/repo/x``) or a Windows drive path (``C:/repo``), and
# it ends at a separator or the path's end (``/repo-tools`` is no root)
_PATH_START = r"(?<![\w.~/$@-])(?<![A-Za-z]:)"
_PATH_END = r"(?![\w.-])"
_HARNESS_ROOTS = (r"/workspace/[\w.-]+__[\w.-]+"  # OpenHands: /workspace/<owner>__<repo>__<version>
                  r"|/testbed|/workspace|/repo"
                  r"|/[\w.-]+__[\w.-]+")  # SWE-agent: /<owner>__<repo>
_REPO_ROOT = re.compile(f"{_PATH_START}(?:{_HARNESS_ROOTS}){_PATH_END}")
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
# a path in a harness's repository (a bare ``/workspace`` is stripped as a root, but OpenHands keeps the
# repository in ``/workspace/<instance>``: a file beside it is not the repository's)
_REPO_PATH = re.compile(r"^(?:/testbed|/repo|/workspace/[\w.-]+__[\w.-]+|/[\w.-]+__[\w.-]+)(?:/|$)")
_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")  # ``C:\\x`` or ``c:/x``
_LINE_NUMBER = re.compile(r"^\s*\d+\t", re.MULTILINE)  # cat -n, nl -ba, the editor's view


@lru_cache(maxsize=64)
def _session_roots(roots: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for a run's own roots, longest first (a Windows root in either slash and any case)."""
    alts = []
    for r in sorted(roots, key=len, reverse=True):
        if _WINDOWS.match(r):
            alts.append("(?i:" + r"[\\/]".join(re.escape(x) for x in re.split(r"[\\/]+", r.rstrip("\\/"))) + ")")
        else:
            alts.append(re.escape(r.rstrip("/")))
    return re.compile(f"{_PATH_START}(?:{'|'.join(alts)}){_PATH_END}")


def _strip(pattern: re.Pattern[str], text: str) -> str:
    """Each match of ``pattern`` removed with the separator after it, a bare one as ``.``."""
    out = []
    pos = 0
    for m in pattern.finditer(text):
        out.append(text[pos:m.start()])
        if text[m.end():m.end() + 1] in ("/", "\\") and m.end() < len(text):
            pos = m.end() + 1
        else:
            out.append(".")
            pos = m.end()
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def strip_roots(text: str, roots: Sequence[str] = ()) -> str:
    """Absolute repo roots removed where a path begins: ``/testbed/a/b.py`` -> ``a/b.py``, a bare
    root -> ``.``; ``roots`` are the run's own (the working folder its log records), taken out
    before the harness roots (``/testbed``, ``/repo``, ``/workspace/<instance>``, ``/<owner>__<repo>``).
    A root inside a path is a folder name, kept: ``priv/repo/x.exs`` stays as it is."""
    if "/" not in text and "\\" not in text:
        return text
    if roots:
        text = _strip(_session_roots(tuple(roots)), text)
    if any(h in text for h in _ROOT_HINTS):
        text = _strip(_REPO_ROOT, text)
    return text


def mask_noise(text: str, roots: Sequence[str] = ()) -> str:
    """Run-specific noise replaced by placeholders: repo roots, times, durations, ids, temp dirs."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = strip_roots(text, roots)
    for guard, pat, repl in _NOISE:
        if guard in text:
            text = pat.sub(repl, text)
    return text


def _newlines(text: str) -> str:
    """``\\r\\n`` and ``\\r`` line ends as ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _collapse(text: str) -> str:
    """Whitespace collapsed within each line, blank lines dropped."""
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def normalize_text(text: str, roots: Sequence[str] = ()) -> str:
    """Free text for comparison: noise masked, whitespace collapsed, blank lines dropped."""
    return _collapse(mask_noise(_newlines(text), roots))


def given_text(text: str) -> str:
    """A given input (instructions, a user's words, tool schemas) for comparison: whitespace
    collapsed, blank lines dropped, nothing masked: any other difference is a real one."""
    return _collapse(_newlines(text))


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
    """A tool result as compared: its return code (from the wrapper when the log has no other),
    the normalized body, and whether the harness cut it (head ... tail)."""

    rc: int | None
    body: str
    truncated: bool


def normalize_output(text: str, command: str | None = None, returncode: int | None = None,
                     roots: Sequence[str] = ()) -> Output:
    """A tool result without its harness wrapper and run-specific noise."""
    t = text
    if "\x1b" in t:
        t = _ANSI.sub("", t)
    t = _newlines(t)
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
    return Output(rc, normalize_text(t, roots), truncated)


def short_hash(*parts: str) -> str:
    """A 10-hex-digit blake2b of the parts (event keys: short, stable, not stored)."""
    return hashlib.blake2b("\0".join(parts).encode("utf-8", "surrogatepass"), digest_size=5).hexdigest()


def content_key(text: str) -> str:
    """The short hash of a text with its whitespace collapsed."""
    return short_hash(" ".join(text.split()))


def unquote(s: str) -> str:
    """``s`` without one pair of matching outer quotes."""
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return s


def normalize_path(p: str, cwd: str = "", roots: Sequence[str] = ()) -> str:
    """A path relative to the repo root: roots stripped, ``cwd`` applied, ``./`` and ``..`` folded;
    a Windows path (``C:\\a\\b``, or any path of a run whose root is one) with forward slashes."""
    p = unquote(p.strip())
    if "\\" in p and (_WINDOWS.match(p) or any(_WINDOWS.match(r) for r in roots)):
        p = p.replace("\\", "/")
    p = strip_roots(p, roots)
    if cwd and cwd != "." and not p.startswith(("/", "~")) and not _WINDOWS.match(p):
        p = posixpath.join(cwd, p)
    if not p:
        return "."
    return posixpath.normpath(p)


def in_repo(raw: str, roots: Sequence[str] = ()) -> bool:
    """A path inside the task's repository: relative paths are taken to be; an absolute one is
    when it lies under one of the run's ``roots`` or a harness root; one under the home folder
    (``~``) or a variable (``$HOME``) is not."""
    raw = unquote(raw.strip())
    if raw.startswith(("~", "$")):
        return False
    if not raw.startswith("/") and not _WINDOWS.match(raw):
        return True
    if roots and _session_roots(tuple(roots)).match(raw):
        return True
    return bool(_REPO_PATH.match(raw))
