"""The `suite` config group (conf/suite/*.yaml): where the benchmark data lives and the generator seed."""

from __future__ import annotations

from dataclasses import dataclass

from spabench.errors import ConfigError


@dataclass
class SuiteConfig:
    root: str = "tasks"          # the tasks folder, relative to the repository root
    hardware: str = "hardware"   # the folder holding bench.yaml
    seed: int = 20261130         # `spabench suite generate` seed (the committed scenes use this one)

    def __post_init__(self) -> None:
        for name in ("root", "hardware"):
            if not str(getattr(self, name)).strip():
                raise ConfigError(f"conf/suite: field '{name}' must name a folder")
