"""Goal drift: per step, how far the recent assistant output has moved from what the session was for.

**Reference (the goal).** ``--goal TEXT``, else ``drift.goal`` from the config, else the session's
opening: every system, developer and user message before the first model call (the system
prompt and the first user message, plus any user messages sent before the first reply). An
opening is judged only when it says what the session is for (``assess_goal``: harness
boilerplate shared with other tasks of the format in the store is set aside, and a chat opener
or a task statement under MIN_GOAL_WORDS content words is not a goal): otherwise the report's
state is ``no_goal``, with the reason, and no step gets a score or a verdict.

**What is measured.** Each step's assistant output is its text plus the string values of its
tool-call arguments (a ``{"query": "banana bread"}`` call is about banana bread; JSON keys,
tool names and reasoning records are left out). An output with fewer than ``MIN_WORDS`` words
(``ls -la``, ``{"element_id": 151}``, "No") cannot be judged by an embedding: it is marked
unjudged and the step keeps the window of the outputs before it.

**Similarity.** The goal and every judged output are chunked (``embed.chunk_text``: sentences,
short lines packed to ~16 wordpieces) and each unique chunk is embedded once (cached in the
store). The goal's *references* are its centroid (normalised mean of its chunk vectors) and the
centroid of each of its sections (runs of up to ``SECTION_CHUNKS`` = 8 chunks, ~128 wordpieces,
within one goal message). A reply's similarity is the best, over the references, of the *mean
cosine of its chunks* with the reference (the dot product of the reply's un-normalised mean
vector with it).

- Mean cosine, not the cosine of a re-normalised reply centroid, because only the mean is
  length-neutral: a re-normalised centroid of many varied chunks shrinks toward what all text
  shares and so moves toward every reference as a reply gets longer (measured: four off-topic
  replies at 0.05-0.15 each scored 0.28 joined into one). With the mean, a reply of N chunks
  scores the average of its parts, whatever N.
- Sections, because agent goals are mostly scaffold: a SWE-bench goal is a few lines of issue
  inside ~6,000 characters of instructions. Against the whole goal's centroid, gpt-5-mini
  reading exactly the right files (``nl -ba django/contrib/messages/storage/base.py``) scores
  window medians 0.24-0.32 (4-86% of steps >= MILD); against the issue's own section 0.31-0.40
  (93-100%). A chat goal of one or two short messages has one section per message.
- Chunks are sampled evenly down to ``MAX_CHUNKS_PER_MESSAGE`` (goal: ``MAX_GOAL_CHUNKS``)
  first: a mean over 32 evenly spread chunks is already stable, and a 3,000-line file an agent
  writes would otherwise cost minutes of MiniLM for no change in the score. Everything after the
  embedding is matrix arithmetic.

**Window.** The similarity ``s`` of step k is a weighted mean over the last ``window_size``
judged outputs up to k, with linear recency weights 1, 2, ..., n (the newest weighs most):
"where the conversation is now", smoothed so that one short or odd reply does not swing the
verdict. Each reply counts once whatever its length.

**Score.** A straight line through two calibrated anchors, clipped to 0..100::

    score = 35 + 40 * (s - off_topic_similarity) / (on_topic_similarity - off_topic_similarity)

A window at ``on_topic_similarity`` (0.28) scores 75, the lowest MILD; one at
``off_topic_similarity`` (0.14) scores 35, the lowest SEVERE; s = 0.21 scores 55, s >= 0.3325
scores 90+ (FRESH), s <= 0.0175 scores 0. Bands: FRESH >= 90, MILD 75-89, MODERATE 55-74,
SEVERE 35-54, CRITICAL < 35.

**Calibration** (all-MiniLM-L6-v2, window 5; ``bench/drift.py calibrate`` reprints every figure).
On-topic windows, each session against its own goal: SWE-bench trajectories (mini-swe-agent,
live-swe-agent, OpenHands, SWE-agent; 288 windows) p5 0.305, p10 0.329, median 0.391 -> 98.6%
score >= MILD; MT-Bench reference answers (59) p5 0.273, p10 0.338, median 0.544 -> 93.2%;
the on-topic fixtures (coding agent, wedding toast, focused cover letter) 0.32-0.70, every
step >= 86. Off-topic windows, a goal paired with another session's assistant output: MT-Bench
questions x SWE-bench agent steps (3,456) median 0.038, p95 0.108 -> 98.6% CRITICAL; MT-Bench
question x answers of another category (1,180) median 0.065, p90 0.147 -> 87.9% CRITICAL (of
the same category: median 0.127, 55.7%); the off-topic fixtures end at 0.08-0.12 (scores
17-28). 0.28 sits under ~95% of on-topic windows, 0.14 over ~90-99% of off-topic ones.
Known limit: when the goal is mostly an agent framework's boilerplate, another issue's
trajectory in the same scaffold still looks on-topic (SWE-bench issue x another issue's run:
median 0.324, 0% CRITICAL); the explanation's missing goal keywords (the issue's identifiers)
are the signal there.

**Explanation.** Lexical and cheap: goal keywords (content words and identifiers of the goal,
user-message words and identifiers first) missing from the window's text, and new dominant
topics (frequent content words of the window absent from the goal). Goal-drift phrases ("is
there anything else I can help you with") are flagged when the message saying them is itself
below MILD: an offer to move on that made no progress toward the goal.

**Replay.** With a ``Timeline`` (``replay.prepare(...).run()``) the report marks the step at
which a goal message left the window under the replayed policy (``goal_left_window``), or came
back (``goal_returned``): under the ``recorded`` policy what the log says happened, under a
model's policy a what-if. An explicit goal text has no messages, so no such events.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config.settings import DriftConfig
from ..embed import Embedder, EmbedStats, chunk_text, embed_texts, normalize

if TYPE_CHECKING:  # pragma: no cover
    from ..records import Message
    from ..replay import Prepared, Timeline
    from ..store.db import Store

DRIFT_VERSION = 1
ProgressFn = Callable[[int, int], None]

BANDS = (("FRESH", 90), ("MILD", 75), ("MODERATE", 55), ("SEVERE", 35), ("CRITICAL", 0))
VERDICTS = tuple(name for name, _ in BANDS)

MIN_WORDS = 3
MAX_CHUNKS_PER_MESSAGE = 32
MAX_GOAL_CHUNKS = 256
SECTION_CHUNKS = 8  # a goal section: up to 8 chunks (~128 wordpieces) of one goal message
GOAL_KEYWORDS = 12  # goal keywords tracked per session
SHOWN_WORDS = 4  # keywords / topics shown in an explanation line

_DEFAULTS = DriftConfig()


# ============================================================================== scoring


def score_from_similarity(s: float, on_topic: float = _DEFAULTS.on_topic_similarity,
                          off_topic: float = _DEFAULTS.off_topic_similarity) -> int:
    """The documented linear map: ``on_topic`` -> 75, ``off_topic`` -> 35, clipped to 0..100."""
    raw = 35.0 + 40.0 * (s - off_topic) / (on_topic - off_topic)
    return int(round(min(100.0, max(0.0, raw))))


def verdict(score: int | None) -> str | None:
    """The band of a 0-100 score: FRESH >= 90, MILD >= 75, MODERATE >= 55, SEVERE >= 35, CRITICAL."""
    if score is None:
        return None
    for name, floor in BANDS:
        if score >= floor:
            return name
    return "CRITICAL"


def at_or_worse(v: str | None, band: str) -> bool:
    """Whether verdict ``v`` is ``band`` or a worse one."""
    return v is not None and VERDICTS.index(v) >= VERDICTS.index(band)


# ============================================================================== text


def assistant_output(m: Message) -> str:
    """What an assistant message said: its text and the string values of its tool-call arguments."""
    parts = [m.text] if m.text and not m.text.isspace() else []
    for call in m.tool_calls:
        parts.extend(_argument_strings(call.arguments))
    return "\n".join(parts)


def _argument_strings(arguments: str) -> list[str]:
    if not arguments:
        return []
    try:
        value = json.loads(arguments)
    except (ValueError, TypeError):
        return [arguments]
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            if v.strip():
                out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return out


_WORD = re.compile(r"[^\W\d_]{2,}")
_TERM = re.compile(r"[A-Za-z][A-Za-z0-9_]*[A-Za-z0-9]|[A-Za-z]{3,}")

# English function words and the stock vocabulary of assistant replies: never a topic.
STOPWORDS = frozenset("""
a about above after again against all almost also although always am among an and another any anybody
anyone anything anyway are around as ask asked at away back be became because become been before being
below best better between both but by came can cannot could did do does doing done don down during each
either else enough etc even ever every everything few first for from further get gets getting give given
go goes going good got great had has have having he her here hers herself him himself his how however i
if in into is isn it its itself just keep kind know last least less let lets like likely ll look lot
made make makes many may maybe me might mine more most much must my myself need needs never new next no
nor not nothing now of off often oh ok okay on once one only or other others otherwise our ours
ourselves out over own per perhaps please put quite rather re really right said same say says see seem
seems should since so some something sometimes still such sure take than thank thanks that the their
theirs them themselves then there these they thing things think this those though through thus to
together too toward try two under until up upon us use used uses using usually ve very via want was
way we well were what whatever when where whether which while who whom whose why will with within
without would yes yet you your yours yourself yourselves
able actually already added adding add answer anyone appreciate assist assistance below certainly
check course currently definitely feel find fine following happy help helpful hope hi hello instead
let’s means mention note okay particular possible provide provided question questions quick sorry
start step steps suggest tell today understand wanted welcome work works write create give explain fix
show none true false null self return def import elif except raise print len str int
""".split())


def _stem(word: str) -> str:
    """A crude plural fold so 'letters' meets 'letter' (no stemmer dependency)."""
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def _is_identifier(term: str) -> bool:
    return "_" in term or any(c.isdigit() for c in term) or (
        any(c.isupper() for c in term[1:]) and any(c.islower() for c in term))


@dataclass
class _Terms:
    """Content terms of one text: stem -> count, and each stem's first surface form."""

    counts: Counter
    surface: dict[str, str]
    special: set[str]  # identifiers and capitalised names


def terms(text: str) -> _Terms:
    counts: Counter = Counter()
    surface: dict[str, str] = {}
    special: set[str] = set()
    for m in _TERM.finditer(text):
        t = m.group()
        low = t.lower()
        if low in STOPWORDS or sum(c.isalpha() for c in t) < 3:  # not "T10" of a timestamp
            continue
        stem = _stem(low)
        if stem in STOPWORDS:
            continue
        counts[stem] += 1
        surface.setdefault(stem, t if _is_identifier(t) else low)
        start = m.start()
        mid_sentence = start > 1 and text[start - 2] not in ".!?\n" and text[start - 1] == " "
        if _is_identifier(t) or (t[0].isupper() and mid_sentence):
            special.add(stem)
    return _Terms(counts, surface, special)


def goal_keywords(parts: Sequence[tuple[str, str]], limit: int = GOAL_KEYWORDS) -> list[tuple[str, str]]:
    """The goal's most telling terms as (stem, surface): words of user messages count double
    (a system prompt is mostly boilerplate), identifiers and names double again; ties go to
    the longer word (a crude stand-in for rarity)."""
    weight: Counter = Counter()
    surface: dict[str, str] = {}
    for role, text in parts:
        t = terms(text)
        factor = 2.0 if role == "user" else 1.0
        for stem, n in t.counts.items():
            weight[stem] += n * factor * (2.0 if stem in t.special else 1.0)
            surface.setdefault(stem, t.surface[stem])
    ranked = sorted(weight, key=lambda s: (-weight[s], -len(s), s))
    return [(s, surface[s]) for s in ranked[:limit]]


# ============================================================================== phrases

# Offers to move on. They matter only when the reply made no progress toward the goal.
DRIFT_PHRASES = re.compile(
    r"\b(?:is there anything else(?: (?:i|we) can (?:help|do|assist)[^.?!\n]*)?"
    r"|(?:let me know|tell me) if (?:there(?:'s| is) anything else|you (?:need|have|want) anything else"
    r"|you have any other questions)"
    r"|anything else (?:you(?:'d| would) like|i can (?:help|do)[^.?!\n]*)"
    r"|what else can i (?:help|do)[^.?!\n]*"
    r"|how else can i help[^.?!\n]*"
    r"|(?:i'm|i am) happy to help with anything else)",
    re.IGNORECASE,
)


def drift_phrases(text: str) -> list[str]:
    """Goal-drift phrases in a reply, as written."""
    return [m.group().strip() for m in DRIFT_PHRASES.finditer(text or "")]


# ============================================================================== goal


@dataclass(frozen=True)
class Goal:
    """The reference a session is measured against, and whether it can be judged at all."""

    text: str
    source: str  # "messages" | "option" | "config"
    seqs: tuple[int, ...] = ()  # the goal messages (source "messages")
    parts: tuple[tuple[str, str], ...] = ()  # (role, text) of each goal message
    state: str = "judged"  # "judged" | "no_goal" (see assess_goal)
    reason: str | None = None  # no_goal: "too_short" | "chat_opener" | "boilerplate"
    explanation: str = ""  # one sentence: what the goal is, or why it is not judged and the fix
    content_words: int | None = None  # of the task statement
    template: dict[str, Any] | None = None  # the harness template found in the opening, if any
    task_parts: tuple[tuple[str, str], ...] = ()  # the opening without that template (keywords come from it)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "seqs": list(self.seqs), "text": self.text, "state": self.state,
                "reason": self.reason, "explanation": self.explanation, "content_words": self.content_words,
                "template": self.template}


def goal_from_messages(messages: Sequence[Any]) -> Goal | None:
    """System, developer and user messages before the first model call; else the first user message.

    A demonstration the harness replays before the task (SWE-agent's ``is_demo`` messages) is an
    example of another task, not this session's goal, and is left out. ``messages`` are
    ``StoredMessage`` rows (``.seq``, ``.message``). The goal is not yet assessed
    (``assess_goal`` decides whether it can be judged).
    """
    from ..records import KIND_MESSAGE

    def text_of(m: Any) -> bool:
        return m.kind == KIND_MESSAGE and bool(m.text.strip()) and not (m.meta or {}).get("is_demo")

    picked = []
    for sm in messages:
        m = sm.message
        if m.role == "assistant" and m.kind == KIND_MESSAGE:
            break
        if m.role in ("system", "developer", "user") and text_of(m):
            picked.append(sm)
    if not any(sm.message.role == "user" for sm in picked):
        first_user = next((sm for sm in messages if sm.message.role == "user" and text_of(sm.message)), None)
        if first_user is not None:
            picked.append(first_user)
    if not picked:
        return None
    parts = tuple(("user" if sm.message.role == "user" else "system", sm.message.text) for sm in picked)
    return Goal(text="\n\n".join(t for _, t in parts), source="messages",
                seqs=tuple(sm.seq for sm in picked), parts=parts)


def explicit_goal(text: str, source: str) -> Goal:
    """A goal given with --goal (``option``) or drift.goal (``config``): always judged, whatever its length."""
    where = "--goal" if source == "option" else "drift.goal in the config"
    return Goal(text=text, source=source, parts=(("user", text),), content_words=len(content_words(text)),
                explanation=f"given with {where}")


# ---------------------------------------------------------------- is the opening a goal?
#
# A goal taken from the session's opening is judged only when it says what the session is for.
# Three documented rules decide (``assess_goal``), in this order:
#
# 1. Harness boilerplate. The openings of the other sessions of the same format in the store are
#    compared word 6-gram by word 6-gram (``TemplateIndex``): a whole message, or a run of at least
#    TEMPLATE_MIN_WORDS words, that also opens a session of another task (the task key when the log
#    has one, else another opening) is the harness's, not this session's. It is set aside and the
#    rest, the task statement, is the goal. Nothing left:
#    ``no_goal`` (``boilerplate``). Runs of one task (same task key) share their task statement by
#    right, so they never count as each other's template; without task keys, two runs of one task
#    with *different* harness wrappers would see each other's task as template (a known limit).
#    With no other task of the format in the store nothing can be compared, and the explanation
#    says so.
# 2. A chat opener ("What is up?", "hi", "hello", "can you help me"): every sentence of it is a
#    greeting or an offer to ask, not a task: ``no_goal`` (``chat_opener``).
# 3. Too short: fewer than MIN_GOAL_WORDS distinct content words (words of 3+ letters that are not
#    stop words; "Implement spotter-gqc" has 3): an embedding of a few words is too unstable a
#    reference (such a goal swung one Claude Code session between FRESH and CRITICAL): ``no_goal``
#    (``too_short``).
#
# ``--goal`` / ``drift.goal`` (and the audit's ``max_drift.goal``) always win: an explicit goal is
# judged as given. A ``no_goal`` session gets no score and no verdict at any step.

MIN_GOAL_WORDS = 5
SHINGLE_WORDS = 6  # word n-grams compared between openings
TEMPLATE_MIN_WORDS = 8  # a shared run this long is a harness's template, not two people asking alike
NO_GOAL_REASONS = ("too_short", "chat_opener", "boilerplate")
_FIX = "pass --goal or set drift.goal"
_TOKEN = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")

_OPENER = re.compile(
    r"(?:please )?(?:"
    r"hi|hello|hey|heya|hiya|howdy|yo|sup|greetings|good (?:morning|afternoon|evening|day)"
    r"|what'?s up|what is up|wassup|how are you(?: doing)?(?: today)?|how'?s it going|how are things"
    r"|are you there|you there|test(?:ing)?|ping|thanks|thank you|ok|okay"
    r"|(?:can|could|would|will) you (?:help|assist)(?: me)?(?: (?:with something|out|please))?"
    r"|help(?: me)?|i need (?:some |your )?help|i have a (?:quick )?question|quick question"
    r"|(?:there|again|friend|buddy|mate|claude|chatgpt|gpt|bot|assistant|everyone|all)"  # "good morning, assistant"
    r")(?: (?:there|again|friend|buddy|mate|claude|chatgpt|gpt|bot|assistant|everyone|all))?(?: please)?"
)


def content_words(text: str) -> list[str]:
    """The distinct content words of a text, as first written: words of 3+ letters (any script;
    a run of CJK characters counts one word per two characters) that are not stop words, plurals
    folded. "Implement spotter-gqc" -> implement, spotter, gqc."""
    seen: dict[str, str] = {}
    for m in _TOKEN.finditer(text):
        w = m.group()
        if _CJK.search(w):
            for i in range(0, len(w) - 1, 2):
                seen.setdefault(w[i:i + 2], w[i:i + 2])
            continue
        low = w.lower()
        if low in STOPWORDS or sum(c.isalpha() for c in w) < 3:
            continue
        stem = _stem(low)
        if stem not in STOPWORDS:
            seen.setdefault(stem, w)
    return list(seen.values())


def is_chat_opener(text: str) -> bool:
    """Whether every sentence of ``text`` is a greeting or an offer to ask ("What is up?", "Hi! Can you help me?")."""
    norm = text.lower().replace("\u2019", "'")
    pieces = [" ".join(p.split()) for p in re.split(r"[.!?,;:…]+", norm)]
    pieces = [p for p in pieces if p]
    return bool(pieces) and all(_OPENER.fullmatch(p) for p in pieces)


def _quote(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


@dataclass
class TemplateIndex:
    """What opens sessions of more than one task of one format in the store.

    ``shared`` maps the hash of a word 6-gram, or of a whole opening message, to the number of
    distinct tasks whose opening holds it (only those held by 2 or more are kept); ``tasks``
    counts the distinct tasks compared. Sessions with a task key are compared with each other
    (a task is a key), sessions without one with each other (a task is a distinct opening;
    identical openings are one task, run again): whether a keyed and an unkeyed session ran the
    same task cannot be told, and a task's own statement must never pass for a template.
    """

    fmt: str
    tasks: int
    shared: dict[int, int]

    def split(self, text: str) -> tuple[list[str], int, int, int]:
        """(the runs of ``text`` that are its own, words set aside as template, words, the most
        other tasks sharing a piece of it).

        Template is a whole message that also opens another task, or a run of at least
        TEMPLATE_MIN_WORDS words each inside a 6-gram that does: a shorter shared phrase ("what's
        the weather in Seattle") is two people asking alike, not a harness.
        """
        toks = [(m.start(), m.end(), m.group().lower()) for m in _TOKEN.finditer(text)]
        words = [w for _, _, w in toks]
        n = len(toks)
        whole = self.shared.get(_whole_hash(words), 0)
        if whole >= 2:
            return [], n, n, whole - 1
        covered = np.zeros(n, dtype=bool)
        sharing = np.zeros(n, dtype=np.int64)
        for i, h in _shingles(words):
            k = self.shared.get(h, 0)
            if k >= 2:
                covered[i:i + SHINGLE_WORDS] = True
                sharing[i:i + SHINGLE_WORDS] = np.maximum(sharing[i:i + SHINGLE_WORDS], k)
        template = np.zeros(n, dtype=bool)
        for a, b in _runs(covered):
            if b - a >= TEMPLATE_MIN_WORDS:
                template[a:b] = True
        runs = []
        for a, b in _runs(~template):
            start, end = toks[a][0], toks[b - 1][1]
            lo = toks[a - 1][1] if a else 0  # widen over the punctuation that hugs the run: "<tag>", "(x)"
            hi = toks[b][0] if b < n else len(text)
            while start > lo and not text[start - 1].isspace():
                start -= 1
            while end < hi and not text[end].isspace():
                end += 1
            run = text[start:end].strip()
            if content_words(run):  # a lone date or number between template lines is no task
                runs.append(run)
        others = int(sharing[template].max()) - 1 if template.any() else 0
        return runs, int(template.sum()), n, others


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True in a boolean array."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def _shingles(words: list[str]) -> list[tuple[int, int]]:
    """(start, hash) of each run of SHINGLE_WORDS words."""
    return [(i, hash(tuple(words[i:i + SHINGLE_WORDS]))) for i in range(len(words) - SHINGLE_WORDS + 1)]


def _whole_hash(words: list[str]) -> int:
    return hash(("\x00whole", *words))


_INDEX_CACHE: dict[tuple[str, str, bool], tuple[int, TemplateIndex]] = {}


def template_index(store: Store, fmt: str, keyed: bool = False) -> TemplateIndex:
    """The template index of one format's sessions with (``keyed``) or without a task key, over
    the whole store (cached per process while the format's sessions are unchanged: an audit
    worker builds it once)."""
    rows = store.db.execute("SELECT id, coalesce(task, ''), coalesce(ingested_at, '') FROM sessions "
                            "WHERE format = ? ORDER BY id", [fmt]).fetchall()
    fingerprint = hash(tuple(tuple(r) for r in rows))
    key = (str(store.path), fmt, keyed)
    cached = _INDEX_CACHE.get(key) if store.path is not None else None
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    # Each session's opening as goal_from_messages takes it: system/developer/user text before
    # the first model call, or the first user message when none came before it.
    texts = store.db.execute(
        """WITH f AS (
               SELECT s.id AS sid, coalesce(s.task, '') AS task,
                      (SELECT min(m.seq) FROM messages m WHERE m.session_id = s.id AND m.role = 'assistant'
                        AND m.kind = 'message') AS first_call,
                      (SELECT min(m.seq) FROM messages m WHERE m.session_id = s.id AND m.role = 'user'
                        AND m.kind = 'message' AND trim(m.text) != ''
                        AND coalesce(json_extract(m.meta, '$.is_demo'), 0) = 0) AS first_user
               FROM sessions s WHERE s.format = ?)
           SELECT f.sid, f.task, m.text FROM f JOIN messages m ON m.session_id = f.sid
           WHERE m.kind = 'message' AND m.role IN ('system', 'developer', 'user') AND trim(m.text) != ''
             AND coalesce(json_extract(m.meta, '$.is_demo'), 0) = 0
             AND (f.first_call IS NULL OR m.seq < f.first_call OR m.seq = f.first_user)
           ORDER BY f.sid, m.seq""", [fmt]).fetchall()
    docs: dict[str, tuple[str, list[str]]] = {}
    for sid, task, text in texts:
        if bool(task) == keyed:
            docs.setdefault(sid, (task, []))[1].append(text)
    group_of: dict[str, int] = {}
    hashes: list[int] = []
    owners: list[int] = []
    for task, parts in docs.values():
        words = [[w.lower() for w in _TOKEN.findall(t)] for t in parts]
        gkey = f"task:{task}" if task else "text:" + "\x1e".join(" ".join(w) for w in words)
        g = group_of.setdefault(gkey, len(group_of))
        hs = {h for w in words for _, h in _shingles(w)} | {_whole_hash(w) for w in words if w}
        hashes.extend(hs)
        owners.extend([g] * len(hs))
    shared: dict[int, int] = {}
    if hashes:
        pairs = np.unique(np.stack([np.asarray(hashes, dtype=np.int64), np.asarray(owners, dtype=np.int64)], 1), axis=0)
        h, counts = np.unique(pairs[:, 0], return_counts=True)
        keep = counts >= 2
        shared = dict(zip(h[keep].tolist(), counts[keep].tolist()))
    index = TemplateIndex(fmt, len(group_of), shared)
    if store.path is not None:
        _INDEX_CACHE[key] = (fingerprint, index)
    return index


def assess_goal(goal: Goal, index: TemplateIndex | None = None) -> Goal:
    """Whether a goal taken from the session's opening can be judged (the rules above).

    The decision rests on the task statement: the opening without the harness template ``index``
    finds in it. A judged goal is still *scored* against the whole opening, as the mapping was
    calibrated: an agent's replies are about the scaffold's commands as much as the issue. Scored
    against the task statement alone, the corpus' 12 SWE-bench runs (mini-swe-agent, live-swe-agent,
    OpenHands, all on task) went from 85-100% of steps >= MILD (median 100%, none ending below
    MILD) to 25-100% (median 89%; 5 ending below MILD, 4 reaching CRITICAL): made-up drift. The
    task statement decides and gives the explanations' goal keywords (``task_parts``), whose
    absence is the signal when another task's run in the same scaffold still looks on-topic.
    """
    from dataclasses import replace

    if goal.source != "messages":
        return goal
    where = "seq " + ",".join(map(str, goal.seqs))
    others = 0
    template = None
    parts, seqs = goal.parts, goal.seqs
    if index is not None and index.tasks > 1:
        kept_parts, kept_seqs, removed, total = [], [], 0, 0
        for sq, (role, text) in zip(goal.seqs, goal.parts):
            runs, gone, n, k = index.split(text)
            removed, total, others = removed + gone, total + n, max(others, k)
            if runs:
                kept_parts.append((role, "\n".join(runs)))
                kept_seqs.append(sq)
        if removed:
            parts, seqs = tuple(kept_parts), tuple(kept_seqs)
            template = {"other_tasks": others, "words_set_aside": removed, "words": total, "task_seqs": list(seqs),
                        "task_text": "\n\n".join(t for _, t in parts)}
    text = "\n\n".join(t for _, t in parts)
    words = content_words(text)
    shared = (f" once the template it shares with {others} other task(s) of this format in the store is set aside"
              if template else "")
    verdictless = {"state": "no_goal", "content_words": len(words), "template": template, "task_parts": parts}
    if not parts:
        return replace(goal, **verdictless, reason="boilerplate",
                       explanation=f"goal is harness boilerplate: the opening ({where}) also opens {others} other "
                                   f"task(s) of this format in the store, nothing in it is this session's own; {_FIX}")
    if is_chat_opener(text):
        return replace(goal, **verdictless, reason="chat_opener",
                       explanation=f"goal is a chat opener ({_quote(text)}), not a task{shared}; {_FIX}")
    if len(words) < MIN_GOAL_WORDS:
        return replace(goal, **verdictless, reason="too_short",
                       explanation=f"goal too short{shared}: {len(words)} content word(s) ({_quote(text)}); {_FIX}")
    if template:
        what = (f"the session opening ({where}); its task statement (seq {','.join(map(str, seqs))}) is what the "
                f"{others} other task(s) of this format in the store do not share: {template['words_set_aside']} of "
                f"its {template['words']} words are harness template")
    elif index is not None and index.tasks > 1:
        what = (f"the session opening ({where}), none of it shared with the {index.tasks - 1} other task(s) "
                "of this format in the store")
    else:
        what = (f"the session opening ({where}); no other task of this format in the store to tell a harness "
                "template from (sessions with a task key and without one are compared apart)")
    return replace(goal, content_words=len(words), template=template, task_parts=parts if template else (),
                   explanation=f"{what}; {len(words)} content words")


# ============================================================================== report


@dataclass
class DriftStep:
    step: int
    message_seq: int
    score: int | None
    verdict: str | None
    similarity: float | None  # the window's
    message_similarity: float | None  # this step's own output (None: not judged)
    judged: bool
    window: list[int]  # message seqs of the judged outputs in the window, oldest first
    explanation: str
    missing_keywords: list[str]
    new_topics: list[str]
    phrases: list[str]
    events: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DriftReport:
    session_id: str
    goal: Goal
    keywords: list[str]
    window_size: int
    on_topic_similarity: float
    off_topic_similarity: float
    model: str | None
    policy: str | None
    embedder: str
    steps: list[DriftStep]
    embed_stats: EmbedStats = field(default_factory=EmbedStats)
    goal_chunks: int = 0
    chunks: int = 0

    @property
    def state(self) -> str:
        """``judged``, or ``no_goal`` when the goal cannot be judged (``goal.explanation`` says why)."""
        return self.goal.state

    def summary(self) -> dict[str, Any]:
        scored = [s for s in self.steps if s.score is not None]
        last = scored[-1] if scored else None
        worst = min(scored, key=lambda s: (s.score, s.step)) if scored else None  # the first lowest
        first_at = {band: next((s.step for s in scored if at_or_worse(s.verdict, band)), None)
                    for band in VERDICTS[1:]}
        left = next((s.step for s in self.steps for e in s.events if e["type"] == "goal_left_window"), None)
        return {
            "state": self.state,
            "steps": len(self.steps),
            "judged_steps": sum(s.judged for s in self.steps),
            "final_score": last.score if last else None,
            "final_verdict": last.verdict if last else None,
            "worst_step": worst.step if worst else None,
            "worst_score": worst.score if worst else None,
            "worst_verdict": worst.verdict if worst else None,
            "mean_score": round(float(np.mean([s.score for s in scored])), 1) if scored else None,
            "first_step_at": first_at,
            "goal_left_window_step": left,
            "drift_phrase_steps": [s.step for s in self.steps if s.phrases],
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": DRIFT_VERSION,
            "state": self.state,
            "goal": {**self.goal.to_dict(), "keywords": self.keywords, "chunks": self.goal_chunks},
            "model": self.model,
            "policy": self.policy,
            "embedding_model": self.embedder,
            "window_size": self.window_size,
            "mapping": {
                "on_topic_similarity": self.on_topic_similarity,
                "off_topic_similarity": self.off_topic_similarity,
                "formula": "score = clip(35 + 40 * (s - off) / (on - off), 0, 100)",
                "bands": {name: floor for name, floor in BANDS},
            },
            "steps": [s.to_dict() for s in self.steps],
            "summary": self.summary(),
            "embedding": self.embed_stats.to_dict() | {"chunks": self.chunks},
        }


# ============================================================================== core


def _sample(chunks: list, limit: int) -> list:
    """At most ``limit`` chunks, evenly spread over the text (first and last kept)."""
    if len(chunks) <= limit:
        return chunks
    idx = np.unique(np.round(np.linspace(0, len(chunks) - 1, limit)).astype(int))
    return [chunks[i] for i in idx]


def _goal_chunks(goal: Goal) -> tuple[list[str], np.ndarray]:
    """The goal's chunk texts (evenly sampled to MAX_GOAL_CHUNKS) and each chunk's section: runs of
    SECTION_CHUNKS consecutive chunks within one goal message."""
    parts = goal.parts or (("user", goal.text),)
    pairs = [(i, c.text) for i, (_, text) in enumerate(parts) for c in chunk_text(text)]
    pairs = _sample(pairs, MAX_GOAL_CHUNKS)
    sections: list[int] = []
    sec, prev_part, run = -1, None, 0
    for part, _ in pairs:
        if part != prev_part or run == SECTION_CHUNKS:
            sec, prev_part, run = sec + 1, part, 0
        sections.append(sec)
        run += 1
    return [t for _, t in pairs], np.asarray(sections, dtype=np.int64)


def _means(vecs: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Mean of each owner's rows (float64); an owner with no rows gets a zero vector."""
    sums = np.zeros((n, vecs.shape[1]), dtype=np.float64)
    np.add.at(sums, owner, vecs)
    counts = np.bincount(owner, minlength=n)[:, None]
    return np.divide(sums, counts, out=sums, where=counts > 0)


def _centroids(vecs: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Normalised mean of each owner's rows: a direction to compare against."""
    return normalize(_means(vecs, owner, n))


def _goal_events(goal: Goal, timeline: Timeline | None, n_steps: int) -> dict[int, list[dict[str, Any]]]:
    """Step (1-based) -> goal_left_window / goal_returned events, from each goal message's states."""
    if timeline is None or not goal.seqs or n_steps == 0:
        return {}
    from ..replay.policies import IN_WINDOW, STATE_NAMES

    states = {sq: timeline.states(sq)[:n_steps] for sq in goal.seqs}
    inside = {sq: np.isin(st, IN_WINDOW) for sq, st in states.items()}
    out: dict[int, list[dict[str, Any]]] = {}
    for k in range(n_steps):
        left = [sq for sq in goal.seqs if not inside[sq][k] and (k == 0 or inside[sq][k - 1])
                and int(states[sq][k]) >= 0]
        back = [sq for sq in goal.seqs if k > 0 and inside[sq][k] and not inside[sq][k - 1]
                and int(states[sq][k - 1]) >= 0]  # joining late (NOT_YET -> KEPT) is not a return
        remaining = [sq for sq in goal.seqs if inside[sq][k]]
        if left:
            out.setdefault(k + 1, []).append({
                "type": "goal_left_window", "seqs": left,
                "states": {str(sq): STATE_NAMES[int(states[sq][k])] for sq in left},
                "remaining": remaining, "all_gone": not remaining,
            })
        if back:
            out.setdefault(k + 1, []).append({"type": "goal_returned", "seqs": back, "remaining": remaining})
    return out


def drift_curve(
    prepared: Prepared,
    timeline: Timeline | None,
    embedder: Embedder,
    store: Store | None,
    goal: Goal | str | None = None,
    window_size: int = _DEFAULTS.window_size,
    *,
    on_topic_similarity: float = _DEFAULTS.on_topic_similarity,
    off_topic_similarity: float = _DEFAULTS.off_topic_similarity,
    progress: ProgressFn | None = None,
    cache_enabled: bool = True,
    ttl_hours: float = 0,
    stats: EmbedStats | None = None,
) -> DriftReport:
    """Score every step of a prepared session against its goal (see the module docstring).

    ``timeline`` (from ``prepared.run()``) adds the goal_left_window events; None skips them.
    ``goal`` is a ``Goal``, a text (source "option"), or None for the session's opening.
    """
    from ..errors import UsageError

    if window_size < 1:
        raise UsageError(f"window size must be >= 1, got {window_size}")
    if on_topic_similarity <= off_topic_similarity:
        raise UsageError("on_topic_similarity must be above off_topic_similarity")
    messages = prepared.messages
    if isinstance(goal, str):
        goal = explicit_goal(goal, "option")
    if goal is None:
        goal = goal_from_messages(messages)
        if goal is None:
            raise UsageError(f"session {prepared.session['id']} has no system or user text to take as its goal",
                             hint="pass the goal with --goal TEXT")
        fmt = prepared.session.get("format")
        keyed = bool(prepared.session.get("task"))
        goal = assess_goal(goal, template_index(store, fmt, keyed) if store is not None and fmt else None)
    step_seqs = [int(s) for s in prepared.inp.steps]
    n = len(step_seqs)
    if goal.state == "no_goal":  # nothing to measure against: no embedding, no score, no verdict
        return _not_judged(prepared, timeline, embedder, goal, window_size, step_seqs,
                           on_topic_similarity, off_topic_similarity, stats)
    by_seq = {sm.seq: sm for sm in messages}
    outputs = [assistant_output(by_seq[sq].message) for sq in step_seqs]
    judged = [len(_WORD.findall(o)) >= MIN_WORDS for o in outputs]

    # One embedding call: the goal's chunks, then the judged outputs' chunks (owner k).
    goal_chunks, goal_sections = _goal_chunks(goal)
    if not goal_chunks:
        raise UsageError("the goal has no text to embed", hint="pass the goal with --goal TEXT")
    texts = list(goal_chunks)
    owner: list[int] = []
    for k, o in enumerate(outputs):
        if judged[k]:
            cs = _sample(chunk_text(o), MAX_CHUNKS_PER_MESSAGE)
            if not cs:
                judged[k] = False
            texts.extend(c.text for c in cs)
            owner.extend([k] * len(cs))
    st = stats if stats is not None else EmbedStats()
    g = len(goal_chunks)
    if len(texts) == g:  # no reply to judge: embedding the goal alone could not change anything
        texts = []
        if progress:
            progress(0, 0)
    vecs = embed_texts(texts, embedder, store, cache_enabled=cache_enabled, ttl_hours=ttl_hours,
                       progress=progress, stats=st) if texts else np.zeros((g, int(embedder.dim)), np.float32)
    references = np.vstack([_centroids(vecs[:g], np.zeros(g, dtype=np.int64), 1),  # the goal as a whole
                            _centroids(vecs[:g], goal_sections, int(goal_sections.max()) + 1)])  # its sections
    # Not re-normalised: a reply's mean vector . a reference = the mean cosine of its chunks with it.
    means = _means(vecs[g:], np.asarray(owner, dtype=np.int64), n)
    msg_sim = (means @ references.T).max(axis=1) if n else np.zeros(0)

    # Lexical side: goal keywords, per-output terms (computed once each).
    kw = goal_keywords(goal.task_parts or goal.parts or (("user", goal.text),))
    goal_terms = terms(goal.text)
    out_terms = [terms(o) if judged[k] else None for k, o in enumerate(outputs)]
    events = _goal_events(goal, timeline, n)

    steps: list[DriftStep] = []
    recent: list[int] = []  # indices of judged outputs, newest last, at most window_size
    for k in range(n):
        if judged[k]:
            recent.append(k)
            del recent[:-window_size]
        own = float(msg_sim[k]) if judged[k] else None
        if recent:
            w = np.arange(1, len(recent) + 1, dtype=np.float64)
            s = float(np.dot(w, msg_sim[recent]) / w.sum())
            score = score_from_similarity(s, on_topic_similarity, off_topic_similarity)
        else:
            s, score = None, None
        v = verdict(score)
        phrases = []
        if own is not None and score_from_similarity(own, on_topic_similarity, off_topic_similarity) < 75:
            phrases = drift_phrases(by_seq[step_seqs[k]].message.text)
        missing, topics = _window_terms(kw, goal_terms, [out_terms[i] for i in recent])
        steps.append(DriftStep(
            step=k + 1, message_seq=step_seqs[k], score=score, verdict=v,
            similarity=None if s is None else round(s, 4), message_similarity=None if own is None else round(own, 4),
            judged=judged[k], window=[step_seqs[i] for i in recent],
            explanation=_explain(v, s, kw, missing, topics, phrases, bool(recent)),
            missing_keywords=missing, new_topics=topics, phrases=phrases, events=events.get(k + 1, []),
        ))
    return DriftReport(
        session_id=prepared.session["id"], goal=goal, keywords=[surf for _, surf in kw], window_size=window_size,
        on_topic_similarity=on_topic_similarity, off_topic_similarity=off_topic_similarity,
        model=prepared.spec.name if timeline is not None else None,
        policy=prepared.policy if timeline is not None else None,
        embedder=getattr(embedder, "name", "?"), steps=steps, embed_stats=st, goal_chunks=len(goal_chunks),
        chunks=len(texts),
    )


def _not_judged(prepared: Prepared, timeline: Timeline | None, embedder: Embedder, goal: Goal, window_size: int,
                step_seqs: list[int], on_topic: float, off_topic: float, stats: EmbedStats | None) -> DriftReport:
    """The report of a session whose goal cannot be judged: every step unscored, the reason in each."""
    events = _goal_events(goal, timeline, len(step_seqs))  # where the opening left the window is still a fact
    steps = [DriftStep(step=k + 1, message_seq=sq, score=None, verdict=None, similarity=None, message_similarity=None,
                       judged=False, window=[], explanation="not judged: no usable goal (" + (goal.reason or "") + ")",
                       missing_keywords=[], new_topics=[], phrases=[], events=events.get(k + 1, []))
             for k, sq in enumerate(step_seqs)]
    return DriftReport(
        session_id=prepared.session["id"], goal=goal,
        keywords=[surf for _, surf in goal_keywords(goal.task_parts or goal.parts or (("user", goal.text),))],
        window_size=window_size,
        on_topic_similarity=on_topic, off_topic_similarity=off_topic,
        model=prepared.spec.name if timeline is not None else None,
        policy=prepared.policy if timeline is not None else None,
        embedder=getattr(embedder, "name", "?"), steps=steps, embed_stats=stats if stats is not None else EmbedStats(),
    )


def _window_terms(kw: list[tuple[str, str]], goal_terms: _Terms, window: list[_Terms | None]
                  ) -> tuple[list[str], list[str]]:
    """(goal keywords absent from the window's text, the window's frequent terms absent from the goal)."""
    if not window:
        return [], []
    seen: Counter = Counter()
    latest: set[str] = set()
    surface: dict[str, str] = {}
    for i, t in enumerate(window):
        if t is None:
            continue
        seen.update(t.counts)
        for stem, s in t.surface.items():
            surface.setdefault(stem, s)
        if i == len(window) - 1:
            latest = set(t.counts)
    missing = [surf for stem, surf in kw if stem not in seen]
    fresh = [stem for stem in seen if stem not in goal_terms.counts]
    fresh.sort(key=lambda stem: (-seen[stem], stem not in latest, -len(stem), stem))
    return missing, [surface[stem] for stem in fresh[:SHOWN_WORDS]]


def _explain(v: str | None, s: float | None, kw: list[tuple[str, str]], missing: list[str], topics: list[str],
             phrases: list[str], any_window: bool) -> str:
    """One or two short lines saying why the step got its verdict."""
    if not any_window or s is None:
        return "no assistant text to judge yet"
    if v == "FRESH":
        present = [surf for _, surf in kw if surf not in missing][:SHOWN_WORDS]
        line = f"on goal (similarity {s:.2f})"
        return line + (": still about " + ", ".join(present) if present else "")
    line1 = f"similarity {s:.2f} to the goal"
    if missing:
        gone = missing[:SHOWN_WORDS]
        line1 += "; missing: " + ", ".join(gone) + (f" (+{len(missing) - len(gone)})" if len(missing) > len(gone) else "")
    elif kw:
        line1 += "; goal keywords still present"
    rest = []
    if topics and v != "MILD":
        rest.append("new topics: " + ", ".join(topics))
    if phrases:
        rest.append(f'"{_short(phrases[0])}" with no progress toward the goal')
    return line1 + ("\n" + "; ".join(rest) if rest else "")


def _short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ============================================================================== entry point


def drift_session(
    store: Store,
    session_id: str,
    model: str | None = None,
    *,
    config: Any = None,
    policy: str | None = None,
    params: dict[str, Any] | None = None,
    goal: str | None = None,
    window_size: int | None = None,
    embedder: Embedder | None = None,
    progress: ProgressFn | None = None,
    stats: EmbedStats | None = None,
    replay: bool = True,
    prepared: Prepared | None = None,
    timeline: Timeline | None = None,
) -> DriftReport:
    """Prepare, replay and score one session; settings default to the config's ``drift`` section.

    ``model`` None replays under the session's model; ``policy`` None means the model's own
    (the CLI passes "recorded" when no model is named, as ``ctxf replay`` does).
    """
    from ..config.settings import Config
    from ..embed.embedders import get_embedder
    from ..replay import Timeline, prepare

    cfg = config if config is not None else Config()
    dc = cfg.drift
    if prepared is not None:  # a caller that already replayed (the audit) passes its replay in
        prep = prepared
    else:
        prep = prepare(store, session_id, model, config=cfg, policy=policy, params=params)
        if replay:
            results, _ = prep.run()
            timeline = Timeline.from_results(prep.inp, results)
    goal_obj: Goal | str | None = None
    if goal is not None:
        goal_obj = explicit_goal(goal, "option")
    elif dc.goal is not None:
        goal_obj = explicit_goal(dc.goal, "config")
    return drift_curve(
        prep, timeline, embedder if embedder is not None else get_embedder(cfg.embedding.model), store,
        goal_obj, window_size if window_size is not None else dc.window_size,
        on_topic_similarity=dc.on_topic_similarity, off_topic_similarity=dc.off_topic_similarity,
        progress=progress, cache_enabled=cfg.embedding.cache_enabled, ttl_hours=cfg.embedding.cache_ttl_hours,
        stats=stats,
    )
