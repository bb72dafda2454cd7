"""The four labels a token figure carries, saying how far it can be trusted.

- ``exact``: the model's own tokenizer and a framing formula checked against recorded usage
  (OpenAI: 3 per message, +1 per name, 3 for reply priming, tool schemas and tool traffic as
  ``framing.py`` says);
- ``recorded``: read from the log's usage (not computed here);
- ``calibrated``: computed, then mapped through a per-session fit to the recorded usage
  (``tokens/calibration.py``, applied in ``tokens/fidelity.py``);
- ``estimated``: a stand-in tokenizer (Claude, Gemini: no offline tokenizer exists), the
  UTF-8-bytes/4 guess of ``approx``, or a part whose cost the log cannot tell (an image
  without dimensions). Each such part leaves a flag saying what was assumed. A vendor's own
  vocabulary that no recorded usage has confirmed (Mistral, DeepSeek, Llama, Qwen:
  ``tokenizers.STATUS_VENDOR``) is estimated too, with that reason, except in a session whose
  recorded usage it matches, where it is exact (``fidelity._settle_vendor``).
"""

from __future__ import annotations

EXACT = "exact"
RECORDED = "recorded"
CALIBRATED = "calibrated"
ESTIMATED = "estimated"
FIGURE_KINDS = (EXACT, RECORDED, CALIBRATED, ESTIMATED)
# The words a vendor vocabulary's note carries while no recorded usage has confirmed it
# (fidelity._settle_vendor writes the note among a replay's flags; render/replay.py shows it).
UNVERIFIED = "not verified against recorded usage"
