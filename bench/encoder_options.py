"""What a faster MiniLM would cost in fidelity: ctxf's encoder against the cheaper numerics in reach.

    python bench/encoder_options.py [--corpus PATH] [--texts N] [--rounds R]

Collects the chunk texts ``ctxf drift`` embeds for the first two sessions of each format of the
corpus (bench/embed_threads.py's way: a temporary store, nothing cached), takes N of them (seeded
shuffle), and encodes them R times with each way, the ways interleaved in each round:

- ``ctxf fp32``: ctxf's encoder (the ONNX export on ONNX Runtime, fp32, each thread whole batches);
- ``ort int8``: the same graph through onnxruntime's dynamic quantization (int8 weights, per
  channel; activations quantized per batch at run time);
- ``torch fp32`` / ``torch bf16``: the model's own weights in torch (transformers), the same
  tokenizing, batches and pooling; the bf16 row says whether this CPU computes bf16 (AMX or
  AVX512-BF16) or emulates it.

Prints texts/s per way and round, the speed ratio to ``ctxf fp32`` in the same round, and how far
each way's vectors are from ctxf's: the cosine of each text's two vectors (mean, 1st percentile,
min) and the largest change of a cosine between two texts (the figure drift's and facts' scores
are made of: 20,000 random pairs). Not a test: speeds vary with the machine's load; compare within
a round.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from _common import add_corpus_option, print_table  # first: puts this checkout's package on sys.path

from embed_threads import drift_texts


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


def _torch_way(enc: Any, dtype: str) -> Callable[[list[str]], np.ndarray]:
    """The model's own weights in torch, with ``enc``'s tokenizer, its pooling and its batching by
    length (``length_batches``, 2,048 padded tokens a batch)."""
    import torch
    from transformers import AutoModel

    from context_forensics.embed.onnx_backend import _unit, length_batches, pool, usable_cpus

    torch.set_num_threads(usable_cpus())
    model = AutoModel.from_pretrained(str(enc.pipe.root), local_files_only=True).eval()
    if dtype == "bf16":
        model = model.to(torch.bfloat16)

    def encode(texts: list[str]) -> np.ndarray:
        texts = [t.lower() for t in texts] if enc.pipe.lowercase_input else texts
        ids = [e.ids for e in enc.tokenizer.encode_batch(texts)]
        parts, order = [], []
        with torch.inference_mode():
            for idx in length_batches([len(x) for x in ids], 2048):
                x = torch.zeros((len(idx), len(ids[idx[0]])), dtype=torch.long)
                for r, i in enumerate(idx):
                    x[r, :len(ids[i])] = torch.tensor(ids[i])
                mask = (x != 0).long()
                hidden = model(input_ids=x, attention_mask=mask).last_hidden_state.float().numpy()
                parts.append(pool(hidden, mask.numpy(), enc.pipe.pooling))
                order.extend(idx)
        out = np.empty((len(ids), parts[0].shape[1]), np.float32)
        out[order] = np.concatenate(parts)
        return _unit(out)

    return encode


def ways(tmp: Path) -> tuple[list[tuple[str, Callable[[list[str]], np.ndarray], str]], list[str]]:
    """(name, encode, note) per way that can run here, and notes on those that cannot."""
    from context_forensics.embed.embedders import get_embedder
    from context_forensics.embed.onnx_backend import GRAPH, OnnxEncoder

    emb = get_embedder(backend="onnx")
    emb.encode(["warm up"])
    enc = emb._encoder
    out: list[tuple[str, Callable[[list[str]], np.ndarray], str]] = [("ctxf fp32", emb.encode, "any CPU")]
    skipped: list[str] = []
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        q8 = tmp / "model-int8.onnx"
        quantize_dynamic(str(enc.folder / GRAPH), str(q8), per_channel=True, weight_type=QuantType.QInt8)
        q = OnnxEncoder(emb.path, emb.name, emb.torch.revision, graph=q8)
        out.append(("ort int8", q.encode, "int8 kernels differ by CPU (AVX2, VNNI, AMX)"))
    except Exception as e:  # noqa: BLE001  a way that cannot run here is named, the others still run
        skipped.append(f"ort int8: {type(e).__name__}: {e}")
    try:
        out.append(("torch fp32", _torch_way(enc, "fp32"),
                    "imports torch and transformers (seconds)"))
        flags = _cpu_flags()
        bf16_hw = bool(flags & {"amx_bf16", "avx512_bf16"})
        out.append(("torch bf16", _torch_way(enc, "bf16"),
                    "bf16 in hardware (" + ", ".join(sorted(flags & {"amx_bf16", "avx512_bf16"})) + ")" if bf16_hw
                    else "NO bf16 in this CPU: emulated"))
    except ImportError as e:
        skipped.append(f"torch: {e}")
    return out, skipped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_option(ap)
    ap.add_argument("--texts", type=int, default=3000, help="how many drift chunk texts to encode (default 3000)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    texts = drift_texts(args.corpus, 2)
    random.Random(1).shuffle(texts)
    texts = texts[:args.texts]
    with tempfile.TemporaryDirectory() as d:
        found, skipped = ways(Path(d))
        for w, encode, _ in found:
            encode(texts[:64])  # warm up each way
        speeds: dict[str, list[float]] = {w: [] for w, _, _ in found}
        vecs: dict[str, np.ndarray] = {}
        for _ in range(args.rounds):
            for w, encode, _ in found:
                t = time.perf_counter()
                vecs[w] = encode(texts)
                speeds[w].append(len(texts) / (time.perf_counter() - t))
    ref = vecs["ctxf fp32"]
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, len(texts), 20000), rng.integers(0, len(texts), 20000)
    ref_pairs = (ref[i] * ref[j]).sum(1)
    head = ["way", *[f"round {r + 1} texts/s" for r in range(args.rounds)], "x ctxf fp32", "cos mean", "cos p1",
            "cos min", "max |d cos| pairs", "note"]
    rows = []
    for w, _, note in found:
        v = vecs[w]
        cos = (v * ref).sum(1)
        ratio = [s / b for s, b in zip(speeds[w], speeds["ctxf fp32"])]
        dpair = np.abs((v[i] * v[j]).sum(1) - ref_pairs)
        rows.append([w, *[f"{s:.0f}" for s in speeds[w]], " / ".join(f"{x:.2f}" for x in ratio),
                     f"{cos.mean():.6f}", f"{np.percentile(cos, 1):.6f}", f"{cos.min():.6f}", f"{dpair.max():.4f}",
                     note])
    words = sum(len(t.split()) for t in texts)
    print(f"{len(texts)} drift chunk texts ({words} words) of the corpus's sessions, {args.rounds} rounds\n")
    print_table(head, rows, left=2)
    for s in skipped:
        print(f"not run: {s}")


if __name__ == "__main__":
    sys.exit(main())
