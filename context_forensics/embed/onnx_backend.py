"""The ONNX Runtime backend: a sentence-transformers model run without torch.

A sentence-transformers folder whose ``modules.json`` is Transformer → Pooling → (Normalize) —
the packaged all-MiniLM-L6-v2 is — is exported once from its own weights (``torch.onnx.export``,
offline, in this process) into ctxf's cache folder, ``<cache>/onnx/<name>-<revision>/``, beside a
``manifest.json`` holding the sha256 of the exported graph and of the source weights, the
source's ``model_revision`` and the export recipe's version (``RECIPE``). A later process
verifies the graph's sha256 against the manifest and runs it with onnxruntime, the model's own
``tokenizer.json`` through the ``tokenizers`` library, and the pooling its ``1_Pooling/config.json``
names, in numpy: a run with the export in the cache never imports torch or sentence-transformers.

``backend_status`` says whether a model can run here (onnxruntime importable, a supported
pipeline, an export in the cache or torch to make one) without loading anything;
``OnnxEncoder`` loads and encodes. ``usable_cpus`` is the thread count both backends use.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import AssetError
from ..tokens.assets import atomic_target, cache_dir

# Bump when the export changes what the graph computes (opset, inputs, exporter options): the
# old exports are then stale and the vectors of the new one are cached under a new revision.
RECIPE = "ctxf-onnx/1"
OPSET = 17
GRAPH = "model.onnx"
MANIFEST = "manifest.json"
# ONNX Runtime pads and computes a batch as one tensor: a batch's size is bounded by tokens, so a
# batch of long chunks is not one huge matrix (the peak) and one of short texts is not 32 tiny
# calls. Measured on 800 chunks of the spotter Claude Code session (2 CPUs, fp32, 3 rounds,
# chunks/s): budget 512 292/295/232, 1024 270/283/270, 2048 252/262/236, 4096 214/186/235;
# 512 is as fast as any and keeps the activations (the peak memory) smallest.
TOKEN_BUDGET = 512
# The encoder's threads each run whole batches (a session run with one intra-op thread), instead of
# the threads sharing each batch's matrices: bench/embed_threads.py, 10,876 drift chunks of two
# corpus sessions per format, 2 CPUs, budget 512, four rounds, each way's chunks/s in the same round:
# 456/441/396/518 against 385/378/437/325 (1.18x in all; the machine's speed varies run to run).

# sentence-transformers' Pooling config keys -> our pooling modes, in the order it concatenates them
_POOL_MODES = (("pooling_mode_cls_token", "cls"), ("pooling_mode_max_tokens", "max"),
               ("pooling_mode_mean_tokens", "mean"), ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"))
_UNSUPPORTED_POOL = ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


class BackendUnavailable(Exception):
    """This model cannot run on ONNX Runtime here (the reason is the message)."""


def usable_cpus() -> int:
    """The threads an encoder may use: the CPUs this process may run on, or 1 when
    ``OMP_NUM_THREADS=1`` (an executor's worker owns one CPU: executors.base.worker_setup)."""
    if os.environ.get("OMP_NUM_THREADS") == "1":
        return 1
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    return max(1, n)


def onnxruntime_importable() -> bool:
    try:
        return importlib.util.find_spec("onnxruntime") is not None
    except (ImportError, ValueError):
        return False


def torch_importable() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Pipeline:
    """What a sentence-transformers folder computes, read from its files."""

    root: Path  # the Transformer module's folder (holds config.json, tokenizer.json, the weights)
    pooling: tuple[str, ...]  # modes, concatenated in this order
    max_seq_length: int
    lowercase_input: bool  # sentence_bert_config's do_lower_case (the tokenizer may lowercase too)


def read_pipeline(path: Path) -> Pipeline:
    """The model's modules as ``modules.json`` lists them; ``BackendUnavailable`` for a module
    this backend does not compute (a Dense layer, a custom module, weighted-mean pooling, ...)."""
    try:
        modules = json.loads((path / "modules.json").read_text())
    except (OSError, ValueError) as e:
        raise BackendUnavailable(f"no readable modules.json in {path}: {e}") from None
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if not kinds or kinds[0] != "Transformer" or kinds.count("Pooling") != 1 or any(
            k not in ("Transformer", "Pooling", "Normalize") for k in kinds) or kinds.count("Transformer") != 1:
        raise BackendUnavailable(f"modules {kinds} are not Transformer, Pooling, Normalize")
    tdir = path / (modules[0].get("path") or "")
    pdir = path / (modules[kinds.index("Pooling")].get("path") or "")
    try:
        pool = json.loads((pdir / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise BackendUnavailable(f"unreadable pooling config in {pdir}: {e}") from None
    if any(pool.get(k) for k in _UNSUPPORTED_POOL):
        raise BackendUnavailable("weighted-mean / last-token pooling")
    modes = tuple(mode for key, mode in _POOL_MODES if pool.get(key) is True)
    if not modes:
        raise BackendUnavailable("no pooling mode set")
    if not (tdir / "tokenizer.json").is_file():
        raise BackendUnavailable(f"no tokenizer.json in {tdir}")
    try:
        sbert = json.loads((tdir / "sentence_bert_config.json").read_text())
    except (OSError, ValueError):
        sbert = {}
    try:
        conf = json.loads((tdir / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise BackendUnavailable(f"unreadable config.json in {tdir}: {e}") from None
    try:
        tconf = json.loads((tdir / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        tconf = {}
    # sentence-transformers' limit: its max_seq_length, capped by the tokenizer's and the model's
    limits = [int(x) for x in (sbert.get("max_seq_length"), tconf.get("model_max_length"),
                               conf.get("max_position_embeddings")) if isinstance(x, int) and 0 < x < 1 << 20]
    if not limits:
        raise BackendUnavailable("no max_seq_length")
    return Pipeline(root=tdir, pooling=modes, max_seq_length=min(limits),
                    lowercase_input=bool(sbert.get("do_lower_case")))


def export_dir(name: str, revision: str) -> Path:
    """Where the export of this model revision lives in ctxf's cache folder."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return cache_dir() / "onnx" / f"{safe}-{revision.split(':')[-1][:16]}"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _weights(root: Path) -> list[Path]:
    found = sorted(p for p in root.iterdir() if p.is_file() and p.suffix in (".safetensors", ".bin"))
    return found


def read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_export(folder: Path, revision: str) -> str | None:
    """None when ``folder`` holds a complete export of ``revision`` by this recipe whose graph
    hashes to its manifest's sha256; else what is wrong (missing, stale, tampered)."""
    man = read_manifest(folder)
    if man is None:
        return "no export"
    if man.get("recipe") != RECIPE or man.get("source_revision") != revision:
        return f"stale export (recipe {man.get('recipe')}, source {man.get('source_revision')})"
    graph = folder / GRAPH
    if not graph.is_file():
        return f"{graph} is missing"
    actual = sha256_file(graph)
    if actual != man.get("sha256"):
        return f"{graph} does not match its manifest (sha256 {actual[:12]}…, expected {str(man.get('sha256'))[:12]}…)"
    return None


def export_exists(folder: Path, revision: str) -> bool:
    """A manifest of this recipe and revision is there (its hash is checked at load)."""
    man = read_manifest(folder)
    if not man:
        return False
    return man.get("recipe") == RECIPE and man.get("source_revision") == revision and (folder / GRAPH).is_file()


def export_model(pipe: Pipeline, folder: Path, revision: str) -> Path:
    """Export the Transformer module's weights to ``folder/model.onnx`` with its manifest (needs
    torch and transformers; offline: local files only). Concurrent exporters (an audit's workers)
    take a lock, and the files appear by rename, complete or not at all."""
    import fcntl

    from ..store.files import make_private_dir, open_private_bytes

    make_private_dir(folder)
    with open_private_bytes(folder / ".lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if check_export(folder, revision) is None:
                return folder / GRAPH  # another process made it while we waited
            print(f"note: exporting the embedding model to ONNX once, into {folder} (about 10 s)",
                  file=sys.stderr, flush=True)
            _export_locked(pipe, folder, revision)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder / GRAPH


def _export_locked(pipe: Pipeline, folder: Path, revision: str) -> None:
    from ..tokens.assets import offline_env

    with offline_env():  # the first import of transformers and huggingface_hub, and the load
        try:
            import torch
            from transformers import AutoModel
        except ImportError as e:
            raise BackendUnavailable(f"exporting needs torch and transformers: {e}") from None
        model = AutoModel.from_pretrained(str(pipe.root), local_files_only=True, attn_implementation="eager")
    import inspect

    model.eval()
    takes_types = "token_type_ids" in inspect.signature(model.forward).parameters

    class _Hidden(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
            kw = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
            return self.m(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state

    # a padded dummy batch, so the traced graph keeps the attention mask's path
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102, 0, 0], [101, 2178, 3231, 2007, 2062, 2616, 2182, 102]])
    mask = (ids != 0).long()
    args: tuple[Any, ...] = (ids, mask, torch.zeros_like(ids)) if takes_types else (ids, mask)
    names = ["input_ids", "attention_mask", "token_type_ids"][: len(args)]
    axes = {n: {0: "batch", 1: "seq"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "seq"}
    with atomic_target(folder / GRAPH) as tmp, warnings.catch_warnings():
        # the tracer's TracerWarning / UserWarning / DeprecationWarning are about tracing in
        # general; the export is checked against torch's vectors (tests/test_embed_backends.py)
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(_Hidden(model), args, str(tmp), input_names=names, output_names=["last_hidden_state"],
                              dynamic_axes=axes, opset_version=OPSET, do_constant_folding=True, dynamo=False)
        manifest = {
            "recipe": RECIPE, "opset": OPSET, "source": str(pipe.root), "source_revision": revision,
            "source_sha256": {p.name: sha256_file(p) for p in _weights(pipe.root)},
            "inputs": names, "sha256": sha256_file(tmp), "torch": str(torch.__version__),
        }
    # the manifest last: a graph without one (an export cut short) is made again
    with atomic_target(folder / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2))


def backend_status(path: Path, revision: str, name: str) -> str | None:
    """None when ``path`` can run on ONNX Runtime here (without loading anything), else why not."""
    if not onnxruntime_importable():
        return "onnxruntime is not installed"
    try:
        read_pipeline(path)
    except BackendUnavailable as e:
        return str(e)
    if not export_exists(export_dir(name, revision), revision) and not torch_importable():
        return "no export in the cache and no torch to make one"
    return None


def _onnxruntime() -> Any:
    """onnxruntime, imported with its telemetry off (``ORT_DISABLE_TELEMETRY`` is read at import).
    Imported earlier by someone else without it, the telemetry is switched off through the API
    (that stops later events, not one written at import) and a note says so once."""
    from ..tokens.assets import offline_env

    early = ("onnxruntime" in sys.modules and not _IMPORTED and
             os.environ.get("ORT_DISABLE_TELEMETRY") != "1")
    with offline_env():  # the switch is set for the import only: once ours, later calls find it imported
        import onnxruntime as ort
    if not early and not _IMPORTED:
        _IMPORTED.append(True)

    if early:
        disable = getattr(ort, "disable_telemetry_events", None)
        if disable is not None:
            disable()
        if not _NOTED:
            _NOTED.append(True)
            print("note: onnxruntime was imported before ctxf could switch its telemetry off "
                  "(set ORT_DISABLE_TELEMETRY=1 before importing it)", file=sys.stderr, flush=True)
    return ort


def session_options(intra_op_threads: int) -> Any:
    """onnxruntime's options for the encoder's session: ``intra_op_threads`` threads per run, run
    sequentially, every graph optimisation, warnings only."""
    ort = _onnxruntime()
    so = ort.SessionOptions()
    so.intra_op_num_threads = intra_op_threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return so


_NOTED: list[bool] = []
_IMPORTED: list[bool] = []  # onnxruntime was first imported here, with its telemetry switched off


class OnnxEncoder:
    """The exported graph on onnxruntime, the model's tokenizer.json, pooling in numpy."""

    def __init__(self, path: Path, name: str, revision: str, *, threads: int | None = None,
                 graph: Path | None = None) -> None:
        self.pipe = read_pipeline(path)
        self.folder = export_dir(name, revision)
        if graph is None:
            problem = check_export(self.folder, revision)
            if problem is not None:
                export_model(self.pipe, self.folder, revision)
                problem = check_export(self.folder, revision)
                if problem is not None:
                    raise AssetError(f"the ONNX export of {name} is unusable: {problem}", where=str(self.folder))
            graph = self.folder / GRAPH
        ort = _onnxruntime()
        from tokenizers import Tokenizer

        self.threads = threads or usable_cpus()
        # one thread per run, ``threads`` runs at once (``encode``): MiniLM's matrices at a 512-token
        # batch are too small for two threads to share one well (TOKEN_BUDGET)
        self.session = ort.InferenceSession(str(graph), sess_options=session_options(1),
                                            providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        tok = Tokenizer.from_file(str(self.pipe.root / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=self.pipe.max_seq_length)
        self.tokenizer = tok

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        n, width = len(ids), max(map(len, ids))
        input_ids = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        for r, row in enumerate(ids):
            input_ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        return pool(hidden, mask, self.pipe.pooling)

    def encode(self, texts: Sequence[str], token_budget: int = TOKEN_BUDGET) -> np.ndarray:
        """(len(texts), dim) float32, rows L2-normalised, in input order; each batch padded to
        its own longest member, batches bounded by ``token_budget`` padded tokens."""
        if self.pipe.lowercase_input:
            texts = [t.lower() for t in texts]
        encs = self.tokenizer.encode_batch(list(texts))
        ids = [e.ids for e in encs]
        total = sum(map(len, ids))
        # fewer batches than threads: smaller ones, so that every thread has one
        groups = length_batches([len(x) for x in ids], max(1, min(token_budget, -(-total // self.threads))))
        order = [i for g in groups for i in g]
        batches = [[ids[i] for i in g] for g in groups]
        if self.threads > 1 and len(batches) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(self.threads, len(batches)), thread_name_prefix="ctxf-onnx") as pool:
                parts = list(pool.map(self._run, batches))  # onnxruntime runs a session from many threads
        else:
            parts = [self._run(b) for b in batches]
        vecs = np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
        out = np.empty_like(vecs)
        out[np.asarray(order, dtype=np.int64)] = vecs
        return _unit(out)


def length_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """The indices of ``lengths`` in batches, longest first, each padded to its first (longest)
    member's width and holding at most ``budget`` padded tokens (one member at the least)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    out: list[list[int]] = []
    lo = 0
    while lo < len(order):
        take = max(1, budget // max(lengths[order[lo]], 1))
        out.append(order[lo : lo + take])
        lo += take
    return out


def pool(hidden: np.ndarray, mask: np.ndarray, modes: Sequence[str]) -> np.ndarray:
    """sentence-transformers' Pooling in numpy: the modes' vectors, concatenated."""
    m = mask[..., None].astype(np.float32)
    out = []
    for mode in modes:
        if mode == "cls":
            out.append(hidden[:, 0])
        elif mode == "max":
            out.append(np.where(m > 0, hidden, -1e9).max(axis=1))
        else:
            summed = (hidden * m).sum(axis=1)
            count = np.maximum(m.sum(axis=1), 1e-9)
            out.append(summed / (count if mode == "mean" else np.sqrt(count)))
    return np.concatenate(out, axis=1).astype(np.float32) if len(out) > 1 else out[0].astype(np.float32)


def _unit(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0).astype(np.float32)
