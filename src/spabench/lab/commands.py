"""`spabench init DIR`: a lab folder to edit, copied from the installed package.

What a lab changes first is copied, nothing else: the robot's bench file (conf/bench/so101.yaml),
every policy card (conf/policy/), a pilot campaign and a README saying what to change. Everything
else (the suite, the twin, the other presets) stays in the package, where later versions update it.
A file that exists is never overwritten: running `init` again adds what is missing and says which
files it kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from spabench.config import CommandConfig, opt
from spabench.errors import ConfigError
from spabench.paths import conf_dir

TEMPLATE = Path(__file__).resolve().parent / "template"


@dataclass
class InitConfig(CommandConfig):
    """`spabench init`."""

    command: ClassVar[str] = "init"

    out: Path | None = opt(None, "the lab folder to make (also the first word after init)")


def lab_files() -> list[tuple[Path, Path]]:
    """(source, path inside the lab folder) for every file `init` copies."""
    conf = conf_dir()
    files = [(conf / "bench" / "so101.yaml", Path("bench") / "so101.yaml")]
    files += [(card, Path("policy") / card.name) for card in sorted((conf / "policy").glob("*.yaml"))]
    files += [(path, path.relative_to(TEMPLATE)) for path in sorted(TEMPLATE.rglob("*")) if path.is_file()]
    return files


def init(cfg: InitConfig) -> int:
    """Copy the lab files into cfg.out; existing files are kept and listed."""
    if cfg.out is None:
        raise ConfigError("init: give the lab folder to make, e.g. `spabench init lab` (or out=DIR)")
    lab = cfg.out
    if lab.exists() and not lab.is_dir():
        raise ConfigError(f"init: {lab} is a file (allowed: a new or existing folder)")
    if (lab / "config.yaml").exists():
        raise ConfigError(f"init: {lab} holds a config.yaml (a campaign folder or a config root); a lab folder "
                          "holds only group folders (bench/, policy/, campaign/)")
    files = lab_files()
    missing = [source for source, _ in files if not source.is_file()]
    if missing:   # a broken installation: say so before writing anything
        raise ConfigError(f"init: the installed package lacks {missing[0]}; reinstall spabench")
    copied, kept = [], []
    for source, relative in files:
        target = lab / relative
        if target.exists():
            kept.append(relative)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as fh:   # exclusive: never replaces a file that appeared meanwhile
            fh.write(source.read_bytes())
        copied.append(relative)
    print(f"spabench init: lab folder {lab}")
    for relative in copied:
        print(f"  wrote {relative}")
    for relative in kept:
        print(f"  kept  {relative} (exists; not overwritten)")
    print(f"Read {lab / 'README.md'} first; give config_dir={lab} to every command.")
    return 0
