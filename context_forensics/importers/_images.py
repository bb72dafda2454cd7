"""Image placeholders: what an image in a log costs the model, never its pixels.

Dimensions are read from the header of a PNG, GIF, JPEG or WebP payload (base64 decoded only
as far as the header), or taken from the log; the payload itself is dropped.
"""

from __future__ import annotations

from typing import Any


def _image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from the header of a PNG, GIF, JPEG or WebP image."""
    import struct

    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            w = int.from_bytes(data[24:27], "little") + 1
            h = int.from_bytes(data[27:30], "little") + 1
            return w, h
        if chunk == b"VP8 " and len(data) >= 30:
            w, h = struct.unpack("<HH", data[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if chunk == b"VP8L" and len(data) >= 25:
            b = data[21:25]
            w = 1 + (((b[1] & 0x3F) << 8) | b[0])
            h = 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
            return w, h
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                return w, h
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


def image_part(
    *,
    base64_data: str | None = None,
    url: str | None = None,
    media_type: str | None = None,
    detail: str | None = None,
    width: int | None = None,
    height: int | None = None,
) -> dict[str, Any]:
    """A placeholder for an image: dimensions when they can be read, never the pixels.

    Base64 payloads are decoded only far enough to read the header, then dropped, so a
    screenshot-heavy log does not bloat the store. ``data:`` URLs are treated as base64.
    """
    import base64
    import binascii

    part: dict[str, Any] = {"type": "image"}
    if url and url.startswith("data:"):
        header, _, payload = url.partition(",")
        media_type = media_type or header[5:].split(";")[0] or None
        base64_data, url = payload, None
    if base64_data:
        part["source"] = "base64"
        part["bytes"] = len(base64_data) * 3 // 4
        try:
            size = _image_size(base64.b64decode(base64_data[:65536], validate=False))
        except (binascii.Error, ValueError):
            size = None
        if size and width is None:
            width, height = size
    elif url:
        part["source"] = "url"
        part["url"] = url
    if media_type:
        part["media_type"] = media_type
    if detail:
        part["detail"] = detail
    try:
        w, h = int(width or 0), int(height or 0)
    except (TypeError, ValueError, OverflowError):  # "auto", garbage or infinity as a size: no dimensions
        w = h = 0
    if w > 0 and h > 0:
        part["width"], part["height"] = w, h
    return part
