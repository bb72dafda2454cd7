"""Synthetic session logs for ``bench/scale.py``: n sessions in the formats ctxf ingests, with
realistic lengths, deterministic from a seed.

    generate(out_dir, n_sessions, seed) -> Manifest

Formats and shares (by session): OpenAI chat JSON agents with tool calls (30%), Claude Code
JSONL (24%), Codex rollout JSONL (20%), Anthropic Messages request bodies with tool_use blocks
(11%), and multi-session files: ShareGPT lists and OpenAI fine-tuning JSONL of 3-8 chats each
(15%). Most files hold one session.

Lengths: messages per session log-normal around 32 (most 10-80, a tail to 300); tool outputs
log-normal around 600 tokens (150 to ~5,000), chat replies 60-800 tokens; so a good share of the
agent sessions outgrow a 16k window. Text is cut at random places from a pool of sentences and
code/log lines built from a word list and seed-made identifiers, so no two messages are one
repeated string and content hashes differ. The agents' system prompts (or first user message)
carry ``FACTS``; some long Claude Code sessions compact; a few OpenAI sessions carry an orphan
tool result. Nothing beside the logs is written into ``out_dir`` (an audit of it must see logs
only); the counts come back as a ``Manifest``.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

FACTS = ("Never modify files under tests/.", "Keep the public function signatures unchanged.")

_WORDS = """
the a of to and in is that for it on with as be at by this from or an are not have was but all
can will one more when there their which if do about so up out has what into them some other
than then now only its over also after use two how our work first well way even new want because
any these give day most us file test function value error change code module config service
request response cache token window model context message session user agent tool call result
output input parser pipeline schema record table column index query build deploy release branch
commit patch diff merge review check lint format type class method return import package path
directory folder log trace event metric latency retry timeout queue worker thread process lock
buffer stream chunk batch offset limit budget memory disk network socket header payload field
string number list map key hash store write read open close start stop run fail pass skip flaky
invoice customer order payment discount price region currency tax refund shipment warehouse
report dashboard chart summary account profile login password session cookie permission role
date time zone calendar schedule job task plan step goal constraint rule policy threshold alert
""".split()

_TOOLS = ("bash", "read_file", "edit_file", "grep", "list_dir", "run_tests")


def _identifiers(rng: random.Random, k: int) -> list[str]:
    syll = ["ka", "lo", "mi", "ren", "tur", "vex", "sol", "dar", "qui", "nor", "pel", "zin", "bra",
            "cor", "fen", "gal", "hus", "jor", "mab", "tek"]
    return ["".join(rng.choice(syll) for _ in range(rng.randint(2, 4))) for _ in range(k)]


@dataclass
class _Pools:
    prose: str
    lines: list[str]

    def text(self, rng: random.Random, tokens: int) -> str:
        """About ``tokens`` tokens of prose (4 characters a token), cut at word boundaries."""
        n = max(8, tokens * 4)
        o = rng.randrange(0, len(self.prose) - n - 1)
        s = self.prose[o:o + n]
        i = s.find(" ")
        return s[i + 1:].rstrip() if 0 <= i < 30 else s

    def output(self, rng: random.Random, tokens: int, head: str) -> str:
        """A tool output: ``head`` then about ``tokens`` tokens of consecutive code/log lines."""
        k = max(2, tokens // 9)  # a line is ~36 characters
        o = rng.randrange(0, len(self.lines) - k)
        return head + "\n" + "\n".join(self.lines[o:o + k])


def _pools(rng: random.Random) -> _Pools:
    ids = _identifiers(rng, 1500)
    words = _WORDS + ids[:300]
    out: list[str] = []
    for _ in range(60_000):  # ~1 MB of sentences
        w = rng.choices(words, k=rng.randint(6, 18))
        if rng.random() < 0.3:
            w.append(str(rng.randint(2, 9999)))
        out.append(w[0].capitalize() + " " + " ".join(w[1:]) + ".")
    prose = " ".join(out)
    lines: list[str] = []
    for _ in range(60_000):
        a, b, c = rng.choice(ids), rng.choice(_WORDS), rng.choice(ids)
        r = rng.random()
        if r < 0.25:
            lines.append(f"def {a}_{b}({c}, {rng.choice(_WORDS)}=None):")
        elif r < 0.5:
            lines.append(f"    return {c}.{a}({rng.randint(0, 500)}) + {b}")
        elif r < 0.65:
            lines.append(f"src/{a}/{c}.py:{rng.randint(1, 900)}: {b} {rng.choice(_WORDS)} {rng.choice(ids)}")
        elif r < 0.8:
            lines.append(f"tests/test_{a}.py::test_{b}_{c} {rng.choice(('PASSED', 'PASSED', 'FAILED', 'SKIPPED'))}")
        else:
            lines.append(f"{rng.randint(10, 23)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} INFO {a} {b} {c} "
                         f"id={rng.getrandbits(32):08x}")
    return _Pools(prose, lines)


def _lognormal(rng: random.Random, median: float, sigma: float, lo: int, hi: int) -> int:
    return max(lo, min(hi, int(math.exp(rng.gauss(math.log(median), sigma)))))


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


@dataclass
class _Msg:
    role: str  # system | user | assistant | tool
    text: str = ""
    call: tuple[str, str, dict] | None = None  # (id, tool name, arguments) on an assistant message
    call_id: str = ""  # on a tool message


@dataclass
class _Conv:
    sid: str
    msgs: list[_Msg] = field(default_factory=list)


def _system(rng: random.Random, pools: _Pools) -> str:
    return ("You are a coding agent working in a repository.\nRules:\n- " + FACTS[0] + "\n- " + FACTS[1]
            + "\n- Always run the test suite before you say you are done.\n" + pools.text(rng, 60))


def _agent(rng: random.Random, pools: _Pools, sid: str, orphan: bool = False) -> _Conv:
    """System, task, then assistant steps: mostly tool calls with their outputs, some text replies
    and follow-up user messages, closing with a text reply."""
    n = _lognormal(rng, 32, 0.6, 10, 300)
    c = _Conv(sid,
              [_Msg("system", _system(rng, pools)), _Msg("user", "Task: " + pools.text(rng, rng.randint(30, 150)))])
    k = 0
    while len(c.msgs) < n - 1:
        if rng.random() < 0.7:
            k += 1
            cid = f"call_{sid[:8]}_{k:03d}"
            tool = rng.choice(_TOOLS)
            args = {"command": pools.text(rng, 8)} if tool in ("bash", "run_tests", "grep") else \
                {"path": f"src/{pools.text(rng, 3).replace(' ', '_')}.py"}
            c.msgs.append(_Msg("assistant", pools.text(rng, rng.randint(5, 60)) if rng.random() < 0.5 else "",
                               (cid, tool, args)))
            toks = _lognormal(rng, 600, 0.8, 150, 5000)
            c.msgs.append(_Msg("tool", pools.output(rng, toks, f"$ {tool} # {cid}"), call_id=cid))
        else:
            c.msgs.append(_Msg("assistant", pools.text(rng, rng.randint(40, 400))))
            if rng.random() < 0.4:
                c.msgs.append(_Msg("user", pools.text(rng, rng.randint(10, 120))))
    if orphan:  # a tool result whose call is not in the log
        c.msgs.insert(len(c.msgs) // 2,
                      _Msg("tool", pools.output(rng, 200, "$ orphan"), call_id=f"call_{sid[:8]}_lost"))
    if c.msgs[-1].role != "assistant" or c.msgs[-1].call:
        c.msgs.append(_Msg("assistant", "Done. " + pools.text(rng, rng.randint(30, 200))))
    return c


def _chat(rng: random.Random, pools: _Pools, sid: str) -> _Conv:
    n = _lognormal(rng, 14, 0.6, 4, 120) // 2 * 2
    c = _Conv(sid)
    for i in range(n):
        if i % 2 == 0:
            c.msgs.append(_Msg("user", pools.text(rng, rng.randint(10, 200))))
        else:
            c.msgs.append(_Msg("assistant", pools.text(rng, _lognormal(rng, 250, 0.6, 60, 800))))
    return c


# ---- writers: one conversation in one format ------------------------------------------------

def _openai(c: _Conv) -> dict:
    msgs: list[dict] = []
    for m in c.msgs:
        if m.role == "tool":
            msgs.append({"role": "tool", "tool_call_id": m.call_id, "content": m.text})
        elif m.call:
            cid, name, args = m.call
            msgs.append({"role": "assistant", "content": m.text or None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        else:
            msgs.append({"role": m.role, "content": m.text})
    tools = [{"type": "function",
              "function": {"name": t, "parameters": {"type": "object", "properties": {}}}} for t in _TOOLS]
    return {"model": "gpt-4o-mini", "tools": tools, "messages": msgs}


def _anthropic(c: _Conv) -> dict:
    msgs: list[dict] = []
    for m in c.msgs[1:]:
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.call_id, "content": m.text}
            msgs.append({"role": "user", "content": [block]})
        elif m.call:
            cid, name, args = m.call
            blocks = ([{"type": "text", "text": m.text}] if m.text else []) + [{"type": "tool_use",
                                                                                "id": cid, "name": name, "input": args}]
            msgs.append({"role": "assistant", "content": blocks})
        else:
            msgs.append({"role": m.role, "content": [{"type": "text", "text": m.text}]})
    return {"model": "claude-sonnet-4-5", "max_tokens": 8192, "system": c.msgs[0].text,
            "tools": [{"name": t, "input_schema": {"type": "object"}} for t in _TOOLS], "messages": msgs}


def _ts(base: int, i: int) -> str:
    t = base + i * 7
    d, s = divmod(t, 86400)
    return f"2026-01-{1 + d % 28:02d}T{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.000Z"


def _claude_code(c: _Conv, rng: random.Random, pools: _Pools) -> str:
    base = rng.randrange(0, 86400 * 20)
    common = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/proj", "sessionId": c.sid,
              "version": "2.1.39", "gitBranch": "main"}
    lines: list[str] = []
    parent: str | None = None
    context = 0  # estimated prompt tokens, for the recorded usage
    msgs = [_Msg("user", c.msgs[0].text + "\n\n" + c.msgs[1].text)] + c.msgs[2:]  # CLAUDE.md rules in the first prompt
    for i, m in enumerate(msgs):
        uid = f"{c.sid[:8]}-{i:04d}"
        rec = {"parentUuid": parent, **common, "uuid": uid, "timestamp": _ts(base, i)}
        if m.role == "assistant":
            content = ([{"type": "text", "text": m.text}] if m.text else [])
            if m.call:
                content.append({"type": "tool_use", "id": m.call[0], "name": m.call[1], "input": m.call[2]})
            out = len(m.text) // 4 + 20
            rec.update(type="assistant", requestId=f"req_{uid}", message={
                "model": "claude-opus-4-6", "id": f"msg_{uid}", "type": "message", "role": "assistant",
                "content": content, "stop_reason": "tool_use" if m.call else "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 4, "cache_creation_input_tokens": out, "cache_read_input_tokens": context,
                          "output_tokens": out, "service_tier": "standard"}})
        elif m.role == "tool":
            rec.update(type="user", message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": m.call_id, "content": m.text}]})
        else:
            rec.update(type="user", message={"role": "user", "content": m.text})
        context += len(m.text) // 4 + 10
        lines.append(json.dumps(rec))
        parent = uid
        if context > 40_000 and m.role == "tool" and rng.random() < 0.5:  # auto-compaction
            bid = f"{c.sid[:8]}-{i:04d}b"
            lines.append(json.dumps({"parentUuid": None, **common, "type": "system", "uuid": bid,
                                     "timestamp": _ts(base, i), "subtype": "compact_boundary",
                                     "content": "Conversation compacted", "isMeta": False, "level": "info",
                                     "compactMetadata": {"trigger": "auto", "preTokens": context},
                                     "logicalParentUuid": uid}))
            sid2 = f"{c.sid[:8]}-{i:04d}s"
            lines.append(json.dumps({"parentUuid": bid, **common, "type": "user", "uuid": sid2,
                                     "timestamp": _ts(base, i),
                                     "message": {"role": "user",
                                                 "content": "This session is being continued from a previous "
                                                 "conversation that ran out of context. Summary: "
                                                 + pools.text(rng, 400)},
                                     "isCompactSummary": True, "isVisibleInTranscriptOnly": True}))
            parent, context = sid2, 500
    return "\n".join(lines) + "\n"


def _codex(c: _Conv, rng: random.Random) -> tuple[str, str]:
    base = rng.randrange(0, 86400 * 20)
    recs: list[dict] = []

    def add(i: int, typ: str, payload: dict) -> None:
        recs.append({"timestamp": _ts(base, i), "type": typ, "payload": payload})

    add(0, "session_meta", {"id": c.sid, "timestamp": _ts(base, 0), "cwd": "/tmp/proj", "originator": "codex_cli_rs",
                            "cli_version": "0.77.0", "instructions": c.msgs[0].text, "source": "cli",
                            "model_provider": "openai",
                            "base_instructions": {"text": "You are Codex, a coding agent."}})
    turn = {"cwd": "/tmp/proj", "approval_policy": "on-request", "sandbox_policy": {"mode": "workspace-write"},
            "model": "gpt-5-codex", "effort": "medium", "summary": "auto"}
    total_in = total_out = context = 0
    for i, m in enumerate(c.msgs[1:], 1):
        if m.role == "user":
            add(i, "turn_context", turn)
            add(i, "response_item",
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": m.text}]})
            add(i, "event_msg", {"type": "user_message", "message": m.text, "images": []})
        elif m.role == "tool":
            add(i, "response_item", {"type": "function_call_output", "call_id": m.call_id,
                                     "output": json.dumps({"output": m.text, "metadata": {"exit_code": 0}})})
        else:
            if m.text:
                add(i, "response_item",
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": m.text}]})
            if m.call:
                add(i, "response_item", {"type": "function_call", "name": "shell", "call_id": m.call[0],
                                         "arguments": json.dumps({"command": ["bash", "-lc",
                                                                              str(next(iter(m.call[2].values())))]})})
            out = len(m.text) // 4 + 20
            total_in += context
            total_out += out
            last = {"input_tokens": context, "cached_input_tokens": 0, "output_tokens": out,
                    "reasoning_output_tokens": 0,
                    "total_tokens": context + out}
            add(i, "event_msg", {"type": "token_count", "info": {
                "total_token_usage": {"input_tokens": total_in, "cached_input_tokens": 0, "output_tokens": total_out,
                                      "reasoning_output_tokens": 0, "total_tokens": total_in + total_out},
                "last_token_usage": last, "model_context_window": 272000}, "rate_limits": None})
        context += len(m.text) // 4 + 10
    name = f"rollout-{_ts(base, 0)[:19].replace(':', '-')}-{c.sid}.jsonl"
    return name, "\n".join(json.dumps(r) for r in recs) + "\n"


def _sharegpt(convs: list[_Conv]) -> list[dict]:
    who = {"user": "human", "assistant": "gpt", "system": "system"}
    return [{"id": c.sid, "conversations": [{"from": who[m.role], "value": m.text} for m in c.msgs]} for c in convs]


def _finetune(convs: list[_Conv]) -> str:
    return "\n".join(json.dumps({"messages": [{"role": m.role,
                                               "content": m.text} for m in c.msgs]}) for c in convs) + "\n"


@dataclass
class Manifest:
    """What ``generate`` wrote: files and sessions per format, and the total bytes."""
    files: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)
    bytes: int = 0

    @property
    def n_files(self) -> int:
        return sum(self.files.values())

    @property
    def n_sessions(self) -> int:
        return sum(self.sessions.values())


# Weights per file; a multi-session file holds 5.5 sessions on average, so the last two weigh
# about 7.5% of the sessions each.
_FORMATS = (("openai_chat", 0.30), ("claude_code", 0.24), ("codex", 0.20), ("anthropic", 0.11),
            ("sharegpt", 0.075 / 5.5), ("finetune", 0.075 / 5.5))


def generate(out_dir: str | Path, n_sessions: int, seed: int = 0) -> Manifest:
    """Write ``n_sessions`` sessions into ``out_dir`` (created; one flat folder) and return
    the manifest. The same ``(n_sessions, seed)`` writes the same bytes."""
    out = Path(out_dir)
    rng = random.Random(seed)
    pools = _pools(rng)
    man = Manifest()
    out.mkdir(parents=True, exist_ok=True)
    names, weights = zip(*_FORMATS)

    def write(fmt: str, fname: str, text: str, sessions: int) -> None:
        data = text.encode()
        (out / fname).write_bytes(data)
        man.files[fmt] = man.files.get(fmt, 0) + 1
        man.sessions[fmt] = man.sessions.get(fmt, 0) + sessions
        man.bytes += len(data)

    left = n_sessions
    i = 0
    while left > 0:
        fmt = rng.choices(names, weights)[0]
        i += 1
        sid = _uuid(rng)
        if fmt == "openai_chat":
            c = _agent(rng, pools, sid, orphan=rng.random() < 0.03)
            write(fmt, f"openai-{i:06d}.json", json.dumps(_openai(c), indent=1), 1)
        elif fmt == "anthropic":
            write(fmt, f"anthropic-{i:06d}.json", json.dumps(_anthropic(_agent(rng, pools, sid)), indent=1), 1)
        elif fmt == "claude_code":
            write(fmt, f"{sid}.jsonl", _claude_code(_agent(rng, pools, sid), rng, pools), 1)
        elif fmt == "codex":
            fname, text = _codex(_agent(rng, pools, sid), rng)
            write(fmt, fname, text, 1)
        else:
            k = min(left, rng.randint(3, 8))
            convs = [_chat(rng, pools, f"{sid}-{j}") for j in range(k)]
            if fmt == "sharegpt":
                write(fmt, f"sharegpt-{i:06d}.json", json.dumps(_sharegpt(convs)), k)
            else:
                write(fmt, f"finetune-{i:06d}.jsonl", _finetune(convs), k)
            left -= k
            continue
        left -= 1
    return man
