"""The checks before each trial that keep an attempt from starting on a bench that cannot finish it:
room on disk for its whole recording, and motors cool enough and a supply high enough to drive them.

The policy servers' own pre-flight (reachable, the card fits, the pinned identity) is in
`spabench.rollout.policies`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spabench.bench.errors import BenchFault
from spabench.suite.vocabulary import JOINTS

BUS_SILENT_LIMIT_S = 10.0
"""How long the health reads between trials may go unanswered before the bus counts as dead. A read is
one sync read with LeRobot's retries, all inside about 150 ms: a host busy for a moment (an encoder
starting, a browser opening a page) can outlast that, and ending a paused session for it costs the
operator a restart. Ten seconds without one answer is a dead bus, and the session ends as a bench fault."""

STATUS_CLEAR_S = 2.0
"""How long an error bit in a motor's Status may stay set before a trial counts it as stuck. A servo in
overload protection keeps its bit until it is power-cycled; a trial started on it ends at its first
health sample, and the next one too: one instruction ends the session instead."""


def check_space(bench: Any, recorder: Any, campaign_dir: Path, timer_s: float, trial: Any, card: Any) -> None:
    """Refuse to start an attempt whose recording would not fit on the campaign's disk."""
    from spabench.rollout.space import check_free_space, expected_episode_bytes

    cams = bench.cfg.cameras or {}
    shapes = {name: (int(getattr(c, "height", 480)), int(getattr(c, "width", 640)), 3)
              for name, c in cams.items()}
    expected = expected_episode_bytes(timer_s, float(card.control_hz), shapes,
                                      campaign_dir / "episodes", video=recorder.config.video)
    what = f"the next attempt ({trial.trial_id}, {timer_s:g} s)"
    check_free_space(campaign_dir / "episodes", expected, what)
    if os.stat(campaign_dir).st_dev != os.stat(campaign_dir / "episodes").st_dev:
        check_free_space(campaign_dir, 0, f"the ledger of {what}")


def motors_ready(health: Any, bench: Any, ledger: Any, controls: Any, operator: Any,
                 say: Callable[[str], None], campaign_dir: Path | None = None) -> bool:
    """Before a trial: a motor at or above the warning temperature pauses the session until every
    motor is below the resume temperature (shown in the terminal and on the bench page); a supply
    below the servos' range stops it, and so does a Status error bit that stays set for STATUS_CLEAR_S
    (with the instruction to power-cycle the arm and run `campaign_dir` again). False: the session ends
    (e-stop, undervoltage, a stuck Status bit). A bus silent for BUS_SILENT_LIMIT_S raises its BenchFault."""
    if health is None:
        return True
    from spabench.bench.health import hot_motors

    cfg = health.cfg
    sample = _read_health(bench, cfg.cool_poll_s, controls, say)
    if sample is None:
        return False
    if float(sample.voltage_v.min()) < cfg.min_voltage_v:
        ledger.log_event(None, "undervoltage", {"voltage_v": sample.voltage_v.tolist(),
                                                "min_voltage_v": cfg.min_voltage_v})
        say(f"session stopped: the servo supply reads {sample.voltage_v.min():.1f} V, below "
            f"{cfg.min_voltage_v:g} V (bench.health.min_voltage_v). Check the power supply, then resume "
            "with the same command")
        return False
    hot = hot_motors(sample, cfg.warn_temperature_c)
    if hot:
        sample = _cool_down(health, bench, ledger, controls, operator, say, sample, hot)
        if sample is None:
            return False
    return _status_clear(health, bench, ledger, controls, say, sample, campaign_dir)


def _cool_down(health: Any, bench: Any, ledger: Any, controls: Any, operator: Any, say: Callable[[str], None],
               sample: Any, hot: dict[str, float]) -> Any:
    """Wait until every motor is below the resume temperature, showing the hottest motor, its
    temperature, the threshold, an estimate of the time left and where the arm is; the last sample, or
    None when the operator stopped the session meanwhile."""
    from spabench.bench.health import CoolingEstimate, eta_text, temperatures_text

    cfg = health.cfg
    controls.stage = "cooling down"
    started, first = time.monotonic(), sample
    arm = _arm_text(health, bench)
    estimate = CoolingEstimate(cfg.resume_temperature_c)
    say(f"motors hot ({', '.join(f'{j} {t:.0f} C' for j, t in hot.items())}; warning at "
        f"{cfg.warn_temperature_c:g} C): pausing before the next trial until every motor is below "
        f"{cfg.resume_temperature_c:g} C. {arm}")
    while float(sample.temperature_c.max()) >= cfg.resume_temperature_c:
        waited = time.monotonic() - started
        cooling = {**estimate.add(sample.t, sample), "waited_s": round(waited, 1), "arm": arm}
        text = (f"cooling down: hottest motor {cooling['motor']} at {cooling['temperature_c']:.0f} C, resume below "
                f"{cfg.resume_temperature_c:g} C, {eta_text(cooling['eta_s'])}; {waited:.0f} s so far "
                f"({temperatures_text(sample)})")
        say(text)
        operator.show_health(text, cooling)
        if not _pause(cfg.cool_poll_s, controls):
            return None
        sample = _read_health(bench, cfg.cool_poll_s, controls, say)
        if sample is None:
            return None
    waited = time.monotonic() - started
    ledger.log_event(None, "cool_down", {
        "waited_s": round(waited, 1), "hot": hot, "resume_temperature_c": cfg.resume_temperature_c,
        "before_c": dict(zip(JOINTS, first.temperature_c.tolist(), strict=False)),
        "after_c": dict(zip(JOINTS, sample.temperature_c.tolist(), strict=False))})
    text = f"motors cooled below {cfg.resume_temperature_c:g} C after {waited:.0f} s ({temperatures_text(sample)}); continuing"
    say(text)
    operator.show_health(text)
    return sample


def _arm_text(health: Any, bench: Any) -> str:
    """Where the arm waits during the cool-down and what the operator does meanwhile. After an overheat
    mid-rollout the arm holds where the guard stopped it (it is not driven home hot)."""
    from spabench.bench.health import EVENT_OVERHEAT

    resume = f"{health.cfg.resume_temperature_c:g} C"
    trip = getattr(health, "last_trip", None)
    try:
        homed = bool(bench.at_home())
    except Exception:  # noqa: BLE001 - the health reads say whether the bus answers
        homed = False
    stop = "To end the session instead, press the e-stop, support the arm, then switch its power off."
    if trip is not None and trip.kind == EVENT_OVERHEAT:
        return (f"The overheat of {trip.joint} stopped the last rollout: the arm holds at its pose there, torque on. "
                f"It goes home before the next trial once every motor is below {resume}. Leave it as it is and "
                f"do not move it by hand. {stop}")
    if homed:
        return f"The arm is homed, torque on; the next trial starts once every motor is below {resume}. {stop}"
    return (f"The arm holds at its pose, torque on; it goes home before the next trial once every motor is "
            f"below {resume}. Do not move it by hand. {stop}")


def _status_clear(health: Any, bench: Any, ledger: Any, controls: Any, say: Callable[[str], None], sample: Any,
                  campaign_dir: Path | None) -> bool:
    """True when no motor reports a Status error bit, or the bits clear within STATUS_CLEAR_S. Else
    the session ends with one instruction (and a 'servo_error_stuck' ledger event): a trial started
    now would end at its first health sample, and so would every one after it."""
    from spabench.bench.health import status_names

    deadline = time.monotonic() + STATUS_CLEAR_S
    while sample.status.any() and time.monotonic() < deadline:
        if not _pause(health.cfg.cool_poll_s, controls):
            return False
        sample = _read_health(bench, health.cfg.cool_poll_s, controls, say)
        if sample is None:
            return False
    errors = {j: int(b) for j, b in zip(JOINTS, sample.status, strict=True) if b}
    if not errors:
        return True
    joint, bits = next(iter(errors.items()))
    ledger.log_event(None, "servo_error_stuck", {"motor": joint, "status": bits, "errors": status_names(bits),
                                                 "all": errors})
    command = f"`spabench run campaign={campaign_dir}`" if campaign_dir is not None else "the same `spabench run`"
    say(f"session stopped before the next trial: motor '{joint}' reports Status 0x{bits:02x} "
        f"({', '.join(status_names(bits))}) that does not clear: power-cycle the arm, then run {command} again")
    return False


def _pause(seconds: float, controls: Any) -> bool:
    """Wait, watching the e-stop. False: the operator stopped the session."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if controls.estopped():
            return False
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
    return not controls.estopped()


def _read_health(bench: Any, poll_s: float, controls: Any, say: Callable[[str], None]) -> Any:
    """One HealthSample; a read the bus did not answer is tried again every poll_s until
    BUS_SILENT_LIMIT_S has passed without an answer (then the BenchFault ends the session). None: the
    operator stopped the session meanwhile."""
    silent_since = None
    while True:
        try:
            return bench.read_health()
        except BenchFault as exc:
            now = time.monotonic()
            if silent_since is None:
                silent_since = now
                say(f"the servo bus did not answer a health read ({exc}); trying again every {poll_s:g} s "
                    f"for up to {BUS_SILENT_LIMIT_S:g} s")
            elif now - silent_since >= BUS_SILENT_LIMIT_S:
                raise
        if not _pause(poll_s, controls):
            return None
