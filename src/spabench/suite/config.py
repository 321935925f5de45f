"""The `suite` config group (conf/suite/*.yaml): where the benchmark data lives, the generator seed and
the protocol's scoring settings (motion onset, the relational success rule)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
        if not isinstance(self.motion_onset, MotionOnsetRule):
            self.motion_onset = MotionOnsetRule.from_mapping(self.motion_onset)
        if not isinstance(self.relation, RelationRule):
            self.relation = RelationRule.from_mapping(self.relation)
