"""LeRobot camera config for the harness's replay/test-pattern camera (type name "spabench_replay")."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.cameras.configs import CameraConfig

from spabench.bench.camera_sources import PATTERN  # one definition, shared with the config check


@CameraConfig.register_subclass("spabench_replay")
@dataclass
class SpabenchReplayCameraConfig(CameraConfig):
    """A camera that replays an .mp4/.npz file, or renders a numbered test pattern, at fps.

    source: "pattern" or a path to an .mp4 file or an .npz file holding `frames` (N, H, W, 3) uint8 RGB.
    label: distinguishes cameras rendering the pattern (it sets the pattern's colours).
    loop: replay the file again from the start when it ends; if False the camera is lost at the end.
    stamp_index: also encode the frame counter into replayed file frames (always on for the pattern).
    stall_every_s / stall_s: injected stalls (tests, benchmarks): every `stall_every_s` seconds after
        connect the camera delivers no new frame for `stall_s` seconds, then resumes on its clock
        (the missed frames are skipped, as a hardware camera's driver would). 0 = never.
    stall_blocks: during an injected stall read_latest() also blocks until the stall ends (a driver
        that hangs its caller), so the control loop stalls too.
    """

    source: str = PATTERN
    label: str = ""
    loop: bool = True
    stamp_index: bool = False
    warmup_s: float = 1.0
    stall_every_s: float = 0.0
    stall_s: float = 0.0
    stall_blocks: bool = False

    def __post_init__(self) -> None:
        for attr in ("fps", "width", "height"):
            value = getattr(self, attr)
            if value is None or isinstance(value, bool) or int(value) != value or value <= 0:
                raise ValueError(f"spabench_replay camera: `{attr}` must be a positive integer, got {value!r}")
        if self.width < 24:
            raise ValueError(f"spabench_replay camera: `width` must be >= 24 to hold the frame counter, "
                             f"got {self.width}")
        for attr in ("stall_every_s", "stall_s"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e6:
                raise ValueError(f"spabench_replay camera: `{attr}` must be a number >= 0 (seconds), got {value!r}")
        if self.source != PATTERN and not str(self.source).endswith((".mp4", ".npz")):
            raise ValueError(f"spabench_replay camera: `source` must be 'pattern' or an .mp4/.npz path, "
                             f"got {self.source!r}")
