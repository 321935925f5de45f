"""The bench: one LeRobot robot plus its cameras behind the safety envelope.

`Bench` holds what every robot shares (observe/act/hold/go_home/disconnect discipline, the
envelope, fault translation); a subclass only builds the LeRobot `Robot` (`_make_robot`) and may
add checks after connecting. `make_bench(cfg)` picks the subclass: so101 (LeRobot SO101Follower
over a Feetech bus) or any bench type registered with BenchConfig (the MuJoCo twin registers "sim").

Everything that reaches the robot goes through `SafetyEnvelope` (joint box, step bound, and the
Cartesian workspace envelope of hardware/bench.yaml over the arm's FK); every change it makes comes
back as a `Clamp` for the event log. Hardware failures surface as `BenchFault` (the attempt is invalid,
never a policy failure); refusals of the envelope as `SafetyError`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spabench.bench.config import BenchConfig
from spabench.bench.errors import BenchFault, MotionStopped, NonFiniteTarget
from spabench.bench.kinematics import arm_model
from spabench.bench.safety import (
    REASON_JOINT_LIMIT,
    REASON_MAX_RELATIVE_TARGET,
    REASON_ROBOT_CLIP,
    Clamp,
    SafetyEnvelope,
    WorkspaceEnvelope,
)
from spabench.errors import ConfigError, SafetyError
from spabench.suite.model import ArmEnvelope
from spabench.suite.vocabulary import GRIPPER, JOINTS

logger = logging.getLogger(__name__)

ROBOT_CLIP_TOLERANCE = 1e-4  # LeRobot's own threshold for reporting a clipped goal
# What drivers raise when hardware misbehaves (serial.SerialException is an OSError). Anything else
# is a programming error and propagates unchanged instead of being filed as an invalid attempt.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, RuntimeError, OSError)


@dataclass
class Observation:
    """What the robot measured at time t (monotonic): joints in vocabulary.JOINTS order, images by camera.

    image_times: per camera, the perf_counter time (CLOCK_MONOTONIC on Linux, the rollout's clock) at
    which the camera's read thread captured the frame, where the camera reports it (LeRobot's
    `latest_timestamp`); cameras without one (the twin renders on observe) are absent."""

    t: float
    state: np.ndarray
    images: dict[str, np.ndarray]
    extras: Mapping[str, Any] = field(default_factory=dict)
    image_times: dict[str, float] = field(default_factory=dict)


@dataclass
class ActResult:
    """What was actually sent to the robot and every clamp on the way (requested: the caller's target)."""

    sent: np.ndarray
    clamps: list[Clamp]
    requested: np.ndarray | None = None
    t: float = 0.0


@dataclass
class CameraFeed:
    """The bench's cameras opened on their own (Bench.open_cameras): `read()` gives every camera's
    latest frame by name; a camera that failed to open or to deliver is left out (and named in
    `errors`)."""

    names: tuple[str, ...]
    cameras: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    reader: Callable[[], dict[str, np.ndarray]] | None = None

    def read(self) -> dict[str, np.ndarray]:
        if self.reader is not None:
            return self.reader()
        out = {}
        for name, cam in self.cameras.items():
            try:
                out[name] = cam.read_latest()
            except DRIVER_ERRORS as exc:
                self.errors.setdefault(name, f"camera '{name}' stopped delivering frames: {exc}")
        return out


class Bench:
    """A LeRobot robot behind the safety envelope. Context manager: connect on enter, disconnect on exit."""

    kind = "generic"
    # A real arm moves in wall-clock time; a simulated one advances one period per act and needs
    # no sleeping (SimBench sets this False).
    paced = True
    # Camera frames rendered from a model (the twin): a still scene gives identical frames and the
    # rate is the loop's, so the camera check's frozen and slow rules do not apply (SimBench: True).
    rendered_cameras = False

    def __init__(self, cfg: BenchConfig, *, workspace: ArmEnvelope | None = None):
        """`workspace`: the Cartesian envelope (the session passes its suite's hardware/bench.yaml
        `arm_envelope`); None reads it from hardware/bench.yaml of the spabench root."""
        if not isinstance(cfg, BenchConfig):
            cfg = BenchConfig.from_mapping(cfg)
        self.cfg = cfg
        self.joints: tuple[str, ...] = JOINTS
        self.home_pose = np.array([cfg.home_pose[j] for j in self.joints], dtype=np.float64)
        self.envelope = SafetyEnvelope(cfg.joint_limits, cfg.max_relative_target, self.joints,
                                       workspace=self._workspace_envelope(workspace))
        self._robot = None
        self._connected = False
        self._keep_torque = False   # set by disconnect(keep_torque=...) for the close path
        self._observed_state: np.ndarray | None = None
        self.last_sent: np.ndarray | None = None
        self.open_gripper_first = False   # go_home opens the gripper first (set by HealthMonitor.protect)
        self.last_disconnect_error: BaseException | None = None

    # ------------------------------------------------------------------ properties
    @property
    def robot(self):
        """The LeRobot Robot (built on first use; connect() opens it)."""
        if self._robot is None:
            self._robot = self._make_robot()
        return self._robot

    @property
    def fps(self) -> int:
        return self.cfg.fps

    @property
    def calibration_file(self) -> str | None:
        """The absolute path of the calibration file the arm runs under (None: nothing to calibrate)."""
        return None

    @property
    def calibration_id(self) -> str:
        """Provenance of the joint calibration the episode was recorded under."""
        return f"{self.kind}:{self.cfg.robot_id}"

    @property
    def is_connected(self) -> bool:
        return self._connected

    @property
    def camera_names(self) -> tuple[str, ...]:
        return tuple(self.cfg.cameras)

    @property
    def camera_fps(self) -> dict[str, float]:
        """Nominal frame rate per camera (the recorder's yardstick for skipped frames)."""
        return {name: float(getattr(spec, "fps", None) or self.fps) for name, spec in self.cfg.cameras.items()}

    @property
    def camera_shapes(self) -> dict[str, tuple[int, int, int]]:
        """The frame shape (height, width, 3) each camera is configured for, a quarter turn
        (extra.rotation 90, -90 or 270) swapping the two. What the recorder starts its encoders with
        before the first trial; a camera that delivers another shape gets a new encoder then."""
        shapes = {}
        for name, spec in self.cfg.cameras.items():
            rotation = (spec.extra or {}).get("rotation", 0)
            quarter = isinstance(rotation, int) and not isinstance(rotation, bool) and abs(rotation) % 180 == 90
            shapes[name] = (spec.width, spec.height, 3) if quarter else (spec.height, spec.width, 3)
        return shapes

    def _workspace_envelope(self, spec: ArmEnvelope | None) -> WorkspaceEnvelope:
        """The Cartesian envelope over the arm model, refused before anything connects when the
        joint units are not degrees (the FK needs them) or a link lies outside at the home pose."""
        if not self.cfg.use_degrees:
            raise ConfigError("bench config, field 'use_degrees': false; the Cartesian workspace envelope "
                              "places the gripper from joint degrees (allowed: true)")
        if spec is None:
            spec = self._default_arm_envelope()
        envelope = WorkspaceEnvelope(spec, arm_model(self._arm_model_file()))
        worst = envelope.worst(self.home_pose)
        if worst.depth > 0:
            raise ConfigError(f"bench config, field 'home_pose': {self.cfg.home_pose} puts the "
                              f"{envelope.describe(worst)}, past the workspace envelope's {worst.rule!r} rule "
                              "(hardware/bench.yaml arm_envelope); move the home pose or the envelope")
        return envelope

    def _default_arm_envelope(self) -> ArmEnvelope:
        from spabench.paths import resolve
        from spabench.suite.loader import load_geometry

        return load_geometry(resolve("hardware") / "bench.yaml").arm_envelope

    def _arm_model_file(self) -> str | None:
        """The MJCF the FK reads (None: hardware/sim/so101.xml)."""
        return None

    # ------------------------------------------------------------------ hooks for subclasses
    def _make_robot(self):
        raise NotImplementedError(f"{type(self).__name__} must build its LeRobot robot in _make_robot()")

    def _before_connect(self) -> None:
        """Checks that need no hardware (files, ports). Raise a SpabenchError to refuse."""

    def _connect_robot(self, robot) -> None:
        """Open the robot without ever calibrating or prompting; a subclass may check things on the
        way (SO101Bench compares the calibration before LeRobot enables torque)."""
        robot.connect(calibrate=False)

    def _after_connect(self) -> None:
        """Checks on the connected robot. Raise to refuse; the bench then disconnects."""

    def _read_state(self) -> np.ndarray:
        """Fresh joint positions without cameras; the default reads a full observation."""
        raw = self.robot.get_observation()
        return np.array([raw[f"{j}.pos"] for j in self.joints], dtype=np.float64)

    def _send_hold(self, measured: np.ndarray) -> np.ndarray:
        """Command the measured position; return what was sent."""
        return self._send(measured)

    def _extras(self, raw: dict) -> Mapping[str, Any]:
        return {}

    # ------------------------------------------------------------------ motor health
    @property
    def health_config(self):
        """The bench's HealthConfig when it has servos to watch (the SO-101), else None."""
        return None

    def _read_health(self):
        raise NotImplementedError(f"{type(self).__name__} has no motor telemetry")

    def read_health(self):
        """One HealthSample of every motor (t = time.monotonic()); a bus failure is a BenchFault."""
        self._require_connected()
        try:
            return self._read_health()
        except DRIVER_ERRORS as exc:
            raise self._fault(exc, "read motor health") from exc

    def inspect_bus(self, say: Callable[[str], None] = lambda _: None):
        """The servo bus read with torque off for `spabench bench check` (a
        spabench.bench.inspection.BusReadout), or None where there is no servo bus (the twin). `say`
        shows progress (finding the port)."""
        return None

    @contextlib.contextmanager
    def open_cameras(self) -> Iterator[CameraFeed]:
        """Only the cameras, opened without the arm (`bench check` looks through them with torque
        off): a camera that does not open is named in `feed.errors` and the others still deliver."""
        cams = dict(getattr(self.robot, "cameras", {}) or {})
        feed = CameraFeed(tuple(self.camera_names))
        opened = []
        try:
            for name, cam in cams.items():
                try:
                    cam.connect()
                except DRIVER_ERRORS as exc:
                    feed.errors[name] = self._describe_camera_connect_error(
                        (name, str(getattr(cam.config, "type", type(cam).__name__)), str(getattr(
                            cam.config, "index_or_path", getattr(cam.config, "source", "?")))), exc)
                    continue
                opened.append(cam)
                feed.cameras[name] = cam
            yield feed
        finally:
            for cam in opened:
                with contextlib.suppress(Exception):
                    cam.disconnect()

    def health_monitor(self):
        """A HealthMonitor for the rollout loop, or None (no telemetry, or rate_hz 0)."""
        cfg = self.health_config
        if cfg is None or cfg.rate_hz <= 0:
            return None
        from spabench.bench.health import HealthMonitor

        return HealthMonitor(cfg, self.read_health, self.fps)

    def _force_close(self) -> None:
        """Release whatever is still open after a failed connect or disconnect (best effort)."""
        robot = self._robot
        for cam in getattr(robot, "cameras", {}).values():
            try:
                if cam.is_connected:
                    cam.disconnect()
            except Exception:  # noqa: BLE001 - best effort on the way out
                logger.debug("camera %s did not disconnect cleanly", cam, exc_info=True)

    def _describe_connect_error(self, exc: BaseException) -> str:
        return f"could not connect to the {self.kind} robot: {exc}"

    def _check_camera_devices(self) -> None:
        """A camera given as a device path that does not exist fails before the arm is touched."""
        for name, spec in dict(getattr(self.cfg, "cameras", {}) or {}).items():
            kind, device = getattr(spec, "type", None), str(getattr(spec, "index_or_path", ""))
            if kind == "opencv" and device.startswith("/dev/") and not os.path.exists(device):
                raise BenchFault(self._describe_camera_connect_error(
                    (str(name), kind, device), FileNotFoundError(f"{device} does not exist")),
                    component=f"camera:{name}")

    def _unopened_camera(self) -> tuple[str, str, str] | None:
        """(key, type, device) of the first camera the robot has not opened: LeRobot opens them in
        order after the bus, so that is the one whose connect failed."""
        cams = getattr(self._robot, "cameras", {}) or {}
        for name, cam in cams.items():
            if not getattr(cam, "is_connected", False):
                config = getattr(cam, "config", None)
                kind = getattr(config, "type", None) or type(cam).__name__
                device = next((getattr(config, attr) for attr in ("index_or_path", "serial_number_or_name",
                                                                   "server_address")
                               if getattr(config, attr, None) not in (None, "")), "?")
                return str(name), str(kind), str(device)
        return None

    def _describe_camera_connect_error(self, camera: tuple[str, str, str], exc: BaseException) -> str:
        name, kind, device = camera
        return (f"camera '{name}' ({kind} device {device}) could not be opened: {exc}\n"
                f"This is a camera problem, not the arm: check that the camera is plugged in and that "
                f"cameras.{name}.index_or_path in the bench config is its device (`lerobot-find-cameras "
                f"{kind}` lists them), and that no other program holds it. Nothing has moved.")

    # ------------------------------------------------------------------ lifecycle
    def connect(self) -> Bench:
        if self._connected:
            return self
        self.last_disconnect_error = None
        self._check_camera_devices()
        self._before_connect()
        robot = self.robot
        attempts = 1 + int(getattr(self.cfg, "connect_retries", 0))
        for attempt in range(attempts):
            try:
                self._connect_robot(robot)
                break
            except DRIVER_ERRORS as exc:
                camera = self._unopened_camera() if _component_of(exc) == "camera" else None
                self._force_close()
                if attempt + 1 < attempts:
                    logger.warning("bench %s: connect failed (%s); retrying", self.kind, exc)
                    continue
                if camera is not None:
                    raise BenchFault(self._describe_camera_connect_error(camera, exc),
                                     component=f"camera:{camera[0]}") from exc
                raise BenchFault(self._describe_connect_error(exc), component=_component_of(exc)) from exc
            except BaseException:
                self._force_close()
                raise
        try:
            self._after_connect()
        except BaseException:
            self._connected = True
            self.disconnect()
            raise
        self._connected = True
        self._observed_state = None
        logger.info("bench %s connected (%s)", self.kind, self.calibration_id)
        return self

    def disconnect(self, keep_torque: bool = False) -> None:
        """Idempotent. Disables torque when the config says so, unless `keep_torque` (the session
        asks for it after an e-stop or away from home: an arm not at rest would drop onto the
        scene); never raises (errors are logged)."""
        robot = self._robot
        was_connected, self._connected = self._connected, False
        self._observed_state = None
        if robot is None or not was_connected:
            return
        self._keep_torque = keep_torque
        config = getattr(robot, "config", None)
        if keep_torque and hasattr(config, "disable_torque_on_disconnect"):
            config.disable_torque_on_disconnect = False   # LeRobot's own disconnect then leaves it on
        try:
            if robot.is_connected:
                robot.disconnect()
        except Exception as exc:  # noqa: BLE001 - a dead bus must not mask the original error
            self.last_disconnect_error = exc
            logger.warning("bench %s: disconnect failed (%s); closing ports anyway", self.kind, exc)
        finally:
            self._force_close()

    # ------------------------------------------------------------------ optional: a bench that simulates
    # A simulated bench (the MuJoCo twin, spabench.sim.bench.SimBench) builds its scenes, keeps its own
    # clock and scores its rollouts; a real bench does none of it, and these defaults say so. The session
    # and the rollout loop call them on every bench instead of probing for the twin.
    def adopt_suite(self, suite) -> None:
        """The suite this session evaluates. A bench that scores rollouts itself (the twin) takes
        its success rules from it; a real bench is scored by a person and needs nothing."""

    def load_scene(self, scene) -> bool:
        """Build the scene from its specification, the arm staying where it is; True when the bench
        did. A real bench returns False: a person stages the scene."""
        return False

    def lockstep_clock(self) -> Callable[[], float] | None:
        """The bench's own clock (s) when it advances one control period per act(), so that a rollout
        runs in lockstep with it instead of the wall clock; None for a real bench (wall-clock time)."""
        return None

    def begin_episode(self) -> None:
        """The rollout timer started: a bench that scores itself starts its evaluator trace here.
        Nothing to do on a real bench."""

    def evaluate(self, scene=None, states=None) -> tuple[bool, str | None] | None:
        """(success, suggested failure mode) of the rollout since begin_episode(), when the bench can
        score it; `states` (T, 6) replaces the bench's own joint trajectory. None: a person scores."""
        return None

    def __enter__(self) -> Bench:
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.disconnect()

    # ------------------------------------------------------------------ sensing
    def _require_connected(self) -> None:
        if not self._connected:
            raise BenchFault(f"the {self.kind} bench is not connected; call connect() first")

    def observe(self) -> Observation:
        """Joint state (vocabulary.JOINTS order, float64) and the latest frame of every camera."""
        self._require_connected()
        t = time.monotonic()
        try:
            raw = self.robot.get_observation()
        except DRIVER_ERRORS as exc:
            raise self._fault(exc, "observe") from exc
        state = np.array([raw[f"{j}.pos"] for j in self.joints], dtype=np.float64)
        images = {name: raw[name] for name in self.camera_names if name in raw}
        self._observed_state = state
        return Observation(t=t, state=state, images=images, extras=self._extras(raw),
                           image_times=self._capture_times(images))

    def _capture_times(self, images: dict[str, np.ndarray]) -> dict[str, float]:
        """When each returned frame was captured, from the camera's own read-thread stamp.

        read_latest() returns the camera's `latest_frame` array itself. The same array as last time is
        the same (stale) frame with the same stamp. If a newer frame replaced it between read_latest()
        and this look-up, the returned frame is the one before, stamped one camera period earlier."""
        cams = getattr(self._robot, "cameras", None) or {}
        seen = self.__dict__.setdefault("_last_frames", {})
        out: dict[str, float] = {}
        for name, image in images.items():
            cam = cams.get(name)
            exact = getattr(cam, "capture_time_of", None)  # cameras that can say (spabench_replay)
            if callable(exact) and (stamp := exact(image)) is not None:
                out[name] = float(stamp)
                continue
            if cam is None or getattr(cam, "latest_timestamp", None) is None:
                continue
            lock = getattr(cam, "frame_lock", None) or contextlib.nullcontext()
            with lock:  # frame and stamp as one pair (LeRobot's cameras update both under it)
                stamp, latest = cam.latest_timestamp, getattr(cam, "latest_frame", image)
            previous = seen.get(name)
            if previous is not None and previous[0] is image:
                stamp = previous[1]
            elif latest is not image:
                stamp -= 1.0 / float(getattr(cam, "fps", None) or self.fps)
            seen[name] = (image, float(stamp))
            out[name] = float(stamp)
        return out

    def measure(self) -> np.ndarray:
        """Fresh joint positions (no cameras)."""
        self._require_connected()
        try:
            return self._read_state()
        except DRIVER_ERRORS as exc:
            raise self._fault(exc, "read joint positions") from exc

    def at_home(self) -> bool:
        """Whether every joint is within twice home_tolerance_deg of the home pose (measured now):
        only there may the arm be let go (torque off) without dropping onto the scene."""
        measured = self.measure()
        return bool(np.max(np.abs(measured - self.home_pose)) <= 2 * self.cfg.home_tolerance_deg)

    # ------------------------------------------------------------------ acting
    def act(self, target) -> ActResult:
        """Send one joint target through the envelope.

        Clamped relative to the state of the preceding observe() (or a fresh reading if act is
        called twice without observing). A non-finite target is never sent: the bench holds its
        measured position and raises NonFiniteTarget (a SafetyError) for the caller to log.
        """
        self._require_connected()
        t = time.monotonic()
        requested = np.asarray(target, dtype=np.float64)
        bad = self.envelope.non_finite_joints(requested)  # also checks the shape
        if bad:
            self._observed_state = None
            self.hold()
            raise NonFiniteTarget(f"non-finite target for joint(s) {bad}: {requested.tolist()}; "
                                  "the arm holds its measured position", joints=bad)
        current = self._observed_state if self._observed_state is not None else self.measure()
        self._observed_state = None
        safe, clamps = self.envelope.check_target(requested, current, self.last_sent)
        sent = self._send(safe)
        clamps += self._robot_clips(safe, sent)
        for clamp in clamps:
            logger.debug("clamp %s", clamp)
        return ActResult(sent=sent, clamps=clamps, requested=requested, t=t)

    def _robot_clips(self, safe: np.ndarray, sent: np.ndarray) -> list[Clamp]:
        """Where the driver sent something other than the envelope's output (LeRobot's own clip)."""
        return [Clamp(j, float(want), float(got), REASON_ROBOT_CLIP)
                for j, want, got in zip(self.joints, safe, sent, strict=True)
                if abs(float(got) - float(want)) > ROBOT_CLIP_TOLERANCE]

    def _send(self, safe: np.ndarray) -> np.ndarray:
        action = {f"{j}.pos": float(v) for j, v in zip(self.joints, safe, strict=True)}
        try:
            out = self.robot.send_action(action)
        except DRIVER_ERRORS as exc:
            raise self._fault(exc, "send action") from exc
        sent = np.array([float(out.get(f"{j}.pos", action[f"{j}.pos"])) for j in self.joints], dtype=np.float64)
        self.last_sent = sent
        return sent

    def hold(self) -> ActResult:
        """Command the measured position, so the arm stops where it is."""
        self._require_connected()
        t = time.monotonic()
        measured = self.measure()
        sent = self._send_hold(measured)
        self._observed_state = None
        return ActResult(sent=sent, clamps=[], requested=measured, t=t)

    def go_home(self, *, speed_deg_s: float | None = None, timeout_s: float | None = None,
                should_stop: Callable[[], bool] | None = None) -> list[ActResult]:
        """Drive to cfg.home_pose in straight joint-space steps of at most speed/fps per joint per tick.

        Blocking, paced at the bench fps, every step through the envelope (a joint outside the
        joint limits may move back in at the same bounded speed). Returns the steps sent. Raises
        BenchFault if the measured pose is not within home_tolerance_deg by the timeout (each leg's
        own when `timeout_s` is None). `should_stop` (cheap, called before every step, e.g.
        StopControl.estopped): when it says True the arm holds where it is and MotionStopped is
        raised, so an e-stop pressed on another thread stops the motion within one step.

        When `open_gripper_first` is set (the health guard found the gripper pressing on something),
        the gripper first opens to its upper joint limit with the arm still, the other joints then go
        home with it open, and it closes to its home value last: closed on the way, it would squeeze the
        object again and never reach home. A homing that arrives clears the flag.
        """
        self._require_connected()
        speed = self.cfg.home_speed_deg_s if speed_deg_s is None else float(speed_deg_s)
        if not math.isfinite(speed) or speed <= 0:
            raise SafetyError(f"go_home: speed_deg_s={speed_deg_s!r} (allowed: a finite float > 0)")
        steps: list[ActResult] = []
        if self.open_gripper_first:
            g = self.joints.index(GRIPPER)
            opened = self.measure()
            opened[g] = self.envelope.hi[g]
            logger.info("bench %s: the gripper pressed on something: opening it before homing", self.kind)
            self._drive_to(opened, speed, timeout_s, should_stop, steps)
            arm_home = self.home_pose.copy()
            arm_home[g] = self.envelope.hi[g]
            self._drive_to(arm_home, speed, timeout_s, should_stop, steps)
        self._drive_to(self.home_pose, speed, timeout_s, should_stop, steps)
        self.open_gripper_first = False
        return steps

    def _drive_to(self, goal: np.ndarray, speed: float, timeout_s: float | None,
                  should_stop: Callable[[], bool] | None, steps: list[ActResult]) -> None:
        """One straight joint-space leg of go_home (its docstring), appending the steps sent to `steps`."""
        step = speed / self.fps
        period = 1.0 / self.fps
        measured = self.measure()
        command = measured.copy()
        distance = float(np.max(np.abs(goal - command)))
        if timeout_s is None:
            timeout_s = 1.5 * distance / speed + 2.0
        deadline = time.monotonic() + timeout_s
        tolerance = self.cfg.home_tolerance_deg
        next_tick = time.monotonic()
        while True:
            if should_stop is not None and should_stop():
                self._observed_state = None
                held = self.hold()
                at = held.requested if held.requested is not None else held.sent
                pose = {j: round(float(v), 1) for j, v in zip(self.joints, at, strict=True)}
                raise MotionStopped(f"going home stopped on request after {len(steps)} step(s); the arm holds "
                                    f"at {pose}", steps=steps)
            t = time.monotonic()
            wanted = command + np.clip(goal - command, -step, step)
            # The joint-limit box, widened to the measured pose so a joint outside it can come back.
            boxed = np.clip(wanted, np.minimum(self.envelope.lo, measured), np.maximum(self.envelope.hi, measured))
            clamps = [Clamp(j, float(w), float(b), REASON_JOINT_LIMIT)
                      for j, w, b in zip(self.joints, wanted, boxed, strict=True) if w != b]
            safe, step_clamps = self._home_step(boxed, measured)
            clamps += step_clamps
            command = safe.copy()  # never run ahead of what the arm was actually asked to do
            sent = self._send(safe)
            clamps += self._robot_clips(safe, sent)
            steps.append(ActResult(sent=sent, clamps=clamps, requested=wanted, t=t))
            measured = self.measure()
            if np.array_equal(command, goal) and np.all(np.abs(measured - goal) <= tolerance):
                break
            if time.monotonic() > deadline:
                off = {j: round(float(m), 2) for j, m, h in zip(self.joints, measured, goal, strict=True)
                       if abs(m - h) > tolerance}
                raise BenchFault(f"the arm did not reach the home pose within {timeout_s:.1f} s; joints still "
                                 f"off by more than {tolerance} deg: {off} (home: {self.cfg.home_pose}). "
                                 "Check for an obstacle or a disabled motor.")
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay > 0 and self.paced:
                time.sleep(delay)
            else:
                next_tick = time.monotonic()
        self._observed_state = None

    def _home_step(self, command: np.ndarray, measured: np.ndarray) -> tuple[np.ndarray, list[Clamp]]:
        """The envelope's step bound around the measured position; the box already widened to it."""
        step = self.envelope.max_relative_target
        safe = np.clip(command, measured - step, measured + step)
        clamps = [Clamp(j, float(c), float(s), REASON_MAX_RELATIVE_TARGET)
                  for j, c, s in zip(self.joints, command, safe, strict=True) if c != s]
        return safe, clamps

    # ------------------------------------------------------------------ faults
    def _fault(self, exc: BaseException, what: str) -> BenchFault:
        """Translate a driver exception (one of DRIVER_ERRORS) into a BenchFault naming the component."""
        component = _component_of(exc)
        if component.startswith("camera"):
            name = self._failing_camera()
            component = f"camera:{name}" if name else "camera"
            return BenchFault(f"camera '{name or '?'}' stopped delivering frames during {what}: {exc}. "
                              "Check its USB cable; the attempt is invalid, not a policy failure.",
                              component=component)
        return BenchFault(self._describe_bus_fault(exc, what), component=component)

    def _describe_bus_fault(self, exc: BaseException, what: str) -> str:
        return (f"the {self.kind} robot failed during {what}: {exc}. The attempt is invalid, "
                "not a policy failure.")

    def _failing_camera(self) -> str | None:
        cams = getattr(self._robot, "cameras", {}) or {}
        for name, cam in cams.items():
            try:
                cam.read_latest()
            except Exception:  # noqa: BLE001 - probing which camera is gone
                return name
        return None


def _component_of(exc: BaseException) -> str:
    """'camera' if the exception was raised inside a camera implementation, else 'bus'."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    for frame in reversed(frames):
        path = frame.filename.replace("\\", "/")
        if "/cameras/" in path:
            return "camera"
        if "/motors/" in path or "scservo_sdk" in path or "/serial/" in path:
            return "bus"
    return "bus"


def make_bench(cfg: BenchConfig | Any, **kwargs: Any) -> Bench:
    """Build (not connect) the bench the config names; its registered config class knows how."""
    if not isinstance(cfg, BenchConfig):
        cfg = BenchConfig.from_mapping(cfg)
    return cfg.make_bench(**kwargs)
