"""How well the live scene matches the reference image: zero-normalised cross-correlation of the
two grey images over the workspace region (robust to a global brightness change, sensitive to an
object being somewhere else). 1 = identical layout, <= 0 = unrelated; reported clipped to 0..1."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

SIZE = (96, 72)  # the comparison grid (w, h): small enough to score at the stream rate


def load_rgb(path: str | Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _grey_roi(rgb: np.ndarray, roi: Sequence[float], size: tuple[int, int]) -> np.ndarray:
    import cv2

    h, w = rgb.shape[:2]
    x0, y0, x1, y1 = (int(round(roi[0] * w)), int(round(roi[1] * h)),
                      max(int(round(roi[2] * w)), 1), max(int(round(roi[3] * h)), 1))
    crop = np.ascontiguousarray(rgb[y0:y1, x0:x1, :3])
    grey = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY)
    return cv2.resize(grey, size, interpolation=cv2.INTER_AREA).astype(np.float64)


def alignment_score(live: np.ndarray, reference: np.ndarray, roi: Sequence[float] = (0, 0, 1, 1)) -> float:
    """ZNCC of live vs reference over `roi` (fractions x0, y0, x1, y1), clipped to 0..1."""
    a = _grey_roi(np.asarray(live), roi, SIZE)
    b = _grey_roi(np.asarray(reference), roi, SIZE)
    a -= a.mean()
    b -= b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    if denom < 1e-9:  # two flat images: identical if their means agree (both centred to zero here)
        return 1.0 if float(np.abs(a - b).max()) < 1e-6 else 0.0
    return float(np.clip((a * b).sum() / denom, 0.0, 1.0))
