"""What an image costs in a prompt: OpenAI's tiles and patches, Claude's area rule, estimates.

An image part whose dimensions the log keeps is costed by the provider's published formula;
one without them gets the provider's typical cost and a flag saying it was assumed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# OpenAI tile models: (base, per 512px tile) for high detail; low detail costs ``base``.
_OPENAI_TILE_COSTS: tuple[tuple[str, tuple[int, int]], ...] = (
    ("gpt-4o-mini", (2833, 5667)),
    ("gpt-5-mini", (0, 0)),  # patch model, below
    ("gpt-5-nano", (0, 0)),
    ("gpt-5", (70, 140)),
    ("o1", (75, 150)),
    ("o3", (75, 150)),
    ("computer-use", (65, 129)),
    ("gpt-4.1-mini", (0, 0)),
    ("gpt-4.1-nano", (0, 0)),
    ("o4-mini", (0, 0)),
)
_DEFAULT_TILE_COST = (85, 170)  # gpt-4o, gpt-4.1, gpt-4-turbo (vision)
# 32px-patch models: token multiplier; at most 1536 patches.
_OPENAI_PATCH_MULT = {"gpt-5-mini": 1.62, "gpt-5-nano": 2.46, "gpt-4.1-mini": 1.62,
                      "gpt-4.1-nano": 2.46, "o4-mini": 1.72}
UNKNOWN_IMAGE_OPENAI = 765  # a 1024x1024 image at high detail on gpt-4o (4 tiles)
UNKNOWN_IMAGE_ANTHROPIC = 1600  # the most one image can cost before Claude scales it down
UNKNOWN_IMAGE_OTHER = 258  # Gemini: one image up to 384px; larger ones are tiled


def _model_key(name: str | None) -> str:
    n = (name or "").lower()
    return n.rsplit("/", 1)[-1]


def openai_image_tokens(width: int, height: int, detail: str | None = "auto", model: str | None = None) -> int:
    """OpenAI's image cost: tiles (fit in 2048², shortest side 768, 512px tiles) or 32px patches."""
    m = _model_key(model)
    detail = (detail or "auto").lower()
    for prefix, mult in _OPENAI_PATCH_MULT.items():
        if m.startswith(prefix):
            return _patch_tokens(width, height, mult)
    base, per_tile = next((c for p, c in _OPENAI_TILE_COSTS if m.startswith(p) and c != (0, 0)),
                          _DEFAULT_TILE_COST)
    if detail == "low":
        return base
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    tiles = math.ceil(int(w) / 512) * math.ceil(int(h) / 512)
    return base + per_tile * tiles


def _patch_tokens(width: int, height: int, mult: float, cap: int = 1536) -> int:
    # OpenAI's worked example: 1800x2400 -> 1056x1408 -> 33x44 = 1452 patches.
    w, h = float(width), float(height)
    patches = math.ceil(w / 32) * math.ceil(h / 32)
    if patches > cap:
        s = math.sqrt(cap * 32 * 32 / (w * h))
        s *= min(math.floor(w * s / 32) / (w * s / 32), math.floor(h * s / 32) / (h * s / 32))
        w, h = int(w * s), int(h * s)
        patches = min(cap, math.ceil(w / 32) * math.ceil(h / 32))
    return math.ceil(patches * mult)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Claude's image cost, width·height/750, after scaling the long edge to at most 1568px."""
    w, h = float(width), float(height)
    if max(w, h) > 1568:
        s = 1568 / max(w, h)
        w, h = w * s, h * s
    return min(UNKNOWN_IMAGE_ANTHROPIC, math.ceil(int(w) * int(h) / 750))


def _dims(part: Mapping[str, Any]) -> tuple[int, int] | None:
    w, h = part.get("width"), part.get("height")
    if isinstance(w, (int, float)) and isinstance(h, (int, float)) and w > 0 and h > 0:
        return int(w), int(h)
    return None


def openai_image_part(part: Mapping[str, Any], model: str | None) -> tuple[int, str | None]:
    """Tokens of one image part sent to an OpenAI model, and a flag when its cost is assumed.

    Without dimensions a low-detail image still has its fixed cost on a tile model; any
    other image without them is estimated at ``UNKNOWN_IMAGE_OPENAI``.
    """
    detail = part.get("detail")
    dims = _dims(part)
    if dims:
        return openai_image_tokens(*dims, detail=detail, model=model), None
    if (detail or "").lower() == "low" and not any(
            _model_key(model).startswith(k) for k in _OPENAI_PATCH_MULT):
        return openai_image_tokens(1, 1, detail="low", model=model), None
    est = UNKNOWN_IMAGE_OPENAI
    return est, f"image without dimensions: estimated {est}"


def anthropic_image_part(part: Mapping[str, Any]) -> tuple[int, str | None]:
    """Tokens of one image part sent to Claude, and a flag when its cost is assumed."""
    dims = _dims(part)
    if dims:
        return anthropic_image_tokens(*dims), None
    return UNKNOWN_IMAGE_ANTHROPIC, f"image without dimensions: estimated {UNKNOWN_IMAGE_ANTHROPIC}"
