"""LeRobot config of the twin robot, registered as robot type "spabench_sim".

Lives in its own module (like LeRobot's config_<robot>.py) so that `make_robot_from_config` finds
the robot class next to it: SimRobotConfig -> spabench.sim.sim_robot.SimRobot. Importing this
module does not import MuJoCo.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lerobot.robots.config import RobotConfig

from spabench.errors import ConfigError
from spabench.sim.bench_config import SimRenderOptions
from spabench.suite.vocabulary import CAMERAS, JOINTS


@dataclass
class SimCameraConfig:
    """A twin camera's image size (the fps field satisfies RobotConfig's camera check; the twin
    renders whenever get_observation() is called)."""

    width: int = 320
    height: int = 240
    fps: int = 30


def _default_cameras() -> dict[str, SimCameraConfig]:
    return {name: SimCameraConfig() for name in CAMERAS}


@RobotConfig.register_subclass("spabench_sim")
@dataclass(kw_only=True)
class SimRobotConfig(RobotConfig, SimRenderOptions):
    """The MuJoCo twin of the Spa-Bench bench as a LeRobot robot.

    fps: control rate; every send_action advances the physics by 1/fps seconds of sim time.
    max_relative_target: per-step bound on |target - measured| (degrees; gripper units), as in
        SOFollowerConfig; None disables it.
    cameras: {name: SimCameraConfig} among vocabulary.CAMERAS; the observation holds exactly these.
    render_cameras: which of them render on each get_observation() (None: all). A camera that is
        configured but not rendered returns its last rendered frame, or a black frame of its
        configured size until it has rendered once.
    render_every: render the cameras on every n-th get_observation() only (1: every step); the
        other steps repeat the last frames. Cheap demos use 2-3; the recorded videos then hold
        repeated frames, which the twin notes say.
    shadows / offsamples: rendering quality (off by default: ~10x cheaper under llvmpipe).
    tasks_root / hardware_root: where the inventory and bench geometry are read (spabench.suite).
    robot_xml: the arm's MJCF (None: hardware/sim/so101.xml).
    initial_joints: arm pose at connect (None: spabench.sim.home.DEFAULT_SIM_HOME).
    scene_id: a suite scene to load at connect (None: the empty bench).
    settle_s: seconds of physics after a scene loads, arm held, before anything is observed.
    max_timestep_s: the longest physics step; a control period is split into as many equal steps as
        that needs (0.002: 17 per period at 30 fps).
    """

    fps: int = 30
    max_relative_target: float | dict[str, float] | None = 10.0
    cameras: dict[str, SimCameraConfig] = field(default_factory=_default_cameras)
    initial_joints: dict[str, float] | None = None

    def __post_init__(self):
        # calibration_dir is a field of LeRobot's RobotConfig, an untyped base mypy sees as Any
        if self.calibration_dir is None:  # type: ignore[has-type]
            # nothing to calibrate; keep LeRobot from creating folders in the user's HF cache
            self.calibration_dir = Path(tempfile.gettempdir()) / "spabench_sim_calibration"
        self.cameras = {name: (c if isinstance(c, SimCameraConfig) else SimCameraConfig(**dict(c)))
                        for name, c in (self.cameras or {}).items()}
        super().__post_init__()
        unknown = sorted(set(self.cameras) - set(CAMERAS))
        if unknown:
            raise ConfigError(f"sim robot config, field 'cameras': unknown camera(s) {unknown} "
                              f"(allowed: {', '.join(CAMERAS)})")
        for name, cam in self.cameras.items():
            for attr in ("width", "height"):
                value = getattr(cam, attr)
                if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 4096:
                    raise ConfigError(f"sim robot config, field 'cameras.{name}.{attr}': {value!r} "
                                      "(allowed: a positive integer up to 4096)")
        if self.render_cameras is not None:
            bad = sorted(set(self.render_cameras) - set(self.cameras))
            if bad:
                raise ConfigError(f"sim robot config, field 'render_cameras': {bad} are not configured "
                                  f"cameras (allowed: {', '.join(self.cameras) or 'none configured'})")
        if isinstance(self.render_every, bool) or not isinstance(self.render_every, int) \
                or not 1 <= self.render_every <= 30:
            raise ConfigError(f"sim robot config, field 'render_every': {self.render_every!r} "
                              "(allowed: an integer from 1 to 30)")
        if isinstance(self.max_timestep_s, bool) or not isinstance(self.max_timestep_s, (int, float)) \
                or not 0.0005 <= self.max_timestep_s <= 0.005:
            raise ConfigError(f"sim robot config, field 'max_timestep_s': {self.max_timestep_s!r} "
                              "(allowed: a number of seconds from 0.0005 to 0.005)")
        if isinstance(self.fps, bool) or not isinstance(self.fps, int) or self.fps <= 0:
            raise ConfigError(f"sim robot config, field 'fps': {self.fps!r} (allowed: a positive integer)")
        mrt = self.max_relative_target
        if isinstance(mrt, dict):
            bad = sorted(set(mrt) ^ set(JOINTS))
            if bad:
                raise ConfigError(f"sim robot config, field 'max_relative_target': joints {bad} "
                                  f"(allowed: exactly {', '.join(JOINTS)})")
            if any(float(v) <= 0 for v in mrt.values()):
                raise ConfigError("sim robot config, field 'max_relative_target': values must be > 0")
        elif mrt is not None and float(mrt) <= 0:
            raise ConfigError(f"sim robot config, field 'max_relative_target': {mrt!r} "
                              "(allowed: a float > 0, a {joint: float} mapping, or null)")
        if self.initial_joints is not None:
            bad = sorted(set(self.initial_joints) ^ set(JOINTS))
            if bad:
                raise ConfigError(f"sim robot config, field 'initial_joints': joints {bad} "
                                  f"(allowed: exactly {', '.join(JOINTS)})")
        if not (isinstance(self.settle_s, (int, float)) and 0 <= float(self.settle_s) <= 10):
            raise ConfigError(f"sim robot config, field 'settle_s': {self.settle_s!r} (allowed: 0..10 s)")

    @property
    def rendered(self) -> list[str]:
        return list(self.cameras) if self.render_cameras is None else list(self.render_cameras)
