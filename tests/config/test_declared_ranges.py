"""Issue 35: a group field's range or choices is declared once, on the field (`opt(lo=, hi=, gt=, lt=,
choices=)`), and checked by one function (spabench.config.check_fields) in every group, so an
out-of-range value is one error of one shape: "<where>: field '<key>': <value> (allowed: <what the
declaration says>)". Before, bench and operator wrote "bench config, field 'x': ..." and every
group hand-wrote its own ranges and texts."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

import spabench.sim.bench_config  # noqa: F401  (the twin registers bench type "sim")
from spabench.bench.config import BenchConfig, HealthConfig
from spabench.console.config import ConsoleConfig
from spabench.errors import ConfigError
from spabench.operator.config import OperatorConfig
from spabench.plan.config import campaign_from_mapping
from spabench.policy.card import card_from_mapping
from spabench.record.recorder import RecorderConfig
from spabench.suite.config import suite_config

CAMPAIGN = {"name": "t", "seed": 3, "policies": [{"name": "a", "card": "pi05"}, {"name": "b", "card": "pi05"}]}
SIM = {"type": "sim"}
CARD = {"name": "c", "protocol": "openpi", "port": 8000, "horizon": 10}

# (loader, data, the whole error line)
CASES = {
    "bench": (BenchConfig.from_mapping, {**SIM, "fps": 0}, "bench config: field 'fps': 0 (allowed: an integer > 0)"),
    "bench range": (BenchConfig.from_mapping, {**SIM, "realtime_priority": 100},
                    "bench config: field 'realtime_priority': 100 (allowed: an integer 0..99)"),
    "bench camera": (BenchConfig.from_mapping, {**SIM, "cameras": {"wrist": {"width": -1}}},
                     "bench config: field 'cameras.wrist.width': -1 (allowed: an integer > 0)"),
    "bench health": (lambda d: HealthConfig(**d), {"rate_hz": 31.0},
                     "bench config: field 'health.rate_hz': 31.0 (allowed: a number 0..30)"),
    "bench stall current": (lambda d: HealthConfig(**d), {"stall_current_ma": {"gripper": 0.0}},
                            "bench config: field 'health.stall_current_ma.gripper': 0.0 (allowed: a number > 0)"),
    "operator": (OperatorConfig.from_mapping, {"timer_s": 0},
                 "operator config: field 'timer_s': 0.0 (allowed: a number > 0, or null)"),
    "operator choice": (OperatorConfig.from_mapping, {"reference_camera": "top"},
                        "operator config: field 'reference_camera': 'top' (allowed: wrist | middle | left | right "
                        "| overhead)"),
    "recorder": (OperatorConfig.from_mapping, {"recorder": {"crf": 52}},
                 "operator config: field 'recorder.crf': 52 (allowed: an integer 0..51)"),
    "recorder codec": (OperatorConfig.from_mapping, {"recorder": {"codec": "h264_bogus"}},
                       "operator config: field 'recorder.codec': 'h264_bogus' (allowed: libx264 | mpeg4)"),
    "console": (ConsoleConfig.from_mapping, {"stream_hz": 0},
                "operator.console: field 'stream_hz': 0.0 (allowed: a number 0.5..30)"),
    "console port": (ConsoleConfig.from_mapping, {"port": 70000},
                     "operator.console: field 'port': 70000 (allowed: an integer 0..65535)"),
    "console roi": (ConsoleConfig.from_mapping, {"workspace_roi": [0.1, 0.1, 1.5, 0.9]},
                    "operator.console: field 'workspace_roi[2]': 1.5 (allowed: a number 0..1)"),
    "campaign": (campaign_from_mapping, {**CAMPAIGN, "order": "random"},
                 "campaign 't': field 'order': 'random' (allowed: blocked | interleaved)"),
    "campaign policy": (campaign_from_mapping, {**CAMPAIGN, "policies": [{"name": "a", "card": "x", "timer_s": 0}]},
                        "campaign 't': field 'policies[0].timer_s': 0.0 (allowed: a number > 0, or null)"),
    "campaign counts": (campaign_from_mapping, {**CAMPAIGN, "counts": {"id": -1}},
                        "campaign 't': field 'counts.id': -1 (allowed: an integer >= 0, or null)"),
    "campaign stopping": (campaign_from_mapping, {**CAMPAIGN, "stopping": {"kind": "sequential", "a": "a", "b": "b",
                                                                         "alpha": 0.5}},
                          "campaign 't': field 'stopping.alpha': 0.5 (allowed: a number > 0 and < 0.5)"),
    "suite": (suite_config, {"seed": -1}, "conf/suite: field 'seed': -1 (allowed: an integer >= 0)"),
    "suite motion onset": (suite_config, {"motion_onset": {"run_frames": 0}},
                           "conf/suite: field 'motion_onset.run_frames': 0 (allowed: an integer >= 1)"),
    "card": (card_from_mapping, {**CARD, "timeout_s": 0}, "policy card 'c': field 'timeout_s': 0.0 (allowed: a number > 0)"),
    "card launch": (card_from_mapping, {**CARD, "launch": {"argv": ["x"], "max_restarts": -1}},
                    "policy card 'c': field 'launch.max_restarts': -1 (allowed: an integer >= 0)"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_out_of_range_value_is_one_error_of_one_shape(case):
    load, data, line = CASES[case]
    with pytest.raises(ConfigError) as info:
        load(data)
    assert str(info.value) == line


@pytest.mark.parametrize(("cls", "name", "bad"), [(ConsoleConfig, "deadman_s", 0.1), (RecorderConfig, "queue_frames", 1),
                                                  (HealthConfig, "gripper_max_torque_limit", 1001)])
def test_the_allowed_text_is_the_declaration(cls, name, bad):
    """The range in the error is read from the field's declaration, not written a second time."""
    meta = next(f for f in fields(cls) if f.name == name).metadata
    bounds = [f"{meta[k]:g}" for k in ("lo", "hi") if meta.get(k) is not None]
    assert bounds, f"{cls.__name__}.{name} declares no range"
    with pytest.raises(ConfigError, match=r"\(allowed: [^)]*" + re.escape("..".join(bounds) if len(bounds) == 2
                                                                           else bounds[0])):
        cls(**{name: bad})


def test_a_value_in_range_passes_and_none_passes_where_allowed():
    assert OperatorConfig.from_mapping({"timer_s": None, "recorder": {"crf": 51}}).recorder == {"crf": 51}
    assert HealthConfig(gripper_max_torque_limit=None).gripper_max_torque_limit is None
    assert campaign_from_mapping({**CAMPAIGN, "counts": {"id": 0}}).counts == {"id": 0}
