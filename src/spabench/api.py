"""The Python face of the `spabench` commands, for scripts and notebooks.

Each function takes the same keys as the command line, as keyword arguments, and goes through the
same composition and checks (a key the command does not read is refused, values are typed)::

    from spabench import api

    if __name__ == "__main__":        # required: recording starts worker processes (see below)
        api.plan(campaign="smoke", out="runs/c1")
        api.run(campaign="runs/c1", max_trials=1)
        api.score(campaign="runs/c1", attempt="E0001-P1-a1", reason="gripper slipped, re-watched")
        api.report(campaign="runs/c1", out="runs/c1-report")

Each returns the command's exit code (0: done) and raises `spabench.errors.SpabenchError` on bad input.
`outcomes(campaign=DIR)` and `attempts(campaign=DIR)` return what a campaign's ledger holds as pandas
DataFrames: the outcomes exactly as `report` reads them, and every attempt with its trial.
`run` records videos in worker processes started with multiprocessing's "spawn" method, which
re-imports the calling script: a script that calls `api.run` outside `if __name__ == "__main__":`
would start the campaign again inside every worker. `run` refuses such a call with one error.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spabench.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["call", "plan", "run", "score", "report", "outcomes", "attempts", "MAIN_GUARD_MESSAGE"]

MAIN_GUARD_MESSAGE = ("spabench.api.run: call it under `if __name__ == \"__main__\":` in your script; recording "
                      "starts worker processes that re-import the script, and each would start the campaign again")


def _argv(keys: dict[str, Any]) -> list[str]:
    out = []
    for key, value in keys.items():
        if value is None:
            value = "null"
        elif isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = "[" + ",".join(map(str, value)) + "]"
        out.append(f"{key}={value}")
    return out


def call(command: str, **keys: Any) -> int:
    """Run one command (`"report"`, `"ledger status"`, ...) with `keys` as its key=value overrides."""
    from spabench.cli.commands import COMMANDS
    from spabench.cli.main import compose

    if command not in COMMANDS:
        raise ConfigError(f"spabench.api: unknown command {command!r} (allowed: {', '.join(COMMANDS)})")
    cfg = compose(COMMANDS[command], _argv(keys))
    return int(COMMANDS[command].target(cfg) or 0)


def _unguarded_main_call() -> bool:
    """True when the caller is the top level of a script run as __main__, outside any block (the
    line that calls has no indentation), so spawned workers would run it again."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path:
        return False
    for frame in inspect.stack()[2:]:
        if frame.frame.f_globals is vars(main) and frame.function == "<module>":
            line = (frame.code_context or [""])[0]
            return bool(line.strip()) and not line[0].isspace() and Path(path).is_file()
    return False


def plan(**keys: Any) -> int:
    """`spabench plan` (campaign=<preset or FILE.yaml>, out=DIR, ...)."""
    return call("plan", **keys)


def run(**keys: Any) -> int:
    """`spabench run` (campaign=DIR, max_trials=, operator=, bench=, cards.<card>.<field>=, ...)."""
    import multiprocessing

    if multiprocessing.parent_process() is not None or _unguarded_main_call():
        raise ConfigError(MAIN_GUARD_MESSAGE)
    return call("run", **keys)


def score(**keys: Any) -> int:
    """`spabench score` (campaign=DIR, attempt=ID, reason=..., invalidate=)."""
    return call("score", **keys)


def report(**keys: Any) -> int:
    """`spabench report` (campaign=DIR or outcomes=FILE.csv, out=DIR, ...)."""
    return call("report", **keys)


def outcomes(campaign: str | Path, ledger: str | None = None) -> pd.DataFrame:
    """One row per finished, scored or invalid attempt of a campaign (not dry runs), validated as
    `spabench report campaign=DIR` reads it (the same code): policy, task, condition, evaluation_id,
    matched_group, instruction_variant, success (0/1, NA when unscored and invalid), valid,
    failure_mode, then the ledger's own columns (attempt_id, rater, bench_id, bench_kind, ...).
    Direct or paraphrase rows whose partner is not scored yet are left out (`attrs['unpaired_rows']`).
    `ledger`: a PostgreSQL URL replacing the pointer's (e.g. the read-only analyst role)."""
    from spabench.analysis.commands import load_campaign
    from spabench.paths import campaign_folder

    return load_campaign(campaign_folder(Path(campaign), "outcomes"), "exclude", say=lambda line: None,
                         url=ledger)[0]


def attempts(campaign: str | Path, ledger: str | None = None) -> pd.DataFrame:
    """Every attempt the campaign's ledger holds (running, complete, invalid; dry runs included and
    flagged), one row each in run order: the attempt's columns (attempt_id, status, started_at,
    ended_at, stop_reason, invalid_reason, bench_id, bench_kind, operator, dry_run, ...) and its trial's
    policy, task, condition, evaluation_id, matched_group and instruction_variant."""
    import dataclasses

    import pandas as pd

    from spabench.ledger import Ledger
    from spabench.ledger.schema import AttemptRow
    from spabench.paths import campaign_folder

    trial_columns = ("policy", "task", "condition", "evaluation_id", "matched_group", "instruction_variant")
    with Ledger.open(campaign_folder(Path(campaign), "attempts"), readonly=True, url=ledger) as book:
        trials = {t.trial_id: t for t in book.trials()}
        rows = [{**dataclasses.asdict(a), **{c: getattr(trials[a.trial_id], c) for c in trial_columns}}
                for a in book.attempts()]
    columns = [f.name for f in dataclasses.fields(AttemptRow)] + list(trial_columns)
    return pd.DataFrame(rows, columns=columns)
