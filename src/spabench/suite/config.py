"""The `suite` config group (conf/suite/*.yaml): where the benchmark data lives, the generator seed and
the protocol's scoring settings (motion onset, the relational success rule)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spabench.config import group
from spabench.errors import ConfigError
from spabench.suite.motion import MotionOnsetRule
from spabench.suite.success import RelationRule


@dataclass
class SuiteConfig:
    root: str = "tasks"          # the tasks folder, relative to the repository root
    hardware: str = "hardware"   # the folder holding bench.yaml
    seed: int = 20261130         # `spabench suite generate` seed (the committed scenes use this one)
    motion_onset: MotionOnsetRule = field(default_factory=MotionOnsetRule)
    relation: RelationRule = field(default_factory=RelationRule)

    def __post_init__(self) -> None:
        for name in ("root", "hardware"):
            if not str(getattr(self, name)).strip():
                raise ConfigError(f"conf/suite: field '{name}' must name a folder")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"conf/suite: field 'seed': {self.seed!r} (allowed: an integer >= 0, the "
                              "generator's seed)")
        if not isinstance(self.motion_onset, MotionOnsetRule):
            self.motion_onset = MotionOnsetRule.from_mapping(self.motion_onset)
        if not isinstance(self.relation, RelationRule):
            self.relation = RelationRule.from_mapping(self.relation)


def load_suite_of(cfg: SuiteConfig):
    """The suite the config names (tasks/ and hardware/ relative to the repository root), carrying
    the configured Relational Placement rule."""
    from spabench.paths import resolve
    from spabench.suite.loader import load_suite

    suite = load_suite(str(resolve(cfg.root)), str(resolve(cfg.hardware)))
    suite.relation_rule = cfg.relation
    return suite


def suite_config(data) -> SuiteConfig:
    """The `suite` group's typed object (built when a command's config names the group); unknown fields fail."""
    from dataclasses import fields

    from spabench.configtools import plain_container, typed_fields

    if isinstance(data, SuiteConfig):
        return data
    data = plain_container(data)
    if not isinstance(data, dict):
        raise ConfigError(f"conf/suite: expected a mapping with root, hardware, seed; got {data!r}")
    allowed = [f.name for f in fields(SuiteConfig)]
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"conf/suite: unknown field '{unknown[0]}' (allowed: {', '.join(allowed)})")
    return SuiteConfig(**typed_fields(SuiteConfig, data, "conf/suite"))


def suite_types() -> list[type]:
    return [SuiteConfig]


def suite_group() -> Any:
    """The `suite` group field of a command's config."""
    return group("where the benchmark data lives (conf/suite/)", "spabench.suite.config:suite_config",
                 "spabench.suite.config:suite_types")
