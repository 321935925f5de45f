"""LeRobot camera config for the harness's replay/test-pattern camera (type name "spabench_replay")."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.cameras.configs import CameraConfig

PATTERN = "pattern"


@CameraConfig.register_subclass("spabench_replay")
@dataclass
class SpabenchReplayCameraConfig(CameraConfig):
    """A camera that replays an .mp4/.npz file, or renders a numbered test pattern, at fps.

    source: "pattern" or a path to an .mp4 file or an .npz file holding `frames` (N, H, W, 3) uint8 RGB.
    label: distinguishes cameras rendering the pattern (it sets the pattern's colours).
    loop: replay the file again from the start when it ends; if False the camera is lost at the end.
    stamp_index: also encode the frame counter into replayed file frames (always on for the pattern).
    """

    source: str = PATTERN
    label: str = ""
    loop: bool = True
    stamp_index: bool = False
    warmup_s: float = 1.0

    def __post_init__(self) -> None:
        for attr in ("fps", "width", "height"):
            value = getattr(self, attr)
            if value is None or isinstance(value, bool) or int(value) != value or value <= 0:
                raise ValueError(f"spabench_replay camera: `{attr}` must be a positive integer, got {value!r}")
        if self.width < 24:
            raise ValueError(f"spabench_replay camera: `width` must be >= 24 to hold the frame counter, "
                             f"got {self.width}")
        if self.source != PATTERN and not str(self.source).endswith((".mp4", ".npz")):
            raise ValueError(f"spabench_replay camera: `source` must be 'pattern' or an .mp4/.npz path, "
                             f"got {self.source!r}")
