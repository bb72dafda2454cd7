"""``ctxf`` with MiniLM's forward pass made free: the floor under a command's cost (bench/ratios.py).

    python bench/_free_encoder.py ARGS...   (as ``ctxf ARGS...``)

Everything a real run does is done (imports, the model's load and ONNX session, tokenizing each
text with the model's tokenizer, the embedding cache, every analysis after the vectors) except the
ONNX Runtime forward pass: each text gets a seeded random unit vector instead. The vectors are
meaningless, so the run's verdicts are too; only its time is read. What the encoder was asked
for is printed last on stderr::

    free encoder: N texts, W wordpieces, C calls

so a bench can say how fast the encoder would have to be for a target: the real run's time minus
this run's is what the forward passes cost. Not used by ctxf itself.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Sequence

import numpy as np

# the package of the tree being measured: bench/_cold.py sets PYTHONPATH to it (--checkout)
from context_forensics.embed import onnx_backend

_ASKED = {"texts": 0, "wordpieces": 0, "calls": 0}


def _free_encode(self: onnx_backend.OnnxEncoder, texts: Sequence[str],
                 token_budget: int = onnx_backend.TOKEN_BUDGET) -> np.ndarray:
    texts = [t.lower() for t in texts] if self.pipe.lowercase_input else list(texts)
    encs = self.tokenizer.encode_batch(texts)  # the tokenizing a real run does, kept
    _ASKED["texts"] += len(texts)
    _ASKED["wordpieces"] += sum(len(e.ids) for e in encs)
    _ASKED["calls"] += 1
    width = self.session.get_outputs()[0].shape[-1]  # the hidden size (an int in the export), once per mode
    dim = (width if isinstance(width, int) else 384) * len(self.pipe.pooling)
    rng = np.random.default_rng(len(texts))
    return onnx_backend._unit(rng.standard_normal((len(texts), dim)).astype(np.float32))


def _report() -> None:
    print(f"free encoder: {_ASKED['texts']} texts, {_ASKED['wordpieces']} wordpieces, {_ASKED['calls']} calls",
          file=sys.stderr, flush=True)


def main() -> None:
    import os

    from context_forensics.embed.embedders import choose_backend

    backend, why = choose_backend(None, os.environ.get("CTXF_EMBEDDING_BACKEND") or "auto")
    if backend != "onnx":  # the torch backend's forward pass is not replaced: its "floor" would be the real run
        sys.exit(f"bench/_free_encoder.py: the embedding model runs on {backend} here ({why}); "
                 "the floor is measured on the ONNX backend only")
    onnx_backend.OnnxEncoder.encode = _free_encode  # type: ignore[method-assign]
    atexit.register(_report)
    from context_forensics.cli.common import main as ctxf_main

    sys.argv[0] = "ctxf"
    ctxf_main()


if __name__ == "__main__":
    main()
