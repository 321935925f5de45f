"""The `suite` config group (conf/suite/*.yaml): where the benchmark data lives, the generator seed and
the protocol's scoring settings (motion onset, the relational success rule)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spabench.config import check_fields, field_error, group, opt, typed_node
from spabench.suite.motion import MotionOnsetRule
from spabench.suite.success import RelationRule


@dataclass
class SuiteConfig:
    root: str = "tasks"          # the tasks folder, relative to the repository root
    hardware: str = "hardware"   # the folder holding bench.yaml
    seed: int = opt(20261130, lo=0)   # `spabench suite generate` seed (the committed scenes use this one)
    motion_onset: MotionOnsetRule = field(default_factory=MotionOnsetRule)
    relation: RelationRule = field(default_factory=RelationRule)

    def __post_init__(self) -> None:
        for name in ("root", "hardware"):
            if not str(getattr(self, name)).strip():
                raise field_error("conf/suite", name, f"{getattr(self, name)!r} (allowed: a folder)")
        check_fields(self, "conf/suite")
        self.motion_onset = MotionOnsetRule.from_mapping(self.motion_onset)
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
    """The `suite` group's typed object (built when a command's config names the group)."""
    return typed_node(SuiteConfig, data, "conf/suite")


def suite_group() -> Any:
    """The `suite` group field of a command's config."""
    return group("where the benchmark data lives (conf/suite/)", "spabench.suite.config:suite_config",
                 "spabench.suite.config:SuiteConfig")
