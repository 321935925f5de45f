"""Motor health during a campaign: telemetry samples and the guards that protect the servos.

A `HealthSample` is one sync read of all six motors (temperature, current, load, voltage, Status),
taken by the bench (`Bench.read_health`, None where there is no servo bus). During a rollout the
`HealthMonitor` takes one sample every `fps / rate_hz` ticks, in the slack after the tick's command,
and checks every tick:

- stall: a motor's current (its latest sample) above its threshold while its position error (the
  goal the servo was given on the previous tick minus the measured position) stays above the
  tolerance for the persistence time;
- overheat: a motor above the hard temperature limit;
- undervoltage: the supply below the servo's operating range (the session stops);
- servo_error: a Status error bit.

A trip ends the attempt (an invalid reason of the protocol, spabench.suite.rules); the loop then calls
`protect`: the arm holds at its measured position and a pressing gripper backs off. Between trials
the session waits for hot motors to cool (`hot_motors`, `cool_enough`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spabench.bench.config import HealthConfig
from spabench.suite.vocabulary import GRIPPER, JOINTS

# STS3215 Status register (address 65): bit -> what the servo reports (Feetech STS manual).
STATUS_BITS: dict[int, str] = {0: "voltage", 1: "angle_sensor", 2: "temperature", 3: "current", 4: "angle",
                               5: "overload"}
# Event kinds of the guards (the invalid reasons are the protocol's: spabench.suite.rules).
EVENT_STALL = "motor_stall"
EVENT_OVERHEAT = "overheat"
EVENT_UNDERVOLTAGE = "undervoltage"
EVENT_SERVO_ERROR = "servo_error"


def status_names(bits: int) -> list[str]:
    return [name for bit, name in STATUS_BITS.items() if bits >> bit & 1] or ([f"0x{bits:02x}"] if bits else [])


@dataclass
class HealthSample:
    """One telemetry read of every motor, in vocabulary.JOINTS order. t: seconds on the caller's clock."""

    t: float
    temperature_c: np.ndarray
    current_ma: np.ndarray
    load: np.ndarray            # per mille of full torque, signed (Present_Load)
    voltage_v: np.ndarray
    status: np.ndarray          # Status bits per motor (0: no error)

    def as_dict(self) -> dict[str, Any]:
        return {"t": round(float(self.t), 4),
                "temperature_c": dict(zip(JOINTS, self.temperature_c.astype(float).tolist(), strict=True)),
                "current_ma": dict(zip(JOINTS, np.round(self.current_ma, 1).tolist(), strict=True)),
                "voltage_v": dict(zip(JOINTS, np.round(self.voltage_v, 2).tolist(), strict=True)),
                "status": dict(zip(JOINTS, self.status.astype(int).tolist(), strict=True))}


@dataclass
class HealthTrip:
    """Why a guard ended the attempt: the protocol's invalid reason, the event, and what to do."""

    reason: str                 # invalid reason: stall | overheat | undervoltage | servo_error
    kind: str                   # event kind
    detail: dict[str, Any]
    joint: str | None = None
    message: str = ""


@dataclass
class AttemptHealth:
    """Per-attempt summary for the ledger: what the motors went through."""

    samples: int = 0
    max_temperature_c: dict[str, float] = field(default_factory=dict)
    time_over_current_s: dict[str, float] = field(default_factory=lambda: {j: 0.0 for j in JOINTS})
    max_current_ma: dict[str, float] = field(default_factory=dict)
    min_voltage_v: float | None = None
    status_bits: dict[str, int] = field(default_factory=dict)
    stall_events: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "max_temperature_c": self.max_temperature_c,
                "time_over_current_s": {j: round(v, 3) for j, v in self.time_over_current_s.items()},
                "max_current_ma": self.max_current_ma, "min_voltage_v": self.min_voltage_v,
                "status_bits": self.status_bits, "stall_events": self.stall_events}


def hot_motors(sample: HealthSample, threshold_c: float) -> dict[str, float]:
    """Motors at or above threshold_c, with their temperature."""
    return {j: float(t) for j, t in zip(JOINTS, sample.temperature_c, strict=True) if t >= threshold_c}


@dataclass
class CoolingEstimate:
    """How long a cool-down will take, from the cooling rate measured over the last readings.

    The servos report whole degrees, so the rate comes from the moments the hottest reading fell: when
    it first shows r, the temperature has just passed r + 1. The last `falls_used` falls within
    `window_s` give the rate (the latest, as the rate changes); until there are two (or while a motor still warms up) eta_s is None and the display says
    "estimating". A motor cools toward the room's temperature, more slowly as it nears it (first order),
    and the coolest motor is the nearest reading of the room there is: the estimate follows that curve
    from the measured rate (a straight line when the coolest motor is not below the threshold)."""

    resume_c: float
    window_s: float = 60.0
    falls: list[tuple[float, float]] = field(default_factory=list)   # (t, temperature passed)
    last: float | None = None
    room: float | None = None                                        # the coolest motor's reading
    falls_used: int = 4                                              # the latest falls the rate comes from

    def add(self, t: float, sample: HealthSample) -> dict[str, Any]:
        """Take one reading; returns what the display shows: hottest motor, its temperature, the resume
        threshold and the estimated seconds left (eta_s None: estimating)."""
        i = int(np.argmax(sample.temperature_c))
        hottest = float(sample.temperature_c[i])
        if self.last is not None and hottest > self.last:
            self.falls = []                                # warming again: no cooling rate to go by
        elif self.last is not None and hottest < self.last:
            self.falls.append((float(t), hottest + 1.0))
        self.last = hottest
        self.room = float(np.min(sample.temperature_c))
        self.falls = [f for f in self.falls if f[0] >= t - self.window_s]
        return {"motor": JOINTS[i], "temperature_c": round(hottest, 1), "resume_c": self.resume_c,
                "eta_s": self.eta_s(t)}

    def eta_s(self, now: float) -> float | None:
        if len(self.falls) < 2:
            return None
        recent = self.falls[-self.falls_used:]
        t = np.array([f[0] for f in recent])
        c = np.array([f[1] for f in recent])
        if np.ptp(t) <= 0 or c[-1] >= c[0]:
            return None
        room = self.room
        if room is None or room >= self.resume_c - 1.0 or c[-1] <= room:
            rate = -float(np.polyfit(t, c, 1)[0])          # degrees per second, a straight line
            if rate <= 0:
                return None
            return max(0.0, (c[-1] - rate * (now - t[-1]) - self.resume_c) / rate)
        k = -float(np.polyfit(t, np.log(c - room), 1)[0])  # dT/dt = -k (T - room)
        if k <= 0:
            return None
        temperature = room + (c[-1] - room) * math.exp(-k * (now - t[-1]))
        if temperature <= self.resume_c:
            return 0.0
        return math.log((temperature - room) / (self.resume_c - room)) / k


def eta_text(eta_s: float | None) -> str:
    """'about 1 min 20 s left', or 'estimating the time left' while there is no rate to go by."""
    if eta_s is None:
        return "estimating the time left"
    seconds = int(round(eta_s))
    return f"about {seconds // 60} min {seconds % 60} s left" if seconds >= 60 else f"about {seconds} s left"


def temperatures_text(sample: HealthSample) -> str:
    return ", ".join(f"{j} {float(t):.0f} C" for j, t in zip(JOINTS, sample.temperature_c, strict=True))


class HealthMonitor:
    """The guards of one bench over a rollout. `read()` returns a HealthSample (t is overwritten)."""

    def __init__(self, cfg: HealthConfig, read: Callable[[], HealthSample], fps: float):
        self.cfg = cfg
        self.read = read
        self.every = max(1, int(round(float(fps) / cfg.rate_hz)))
        self.threshold = np.array([cfg.stall_current_ma[j] for j in JOINTS], dtype=float)
        self.gripper = JOINTS.index(GRIPPER)
        self.start()

    def start(self) -> None:
        """Forget the previous attempt."""
        self.summary = AttemptHealth()
        self.latest: HealthSample | None = None
        self.last_trip: HealthTrip | None = None   # what ended this attempt (the cool-down message says it)
        self._goal: np.ndarray | None = None
        self._onset = np.full(len(JOINTS), np.nan)
        self._error = np.zeros(len(JOINTS))

    # ---- per tick -----------------------------------------------------------------------------
    def sample_due(self, index: int) -> bool:
        return index % self.every == 0

    def take(self, t: float) -> HealthSample:
        """Read the motors now (t: the loop's time of the read) and update the summary."""
        sample = self.read()
        sample.t = float(t)
        s = self.summary
        if self.latest is not None:
            dt = sample.t - self.latest.t
            over = self.latest.current_ma > self.threshold
            for i, j in enumerate(JOINTS):
                if over[i]:
                    s.time_over_current_s[j] += dt
        s.samples += 1
        for i, j in enumerate(JOINTS):
            s.max_temperature_c[j] = max(s.max_temperature_c.get(j, -273.0), float(sample.temperature_c[i]))
            s.max_current_ma[j] = round(max(s.max_current_ma.get(j, 0.0), float(sample.current_ma[i])), 1)
            if sample.status[i]:
                s.status_bits[j] = s.status_bits.get(j, 0) | int(sample.status[i])
        volts = float(np.min(sample.voltage_v))
        s.min_voltage_v = volts if s.min_voltage_v is None else min(s.min_voltage_v, volts)
        self.latest = sample
        return sample

    def check(self, t: float, measured: np.ndarray, sent: np.ndarray | None, fresh: bool) -> HealthTrip | None:
        """The guards at tick time t: `measured` the joints read this tick, `sent` the goal written this
        tick (None: nothing was sent), `fresh` whether a sample was taken this tick (the temperature,
        voltage and Status guards look at each sample once). The position error of the stall guard
        uses the goal of the previous tick: the one the servo was driving toward when measured."""
        trip = self._check_sample(self.latest) if fresh and self.latest is not None else None
        goal = self._goal
        if sent is not None and np.all(np.isfinite(sent)):
            self._goal = np.asarray(sent, dtype=float).copy()
        if trip is not None or goal is None or self.latest is None:
            self.last_trip = trip or self.last_trip
            return trip
        error = goal - np.asarray(measured, dtype=float)
        self._error = error
        pressing = (self.latest.current_ma > self.threshold) & (np.abs(error) > self.cfg.stall_error)
        self._onset[~pressing] = np.nan
        self._onset[pressing & np.isnan(self._onset)] = t
        lasted = t - self._onset
        stalled = [i for i in range(len(JOINTS)) if pressing[i] and lasted[i] >= self.cfg.stall_persistence_s]
        if not stalled:
            return None
        i = max(stalled, key=lambda k: lasted[k])
        joint = JOINTS[i]
        detail: dict[str, Any] = {"motor": joint, "current_ma": round(float(self.latest.current_ma[i]), 1),
                  "threshold_ma": float(self.threshold[i]), "error": round(float(error[i]), 2),
                  "tolerance": self.cfg.stall_error, "duration_s": round(float(lasted[i]), 3),
                  "onset_t": round(float(self._onset[i]), 4)}
        self.summary.stall_events.append(dict(detail))
        self.last_trip = HealthTrip(
            "stall", EVENT_STALL, detail, joint,
            f"{joint} stalled: {detail['current_ma']:.0f} mA (threshold {self.threshold[i]:.0f}) "
            f"with a position error of {abs(detail['error']):.1f} for {detail['duration_s']:.2f} s")
        return self.last_trip

    def _check_sample(self, sample: HealthSample) -> HealthTrip | None:
        cfg = self.cfg
        low = [(j, float(v)) for j, v in zip(JOINTS, sample.voltage_v, strict=True) if v < cfg.min_voltage_v]
        if low:
            joint, volts = min(low, key=lambda p: p[1])
            detail = {"motor": joint, "voltage_v": round(volts, 2), "min_voltage_v": cfg.min_voltage_v}
            return HealthTrip("undervoltage", EVENT_UNDERVOLTAGE, detail, joint,
                              f"supply voltage {volts:.1f} V at {joint} is below {cfg.min_voltage_v:g} V: "
                              "check the power supply")
        hot = [(j, float(v)) for j, v in zip(JOINTS, sample.temperature_c, strict=True) if v >= cfg.max_temperature_c]
        if hot:
            joint, temp = max(hot, key=lambda p: p[1])
            detail = {"motor": joint, "temperature_c": temp, "max_temperature_c": cfg.max_temperature_c}
            return HealthTrip("overheat", EVENT_OVERHEAT, detail, joint,
                              f"{joint} at {temp:.0f} C reached the limit {cfg.max_temperature_c:g} C")
        errors = [(j, int(b)) for j, b in zip(JOINTS, sample.status, strict=True) if b]
        if errors:
            joint, bits = errors[0]
            detail = {"motor": joint, "status": bits, "errors": status_names(bits),
                      "all": {j: b for j, b in errors}}
            return HealthTrip("servo_error", EVENT_SERVO_ERROR, detail, joint,
                              f"{joint} reports servo error(s) {', '.join(status_names(bits))} (Status 0x{bits:02x})")
        return None

    # ---- after a trip -------------------------------------------------------------------------
    def protect(self, bench) -> list:
        """Hold at the measured position; a gripper still pressing (its current above threshold, or
        its goal beyond its position) backs off by gripper_backoff, away from where it pressed, and the
        bench's next homing opens it before moving the arm (the object may still be between the fingers).
        Returns the ActResults sent (for the clamp log)."""
        held = bench.hold()
        results = [held]
        g = self.gripper
        pressing_dir = float(np.sign(self._error[g]))
        current_high = self.latest is not None and self.latest.current_ma[g] > self.threshold[g]
        gripper_stall = self.last_trip is not None and self.last_trip.kind == EVENT_STALL and self.last_trip.joint == GRIPPER
        if gripper_stall or (pressing_dir and (current_high or abs(self._error[g]) > self.cfg.stall_error)):
            bench.open_gripper_first = True
        if pressing_dir and (current_high or abs(self._error[g]) > self.cfg.stall_error):
            target = np.asarray(held.requested, dtype=float).copy()
            target[g] -= pressing_dir * self.cfg.gripper_backoff
            results.append(bench.act(target))
        return results
