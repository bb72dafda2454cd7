"""The agents' compaction rules as data: one dated preset per agent version whose behaviour changed.

A preset says when an agent compacts (its threshold, the quantity it compares with it, at which
calls it looks) and what it keeps. ``auto_compaction`` runs them; ``compaction_fidelity`` checks
them against the compactions the corpus recorded; ``pick_preset`` chooses one from a session's
agent and version. Every figure is from the agent's own source or changelog (``source``); where
an agent records no version, its release by the session's date is named (``PI_RELEASES``).

Quantities (what the agent compares with its threshold before the call of step j):

``usage_and_new``  the last answered call's usage (prompt + output) plus an estimate of the messages
                   added since (Claude Code's ``tokenCountWithEstimation``; its ``preTokens``).
``last_usage``     the last answered call's usage alone (Pi's ``calculateContextTokens``: input +
                   output + cacheRead + cacheWrite; Cline's tokensIn + tokensOut + cacheWrites +
                   cacheReads of the previous request; Codex's total tokens of the last turn).
``last_prompt``    the last call's prompt alone (Gemini CLI's ``getLastPromptTokenCount``).
``window``         the window the next call would send (Inspect counts its compacted input).

When: ``every_call`` (before each model call), ``turn_end`` (only once the agent's turn ended:
Pi ≥ 0.14 checks on ``agent_end``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Claude Code (closed source; constants as quoted from its bundle and its changelog)
CLAUDE_CODE_BUFFER = 13_000  # AUTOCOMPACT_BUFFER_TOKENS (anthropics/claude-code#12004: nx1 = 13000)
CLAUDE_CODE_2_0_RESERVED = 32_000  # 2.0: the model's max output (32k default) reserved: /context "45.0k" buffer
CLAUDE_CODE_2_1_RESERVED_CAP = 20_000  # ≥ 2.1.21: min(max output, 20k): /context "33k" buffer
PI_RESERVE = 16_384  # pi-mono coding-agent compaction.ts DEFAULT_COMPACTION_SETTINGS.reserveTokens
PI_KEEP_RECENT = 20_000  # ... keepRecentTokens
CODEX_FRACTION = 0.9
CODEX_BRIDGE_MAX = 20_000
INSPECT_FRACTION = 0.9  # inspect_ai CompactionStrategy(threshold=0.9)
GENERIC_FRACTION = 0.8


def cline_max_allowed(window: int) -> int:
    """Cline's ``getContextWindowInfo(api).maxAllowedSize`` (src/core/context/context-management/
    context-window-utils.ts, read at Cline 3.57.1, 2026-02-08)."""
    if window == 64_000:
        return window - 27_000
    if window == 128_000:
        return window - 30_000
    if window == 200_000:
        return window - 40_000
    return int(max(window - 40_000, window * 0.8))


@dataclass(frozen=True)
class Preset:
    name: str
    agent: str  # claude_code | codex | pi | cline | roo | gemini_cli | inspect | generic
    versions: str  # the agent versions it describes, as words
    as_of: str  # when it was read from its source
    source: str
    trigger: str  # words: the threshold
    keeps: str  # words: what stays after it fires
    quantity: str = "window"  # usage_and_new | last_usage | window
    when: str = "every_call"  # every_call | turn_end
    action: str = "summary"  # summary | truncate | clear_tool_results | trim
    fraction: float | None = None  # threshold as a fraction of the window (limit)
    reserve: int | None = None  # threshold = limit - reserve - buffer
    buffer: int = 0
    keep_recent_tokens: int | None = None
    keep_prefix: bool = False  # the leading system messages and the first user message stay
    bridge_max: int = 0  # Codex's bridge of earlier user messages
    keep_tool_uses: int = 0  # clear_tool_results: the newest tool uses that keep their results
    preserve: float = 0.0  # trim: the fraction of conversation messages kept
    keep_recent_fraction: float = 0.0  # summary: the newest fraction of the history kept verbatim (Gemini CLI)
    keep_first: bool = False  # the first conversation message stays (Roo)
    keep_last_messages: int = 0  # the newest messages kept verbatim (Roo)
    of_budget: bool = False  # ``fraction`` of the input budget (limit − reserved output), not of the limit
    extra: dict[str, Any] = field(default_factory=dict)

    def threshold(self, limit: int, budget: int) -> int:
        if self.agent == "cline":
            return cline_max_allowed(limit)
        if self.agent == "roo":  # 100% of the window, or the 10% buffer below it less the reply
            return min(limit, int(limit * (self.fraction or 0.9)) - (self.reserve or 0))
        if self.fraction is not None:
            return int(self.fraction * (budget if self.agent == "generic" or self.of_budget else limit))
        return limit - (self.reserve or 0) - self.buffer

    def row(self) -> dict[str, Any]:
        return {"preset": self.name, "agent": self.agent, "versions": self.versions, "trigger": self.trigger,
                "quantity": self.quantity, "when": self.when, "keeps": self.keeps, "source": self.source,
                "as_of": self.as_of}


_P = [
    Preset("claude_code_2_0", "claude_code", "2.0.0 – 2.1.20", "2025-11-20",
           "anthropics/claude-code#12004 (2025-11-20: threshold = available input − 13,000), #15435 and #12053 "
           "(/context 'Autocompact buffer' 45k = 22.5% of 200k, 2025-11/12); CHANGELOG 2.1.21",
           "window − reserved output (the model's, default 32,000) − 13,000 buffer: 155,000 on 200k",
           "the summary only (system prompt and tools are sent apart)",
           quantity="usage_and_new", reserve=CLAUDE_CODE_2_0_RESERVED, buffer=CLAUDE_CODE_BUFFER),
    Preset("claude_code_2_1", "claude_code", "≥ 2.1.21", "2026-02-05",
           "anthropics/claude-code CHANGELOG 2.1.21 ('Fixed auto-compact triggering too early on models with large "
           "output token limits'); #23409 (2026-02-05, /context 'Autocompact buffer: 33k' on 200k); autoCompact.ts "
           "as quoted in Ruya-AI/cozempic#38 (reservedOutput = min(max output, 20,000))",
           "window − min(max output, 20,000) − 13,000 buffer: 167,000 on 200k",
           "the summary only (system prompt and tools are sent apart)",
           quantity="usage_and_new", reserve=CLAUDE_CODE_2_1_RESERVED_CAP, buffer=CLAUDE_CODE_BUFFER),
    Preset("codex", "codex", "codex-rs from 2025-10-17 (openai/codex#5292; the corpus' 0.58)", "2025-11-17",
           "openai/codex#5292 ('Auto compact at ~90%', 2025-10-17: auto_compact_token_limit = 90% of the model's "
           "context window, 272,000 for gpt-5 / gpt-5-codex, i.e. 400k − 128k output: ctxf's budget); "
           "codex-rs compact.rs (COMPACT_USER_MESSAGE_MAX_TOKENS = 20,000); token_limit_reached on the last "
           "turn's total tokens. Before it only gpt-5-codex compacted, at 220k then 350k (#4093, #4156): no preset",
           "last turn's total tokens ≥ 0.9 × the input window (244,800 for gpt-5-codex)",
           "initial context, a bridge of earlier user messages (≤ 20,000), the summary",
           quantity="last_usage", fraction=CODEX_FRACTION, keep_prefix=True, bridge_max=CODEX_BRIDGE_MAX,
           of_budget=True),
    Preset("pi_0_13", "pi", "0.13 (2025-12-04 – 2025-12-08)", "2025-12-08",
           "badlogic/pi-mono bd0d0676 (0.13.2) coding-agent src/compaction.ts shouldCompact, "
           "tui-renderer.ts checkAutoCompaction after every assistant message_end",
           "last call's usage > window − reserveTokens (16,384): 183,616 on 200k",
           "the summary and the newest turns worth ≥ keepRecentTokens (20,000)",
           quantity="last_usage", reserve=PI_RESERVE, keep_recent_tokens=PI_KEEP_RECENT),
    Preset("pi_0_14", "pi", "≥ 0.14 (2025-12-09 –; read at 0.22.5)", "2025-12-17",
           "badlogic/pi-mono a38e6190 (2025-12-09) and 295f51b5 (0.22.5) core/agent-session.ts "
           "_handleAgentEndCompaction: checked on agent_end only; compaction.ts reserveTokens 16,384",
           "last call's usage > window − 16,384 (183,616 on 200k), once the agent's turn ended",
           "the summary and the newest turns worth ≥ keepRecentTokens (20,000)",
           quantity="last_usage", when="turn_end", reserve=PI_RESERVE, keep_recent_tokens=PI_KEEP_RECENT),
    Preset("cline", "cline", "3.x (read at 3.57.1, 2026-02-08), auto-condense off", "2026-02-08",
           "cline/cline src/core/context/context-management/context-window-utils.ts (maxAllowedSize) and "
           "ContextManager.ts getNewContextMessagesAndMetadata / getNextTruncationRange / "
           "attemptFileReadOptimizationCore / calculateContextOptimizationMetrics (c093ca1760, 2026-01-22; "
           "the 30% rule since c2e91aa9c9): _cline_context",
           "previous request's tokensIn + tokensOut + cacheWrites + cacheReads ≥ maxAllowedSize "
           "(window − 40,000 on 200k, − 30,000 on 128k, − 27,000 on 64k, else max(window − 40k, 80%))",
           "the first user–assistant pair and the newer half of the rest (a quarter when half the usage is "
           "still over the limit); no summary. First, older duplicate file reads are rewritten to a notice and "
           "the truncation is skipped when that saves ≥ 30% of the characters counted (the first pair and the "
           "messages after the deleted range: text blocks and image data): rebuilt from the task folder the "
           "session was ingested from (the store keeps neither content blocks nor image sizes); not modelled "
           "when the folder is gone",
           quantity="last_usage", action="truncate"),
    Preset("roo", "roo", "Roo Code 3.2x (autoCondenseContext on, autoCondenseContextPercent 100)", "2025-10-01",
           "RooCodeInc/Roo-Code src/core/sliding-window/index.ts truncateConversationIfNeeded (TOKEN_BUFFER_PERCENTAGE "
           "0.1, reserved = maxTokens || ANTHROPIC_DEFAULT_MAX_TOKENS 8,192), global-state defaults "
           "(autoCondenseContext true, autoCondenseContextPercent 100), condense/index.ts (N_MESSAGES_TO_KEEP 3); "
           "not checked against a recorded condense (no public log with one was at hand)",
           "previous request's context tokens + the new message ≥ 100% of the window, or > 0.9 × window − "
           "reserved output (8,192 unless the model's max output is set)",
           "the first message, the summary and the last 3 messages",
           quantity="usage_and_new", reserve=8_192, fraction=0.9, keep_first=True, keep_last_messages=3),
]
# Gemini CLI: DEFAULT_COMPRESSION_TOKEN_THRESHOLD by release (google-gemini/gemini-cli history of
# packages/core/src/{core/client.ts,services/chatCompressionService.ts}); the last prompt's
# promptTokenCount against threshold × tokenLimit(model), before every turn (processTurn).
_GEMINI = (
    ("gemini_cli_0_1", "0.1.9 – 0.12", "2025-07-07", "0c70a99b (2025-07-07, client.ts COMPRESSION_TOKEN_THRESHOLD)",
     0.7),
    ("gemini_cli_0_13", "0.13 – 0.16", "2025-10-30", "68afb720 (#12306, 2025-10-30)", 0.2),
    ("gemini_cli_0_17", "0.17", "2025-11-14", "6d83d344 (#13079, 2025-11-14)", 0.7),
    ("gemini_cli_0_18", "≥ 0.18", "2025-11-20", "c7b5dcd2 (#13517, 2025-11-20; unchanged at 2026-08)", 0.5),
)
_P += [Preset(name, "gemini_cli", versions, as_of,
              f"google-gemini/gemini-cli {src}: DEFAULT_COMPRESSION_TOKEN_THRESHOLD {frac}, "
              "COMPRESSION_PRESERVE_THRESHOLD 0.3; not checked against a recorded compression (no public log with one "
              "was at hand)",
              f"last prompt ≥ {frac} × the model's token limit, before every turn",
              "the summary and the newest 30% of the history (split at a user message)",
              quantity="last_prompt", fraction=frac, keep_recent_fraction=0.3)
       for name, versions, as_of, src, frac in _GEMINI]
_P += [
    Preset("inspect_summary", "inspect", "inspect_ai 0.3.2xx CompactionSummary", "2026-07-30",
           "UKGovernmentBEIS/inspect_ai src/inspect_ai/model/_compaction/summary.py, types.py (threshold=0.9), "
           "_compaction.py (total_tokens > threshold; prefix preserved)",
           "window > 0.9 × the model's input tokens", "the prefix (system messages, first user input) and the summary",
           fraction=INSPECT_FRACTION, keep_prefix=True),
    Preset("inspect_native", "inspect", "inspect_ai 0.3.2xx CompactionNative", "2026-07-30",
           "inspect_ai _compaction/native.py (provider's server-side compaction; preserve_prefix False)",
           "window > 0.9 × the model's input tokens",
           "the provider's compaction item only (modelled as a summary; its size is the provider's)",
           fraction=INSPECT_FRACTION),
    Preset("inspect_auto", "inspect", "inspect_ai 0.3.2xx CompactionAuto", "2026-07-30",
           "inspect_ai _compaction/auto.py (native, and summary when the provider has none)",
           "window > 0.9 × the model's input tokens",
           "as inspect_summary (ctxf cannot tell whether the provider compacts natively: the summary fallback)",
           fraction=INSPECT_FRACTION, keep_prefix=True),
    Preset("inspect_edit", "inspect", "inspect_ai 0.3.2xx CompactionEdit", "2026-07-30",
           "inspect_ai _compaction/edit.py (keep_tool_uses=3, keep_tool_inputs=True, keep_thinking_turns=1)",
           "window > 0.9 × the model's input tokens",
           "every message; tool results older than the newest 3 tool uses are cleared (calls kept)",
           fraction=INSPECT_FRACTION, action="clear_tool_results", keep_tool_uses=3),
    Preset("inspect_trim", "inspect", "inspect_ai 0.3.2xx CompactionTrim", "2026-07-30",
           "inspect_ai _compaction/trim.py and model/_trim.py (preserve=0.8)",
           "window > 0.9 × the model's input tokens",
           "the prefix and the newest 80% of the conversation messages (whole tool pairs); no summary",
           fraction=INSPECT_FRACTION, action="trim", keep_prefix=True, preserve=0.8),
    Preset("generic", "generic", "-", "2025-11-01", "LangChain SummarizationMiddleware; a hand-written agent loop",
           "0.8 × budget", "the summary and the newest whole groups worth ≤ a quarter of the budget",
           fraction=GENERIC_FRACTION),
]
PRESETS: dict[str, Preset] = {p.name: p for p in _P}
# Undated names: the agent's current behaviour.
ALIASES = {"claude_code": "claude_code_2_1", "pi": "pi_0_14", "inspect": "inspect_auto",
           "gemini_cli": "gemini_cli_0_18"}
NAMES = tuple(PRESETS) + tuple(ALIASES)

# Pi writes no version into its session files: its release by the session's date (pi-mono's
# packages/coding-agent/package.json at the last commit before that date).
PI_RELEASES = (("2025-12-04", "pi_0_13", "0.13"), ("2025-12-09", "pi_0_14", "0.14"))
GEMINI_RELEASES = tuple((as_of, name, versions) for name, versions, as_of, _, _ in _GEMINI)


def get_preset(name: str) -> Preset:
    return PRESETS[ALIASES.get(name, name)]


def _version(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def pick_preset(agent: str | None, version: str | None, date: str | None = None) -> tuple[str, str]:
    """The preset for a session's agent and version (or date, for an agent that records none),
    and why. ``generic`` when the agent is not one with a preset."""
    if agent == "claude_code":
        if version is None:
            return "claude_code_2_1", "Claude Code, version not recorded: the current behaviour (≥ 2.1.21)"
        v = _version(version)
        if v >= (2, 1, 21):
            return "claude_code_2_1", f"Claude Code {version} (≥ 2.1.21)"
        if v >= (2, 0, 0):
            return "claude_code_2_0", f"Claude Code {version} (2.0.0 – 2.1.20)"
        return "claude_code_2_0", f"Claude Code {version}: before 2.0 no preset is sourced; the 2.0 rule"
    if agent == "pi":
        if not date:
            return "pi_0_14", "Pi, no date: the current behaviour (≥ 0.14)"
        chosen = ("pi_0_13", "before 0.13")
        for start, name, ver in PI_RELEASES:
            if date[:10] >= start:
                chosen = (name, ver)
        return chosen[0], f"Pi {chosen[1]} by the session's date {date[:10]} (Pi records no version)"
    if agent == "codex":
        return "codex", f"Codex {version or '(version not recorded)'} (the rule of 2025-10-17 on)"
    if agent == "cline":
        return "cline", f"Cline {version or '(version not recorded)'}"
    if agent == "gemini_cli":
        if version:
            v = _version(version)
            for (start, name, ver), nxt in zip(GEMINI_RELEASES, GEMINI_RELEASES[1:] + ((None, None, None),)):
                lo = _version(ver.split(" ")[-1] if ver.startswith("≥") else ver.split(" – ")[0])
                hi = _version(nxt[2].split(" – ")[0].replace("≥ ", "")) if nxt[2] else None
                if v >= lo and (hi is None or v < hi):
                    return name, f"Gemini CLI {version} ({ver})"
            first = GEMINI_RELEASES[0]  # older than every sourced release
            return first[1], (f"Gemini CLI {version}: before {first[2].split(' – ')[0]} no preset is sourced; "
                              f"the {first[1]} rule")
        if date:  # by the date the threshold changed in the source (a release follows its nightly)
            release = GEMINI_RELEASES[0]
            for rel in GEMINI_RELEASES:
                if date[:10] >= rel[0]:
                    release = rel
            return release[1], f"Gemini CLI {release[2]} by the session's date {date[:10]} (no version recorded)"
        return "gemini_cli_0_18", "Gemini CLI, no version or date: the current behaviour (≥ 0.18)"
    if agent == "roo":
        return "roo", f"Roo Code {version or '(version not recorded)'}"
    if agent == "inspect":
        return "inspect_auto", "Inspect AI: CompactionAuto"
    return "generic", f"no preset for {agent or 'this format'}: generic"


def session_agent(session: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(agent, version, date) of a session row, from what its importer kept."""
    fmt = session.get("format")
    md = session.get("metadata") or {}
    date = session.get("started_at")
    if fmt == "claude_code":
        versions = md.get("versions") or []
        return "claude_code", (versions[-1] if versions else None), date
    if fmt == "codex":
        return "codex", md.get("cli_version"), date
    if fmt == "pi":
        return "pi", None, date
    if fmt == "cline":
        return md.get("agent") or "cline", md.get("version"), date
    if fmt == "gemini_cli":
        return "gemini_cli", md.get("version"), date
    if fmt == "inspect":
        return "inspect", None, date
    return fmt, None, date
