"""The numbered test pattern: each frame carries its camera frame index in a top band of cells.

24 cells across the top band hold the index bit by bit (white = 1, most significant first), large
enough to survive MP4 encoding at 640x480, so a recorder test can count dropped frames.
"""

from __future__ import annotations

import zlib

import numpy as np

INDEX_BITS = 24


def band_height(height: int) -> int:
    return max(4, height // 16)


def base_image(width: int, height: int, label: str = "") -> np.ndarray:
    """A smooth colour gradient whose tint depends on label (so cameras look different)."""
    seed = zlib.crc32(label.encode())
    tint = np.array([(seed >> s) & 0xFF for s in (0, 8, 16)], dtype=np.float32)
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    img = 40.0 + 0.5 * tint[None, None, :] * (0.5 + 0.5 * xs) + 60.0 * ys
    return np.clip(img, 0, 255).astype(np.uint8)


def stamp_index(img: np.ndarray, index: int) -> None:
    """Write index into img's top band in place (and draw a bar that moves with it)."""
    h, w = img.shape[:2]
    bh = band_height(h)
    cell = w // INDEX_BITS
    value = int(index) & ((1 << INDEX_BITS) - 1)
    for bit in range(INDEX_BITS):
        on = (value >> (INDEX_BITS - 1 - bit)) & 1
        img[:bh, bit * cell:(bit + 1) * cell] = 255 if on else 0
    img[:bh, INDEX_BITS * cell:] = 0
    x = (int(index) * 3) % w
    img[bh:, x:x + 2] = (255, 255, 0)


def decode_index(img: np.ndarray) -> int:
    """Read the frame index back from a stamped frame (tolerates lossy compression)."""
    h, w = img.shape[:2]
    bh = band_height(h)
    cell = w // INDEX_BITS
    value = 0
    for bit in range(INDEX_BITS):
        x0, x1 = bit * cell + cell // 4, bit * cell + max(cell // 4 + 1, 3 * cell // 4)
        patch = img[bh // 4: max(bh // 4 + 1, 3 * bh // 4), x0:x1]
        value = (value << 1) | int(patch.mean() > 127.5)
    return value


def render(width: int, height: int, index: int, base: np.ndarray | None = None, label: str = "") -> np.ndarray:
    img = (base if base is not None else base_image(width, height, label)).copy()
    stamp_index(img, index)
    return img
