"""Token counting: tokenizers from offline assets, chat framing, cached counts, calibration and
recorded-vs-computed fidelity."""
