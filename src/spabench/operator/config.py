"""The operator config group (conf/operator/*.yaml): who resets scenes and scores, and run options.

No LeRobot/torch imports: the CLI validates this before anything touches hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spabench.config import finite_floats, group, typed_node
from spabench.configtools import plain_container
from spabench.errors import ConfigError

OPERATOR_TYPES: tuple[str, ...] = ("terminal", "unattended", "auto", "web")
CODECS: tuple[str, ...] = ("libx264", "mpeg4")
# libx264's presets (x264 --help); mpeg4 ignores the preset
X264_PRESETS: tuple[str, ...] = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower",
                                 "veryslow", "placebo")
# A machine scorer's label; a person operator (terminal, web) is asked for their name at session start
# unless operator.rater gives it. Unattended sessions never score.
DEFAULT_RATERS = {"terminal": "", "unattended": "", "auto": "sim_evaluator", "web": ""}
PERSON_OPERATORS = ("terminal", "web")


@dataclass
class OperatorConfig:
    """type: terminal (a person at the bench: checklist, ready gate, keys, score prompt),
    unattended (records without prompts; attempts stay unscored for `spabench score`),
    auto (the twin: scenes are loaded and scored by the sim evaluator),
    web (a person at the bench, in the browser console: spabench.console; `console` holds its
    ConsoleConfig fields (spabench.console.config): host, port, token, stream rate, alignment threshold...).

    timer_s: the rollout timer of a dry run (a counted run refuses any other than the planned one).
    reference_camera / reference_fallback: the camera whose first frame is the scene reference.
    prefill_from_motion: pre-fill no-intervention / no-movement scores from motion onset.
    recorder: episode recorder options (flush_s, codec libx264|mpeg4, preset, crf, queue_frames, video).
    rater: who scores (terminal, web): a person's name, stored with every score; left out, the
    session asks for it once at its start (the terminal prompt, the browser's camera check).
    server_wait_s: after a policy server fault, how long `run` waits for the server to answer again
    before stopping (0: stop at once). No attempt is recorded while it is down.
    """

    type: str = "terminal"
    rater: str = ""
    timer_s: float | None = None
    go_home_after: bool = True
    keys: bool = True
    status_line: bool = True
    reference_camera: str = "overhead"
    reference_fallback: str = "middle"
    prefill_from_motion: bool = True
    wait_videos_s: float = 300.0
    server_wait_s: float = 0.0
    recorder: dict[str, Any] = field(default_factory=dict)
    console: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = "operator config, field"
        finite_floats(self, "operator config")
        if self.type not in OPERATOR_TYPES:
            raise ConfigError(f"{where} 'type': {self.type!r} (allowed: {', '.join(OPERATOR_TYPES)})")
        if self.rater and self.type in PERSON_OPERATORS:
            from spabench.operator.base import RATER_RULE, person_rater

            if person_rater(self.rater) is None:
                raise ConfigError(f"{where} 'rater': {self.rater!r} names no person (allowed: {RATER_RULE}; "
                                  "leave it out to be asked at the start of the session)")
            self.rater = person_rater(self.rater) or ""
        if not self.rater:
            self.rater = DEFAULT_RATERS[self.type]
        if self.timer_s is not None and not self.timer_s > 0:
            raise ConfigError(f"{where} 'timer_s': {self.timer_s!r} (allowed: null or seconds > 0)")
        if not self.server_wait_s >= 0:
            raise ConfigError(f"{where} 'server_wait_s': {self.server_wait_s!r} (allowed: seconds >= 0)")
        from spabench.suite.vocabulary import CAMERAS

        for name in ("reference_camera", "reference_fallback"):
            if getattr(self, name) not in CAMERAS:
                raise ConfigError(f"{where} '{name}': {getattr(self, name)!r} (allowed: {', '.join(CAMERAS)})")
        if not self.wait_videos_s > 0:
            raise ConfigError(f"{where} 'wait_videos_s': {self.wait_videos_s!r} (allowed: seconds > 0)")
        from spabench.record.recorder import RecorderConfig

        given = dict(plain_container(self.recorder) or {})
        typed = typed_node(RecorderConfig, given, "operator config, recorder")   # only the given keys are kept
        finite_floats(typed, "operator config", "recorder.")
        rec = {key: getattr(typed, key) for key in given}
        if "codec" in rec and rec["codec"] not in CODECS:
            raise ConfigError(f"{where} 'recorder.codec': {rec['codec']!r} (allowed: {', '.join(CODECS)})")
        if "preset" in rec and rec["preset"] not in X264_PRESETS:
            raise ConfigError(f"{where} 'recorder.preset': {rec['preset']!r} (allowed: {', '.join(X264_PRESETS)})")
        if "crf" in rec and not 0 <= rec["crf"] <= 51:
            raise ConfigError(f"{where} 'recorder.crf': {rec['crf']!r} (allowed: an integer 0..51)")
        if "flush_s" in rec and rec["flush_s"] <= 0:
            raise ConfigError(f"{where} 'recorder.flush_s': {rec['flush_s']!r} (allowed: seconds > 0)")
        if "queue_frames" in rec and rec["queue_frames"] < 2:
            raise ConfigError(f"{where} 'recorder.queue_frames': {rec['queue_frames']!r} (allowed: an integer >= 2)")
        self.recorder = rec
        # typed by the console package (spabench.console.config.ConsoleConfig); the root config checks
        # it when it builds this group (spabench.config.GROUP_SECTIONS), before anything connects
        self.console = dict(plain_container(self.console) or {})

    @classmethod
    def from_mapping(cls, data: Any) -> OperatorConfig:
        return typed_node(cls, data, "operator config")

    def recorder_config(self):
        from spabench.record.recorder import RecorderConfig

        return RecorderConfig(**self.recorder)


def operator_config(data: Any) -> OperatorConfig:
    """The `operator` group's typed object (built when a command's config names the group)."""
    return OperatorConfig.from_mapping(data)


def operator_group() -> Any:
    """The `operator` group field of a command that never opens the console (its section is kept as given)."""
    return group("who scores (conf/operator/)", "spabench.operator.config:operator_config",
                 "spabench.operator.config:OperatorConfig")
