"""The operator config group (conf/operator/*.yaml): who resets scenes and scores, and run options.

No LeRobot/torch imports: the CLI validates this before anything touches hardware.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from spabench.config import check_fields, field_error, group, opt, typed_node
from spabench.configtools import plain_container
from spabench.suite.vocabulary import CAMERAS

OPERATOR_TYPES: tuple[str, ...] = ("terminal", "unattended", "auto", "web")
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

    type: str = opt("terminal", choices=OPERATOR_TYPES)
    rater: str = ""
    timer_s: float | None = opt(None, gt=0)
    go_home_after: bool = True
    keys: bool = True
    status_line: bool = True
    reference_camera: str = opt("overhead", choices=CAMERAS)
    reference_fallback: str = opt("middle", choices=CAMERAS)
    prefill_from_motion: bool = True
    wait_videos_s: float = opt(300.0, gt=0)
    server_wait_s: float = opt(0.0, lo=0)
    recorder: dict[str, Any] = field(default_factory=dict)
    console: Any = field(default_factory=dict)   # a mapping of ConsoleConfig fields (see __post_init__)

    def __post_init__(self) -> None:
        check_fields(self, "operator config")
        if self.rater and self.type in PERSON_OPERATORS:
            from spabench.operator.base import RATER_RULE, person_rater

            if person_rater(self.rater) is None:
                raise field_error("operator config", "rater", f"{self.rater!r} names no person (allowed: "
                                  f"{RATER_RULE}; leave it out to be asked at the start of the session)")
            self.rater = person_rater(self.rater) or ""
        if not self.rater:
            self.rater = DEFAULT_RATERS[self.type]
        from spabench.record.recorder import RecorderConfig

        given = dict(plain_container(self.recorder) or {})   # RecorderConfig checks its own ranges
        typed = typed_node(RecorderConfig, given, "operator config", "recorder.")
        self.recorder = {key: getattr(typed, key) for key in given}   # only the given keys are kept
        # typed by the console package (spabench.console.config.ConsoleConfig): at Hydra's merge on the
        # command line (spabench.config.schema_node), by operator_group_with_console for a library caller
        console = self.console
        self.console = asdict(console) if is_dataclass(console) and not isinstance(console, type) \
            else dict(plain_container(console) or {})

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
