"""`spabench suite generate` and `spabench suite validate`."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from spabench.config import LabConfig, opt
from spabench.errors import SpabenchError
from spabench.suite.config import suite_group
from spabench.suite.vocabulary import SCENE_CONDITIONS


@dataclass
class SuiteGenerateConfig(LabConfig):
    """`spabench suite generate`."""

    command: ClassVar[str] = "suite generate"

    out: Path | None = opt(None, "a folder for a complete copy of the suite (null: into the suite's own tasks folder)")
    suite: Any = suite_group()


@dataclass
class SuiteValidateConfig(LabConfig):
    """`spabench suite validate`."""

    command: ClassVar[str] = "suite validate"

    suite: Any = suite_group()


def _settings(cfg: SuiteGenerateConfig | SuiteValidateConfig) -> tuple[Path, Path, int]:
    from spabench.suite.loader import resolve_path

    suite = cfg.need("suite")
    return resolve_path(suite.root), resolve_path(suite.hardware), suite.seed


def _console():
    from rich.console import Console

    # a pipe or a log file gets a wide table rather than truncated columns
    return Console(width=None if sys.stdout.isatty() else 160)


def summary_table(suite):
    """A rich table: tasks x scene conditions (plus matched / paraphrase subsets)."""
    from rich.table import Table

    columns = [c for c in SCENE_CONDITIONS if any(s.condition == c for s in suite.scenes.values())]
    table = Table(title=f"suite {suite.manifest.name if suite.manifest else ''} ({len(suite.scenes)} scenes)")
    table.add_column("task")
    for c in columns + ["matched", "paraphrase", "total"]:
        table.add_column(c, justify="right")
    for name in suite.tasks:
        scenes = [s for s in suite.scenes.values() if s.task == name]
        counts = Counter(s.condition for s in scenes)
        matched = sum(1 for s in scenes if s.matched_group)
        para = sum(1 for s in scenes if s.paraphrase)
        table.add_row(name, *[str(counts.get(c, 0) or "-") for c in columns], str(matched), str(para),
                      str(len(scenes)))
    return table


def generate(cfg: SuiteGenerateConfig) -> int:
    """Write the seeded scenes to cfg.out (a complete suite folder) or into cfg.suite.root.

    A separate `out` is a spabench output (spabench.outputs): an earlier `suite generate` folder is
    replaced, a folder holding anything else is refused before anything is generated."""
    import dataclasses

    from spabench.outputs import replace_output
    from spabench.suite.generator import generate_suite

    root, hardware, seed = _settings(cfg)
    out = cfg.out
    rule = cfg.need("suite").relation
    if out is None or Path(out).resolve() == Path(root).resolve():
        suite = generate_suite(seed, root, source_root=root, hardware_root=hardware, relation_rule=rule)
    else:
        with replace_output(out, "suite generate") as staging:
            suite = generate_suite(seed, staging, source_root=root, hardware_root=hardware, relation_rule=rule)
        suite = dataclasses.replace(suite, root=str(out))
    console = _console()
    console.print(summary_table(suite))
    console.print(f"wrote {len(suite.scenes)} scenes (seed {seed}, Relational Placement for the {rule.bound} "
                  f"bound) to {out or root}")
    return 0


def validate(cfg: SuiteValidateConfig) -> int:
    """Load the suite and check every design contract: exit 0 when sound, 2 with the problems."""
    from rich.markup import escape

    from spabench.suite.contracts import validate_suite
    from spabench.suite.loader import load_suite

    root, hardware, _ = _settings(cfg)
    console = _console()
    try:
        suite = load_suite(root, hardware)
    except SpabenchError as exc:
        console.print(f"[red]spabench suite validate: {escape(str(exc))}[/red]", highlight=False)
        return 2
    suite.relation_rule = cfg.need("suite").relation   # scenes are checked against the configured rule
    violations = validate_suite(suite)
    console.print(summary_table(suite))
    if violations:
        rules = Counter(v.rule for v in violations)
        console.print(f"[red]{len(violations)} design-contract violation(s)[/red] "
                      f"({', '.join(f'{r}: {n}' for r, n in rules.most_common())}):")
        for v in violations:
            console.print(f"  - {v}", markup=False, highlight=False)
        return 2
    console.print(f"[green]suite OK[/green]: {len(suite.scenes)} scenes in {len(suite.tasks)} tasks pass every "
                  f"design contract ({root})")
    return 0
