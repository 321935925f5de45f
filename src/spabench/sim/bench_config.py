"""The twin's bench type, "sim": registered with spabench's BenchConfig registry by the twin itself.

Importing spabench.sim imports this module, so `bench: {type: sim}` is known wherever the twin is;
the bench package never imports the twin. Light: no MuJoCo, no LeRobot robot classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from spabench.bench.config import BenchConfig, CameraSpec
from spabench.config import check_fields, group, typed_node


@dataclass
class SimRenderOptions:
    """The twin robot's own options (SimRobotConfig has them too, by inheritance)."""

    render_cameras: list[str] | None = None
    render_every: int = 1
    shadows: bool = False
    offsamples: int = 0
    tasks_root: str = "tasks"
    hardware_root: str = "hardware"
    robot_xml: str | None = None
    scene_id: str | None = None
    settle_s: float = 0.25
    max_timestep_s: float = 0.002


@dataclass
class SimOptions(SimRenderOptions):
    """The `sim:` block of a twin bench file (conf/bench/sim.yaml documents each option).

    render_cameras: which cameras render each step (None: all configured); render_every: render on
    every n-th step only; shadows / offsamples: rendering quality (off: ~10x cheaper under software
    GL); tasks_root / hardware_root: where the inventory and bench geometry are read; robot_xml:
    the arm's MJCF (None: hardware/sim/so101.xml); scene_id: a scene to load at connect;
    settle_s: physics time after a scene loads; max_timestep_s: the longest physics step;
    privileged: add extras["privileged"] (the scene state the scripted stand-in reads) to observations.
    """

    privileged: bool = True

    def __post_init__(self) -> None:
        check_fields(self, "bench config", "sim.")
        if self.render_cameras is not None:
            self.render_cameras = list(self.render_cameras)

    def robot_options(self) -> dict[str, Any]:
        """The options SimRobotConfig takes (everything but `privileged`, which the bench handles)."""
        return {f.name: getattr(self, f.name) for f in fields(SimRenderOptions)}


@BenchConfig.register_subclass("sim")
@dataclass
class SimBenchConfig(BenchConfig):
    """The MuJoCo twin (conf/bench/sim.yaml): the cameras' width/height matter, `type` and
    `index_or_path` mean nothing to the twin."""

    robot_id: str = "spabench_twin"
    sim: SimOptions = field(default_factory=SimOptions)
    commissioned: ClassVar[bool] = False   # rendered cameras, no servo bus: `run` asks for no bench check

    def __post_init__(self) -> None:
        self.sim = typed_node(SimOptions, self.sim or {}, "bench config", "sim.")
        super().__post_init__()

    def check_camera(self, name: str, spec: CameraSpec) -> None:
        """The twin renders every camera: only its sizes matter (declared on CameraSpec, checked with the bench)."""

    def make_bench(self, **world: Any):
        from spabench.sim.bench import SimBench

        return SimBench(self, **world)


def bench_group() -> Any:
    """The `bench` group field of a command's config: any registered bench type (so101, sim)."""
    return group("the robot and its cameras (conf/bench/)", "spabench.bench.config:bench_config",
                 "spabench.sim.bench_config:BenchConfig")   # importing this module registered the twin
