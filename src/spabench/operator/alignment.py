"""How well the live scene matches the reference image, and the gate it sets at "scene ready".

The score is the zero-normalised cross-correlation of the two grey images over the workspace region
(robust to a global brightness change, sensitive to an object being somewhere else): 1 = identical
layout, <= 0 = unrelated; reported clipped to 0..1. An attempt whose scene scores below the
threshold on any reference camera starts only with an override reason a person gave (terminal and
browser alike); the lowest score and the reason are stored with the attempt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # numpy is imported where a score is computed: the config reads the defaults only
    import numpy as np

# The cameras whose reference frames the live scene is compared with (the bench page overlays them).
ALIGNMENT_CAMERAS = ("middle", "overhead")
# operator.console.alignment_threshold and .workspace_roi when not set (console.config.ConsoleConfig
# checks both when the config is built; the terminal's gate reads the same section).
DEFAULT_THRESHOLD = 0.85
DEFAULT_ROI = (0.1, 0.1, 0.9, 0.9)


def alignment_settings(console: Mapping[str, Any] | None) -> tuple[float, list[float]]:
    """(threshold, workspace region) from the operator group's `console` section."""
    console = console or {}
    return (float(console.get("alignment_threshold", DEFAULT_THRESHOLD)),
            [float(v) for v in console.get("workspace_roi", DEFAULT_ROI)])
SIZE = (96, 72)  # the comparison grid (w, h): small enough to score at the stream rate


def load_rgb(path: str | Path) -> np.ndarray:
    import numpy as np
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _grey_roi(rgb: np.ndarray, roi: Sequence[float], size: tuple[int, int]) -> np.ndarray:
    import cv2
    import numpy as np

    h, w = rgb.shape[:2]
    x0, y0, x1, y1 = (int(round(roi[0] * w)), int(round(roi[1] * h)),
                      max(int(round(roi[2] * w)), 1), max(int(round(roi[3] * h)), 1))
    crop = np.ascontiguousarray(rgb[y0:y1, x0:x1, :3])
    grey = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY)
    return cv2.resize(grey, size, interpolation=cv2.INTER_AREA).astype(np.float64)


def alignment_score(live: np.ndarray, reference: np.ndarray, roi: Sequence[float] = (0, 0, 1, 1)) -> float:
    """ZNCC of live vs reference over `roi` (fractions x0, y0, x1, y1), clipped to 0..1."""
    import numpy as np

    a = _grey_roi(np.asarray(live), roi, SIZE)
    b = _grey_roi(np.asarray(reference), roi, SIZE)
    a -= a.mean()
    b -= b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    if denom < 1e-9:  # two flat images: identical if their means agree (both centred to zero here)
        return 1.0 if float(np.abs(a - b).max()) < 1e-6 else 0.0
    return float(np.clip((a * b).sum() / denom, 0.0, 1.0))


# An override reason is a person's words: "y" or "ok" typed from habit at the prompt is not one.
MIN_REASON_CHARS = 3


@dataclass(frozen=True)
class AlignmentVerdict:
    """The alignment at "scene ready": per-camera scores against the reference (none on the first
    attempt of an evaluation, which has no reference yet) and the threshold they are held to."""

    threshold: float
    reference: bool
    scores: Mapping[str, float] = field(default_factory=dict)

    @property
    def value(self) -> float | None:
        """The lowest camera score (the one the gate judges), None without a reference or a score."""
        return min(self.scores.values()) if self.reference and self.scores else None

    @property
    def below(self) -> bool:
        """True when an override is needed: a reference exists and the scene does not match it (or
        could not be scored, e.g. no frame from a reference camera)."""
        return self.reference and (self.value is None or self.value < self.threshold)

    def text(self) -> str:
        if not self.reference:
            return "No reference yet: alignment is not scored for this attempt."
        if not self.scores:
            return f"Alignment could not be measured (no live frame of a reference camera); threshold {self.threshold:g}"
        shown = " · ".join(f"{cam} {v:.3f}" for cam, v in self.scores.items())
        return (f"Alignment with the reference: {shown} (threshold {self.threshold:g}): "
                + ("below the threshold" if self.below else "matches"))


def override_reason(text: Any) -> str | None:
    """The override reason as stored (stripped), or None when `text` is not one (empty, too short)."""
    if not isinstance(text, str):
        return None
    text = " ".join(text.split())
    return text if len(text) >= MIN_REASON_CHARS else None


def override_needed(verdict: AlignmentVerdict) -> str:
    """What the operator is told when the gate holds the attempt back."""
    worst = "not measured" if verdict.value is None else f"{verdict.value:.3f}"
    return (f"alignment {worst} is below the threshold {verdict.threshold:g}: fix the scene, or give a reason "
            f"(at least {MIN_REASON_CHARS} characters) to start anyway; it is stored with the attempt")


def reason_too_short(text: Any) -> str | None:
    """What the operator is told when the reason given is text but too short to be one; None otherwise
    (no text: `override_needed` says what to do)."""
    if not isinstance(text, str) or not text.strip() or override_reason(text) is not None:
        return None
    return (f"the reason {' '.join(text.split())!r} is too short: a reason needs at least {MIN_REASON_CHARS} "
            "characters; nothing started")


def alignment_event(verdict: AlignmentVerdict, reason: str | None, **extra: Any) -> dict[str, Any]:
    """The 'scene_alignment' event's payload, logged with the attempt that starts."""
    return {"scores": dict(verdict.scores), "threshold": verdict.threshold, "reference": verdict.reference,
            "matched": verdict.reference and not verdict.below, "alignment": verdict.value,
            "below_threshold": verdict.below, "override_reason": reason if verdict.below else None, **extra}
