"""The command table: which function serves which `spabench` command, and which config groups it reads.

Targets are imported lazily so that `spabench report` never pays for (or needs) LeRobot and torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    target: str                  # "module:function", called with the composed DictConfig
    groups: tuple[str, ...]      # config groups validated before the call
    summary: str
    path_keys: tuple[str, ...] = ()  # top-level keys holding paths relative to the caller's cwd
    presets: tuple[str, ...] = ()    # overrides applied before the caller's (who may override them)
    positionals: tuple[str, ...] = ()  # keys that bare words after the command fill, in order


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("suite generate", "spabench.suite.commands:generate", ("suite",),
                "regenerate the frozen scene specifications (seeded)", ("out",)),
        Command("suite validate", "spabench.suite.commands:validate", ("suite",),
                "check the suite's data and design contracts"),
        Command("plan", "spabench.plan.commands:plan", ("campaign", "suite"),
                "write a campaign's trial plan into a new ledger: campaign=<name> out=DIR", ("out",)),
        Command("run", "spabench.rollout.commands:run", ("bench", "operator", "suite"),
                "run (or resume) a planned campaign at the bench: campaign=DIR", ("campaign_dir",)),
        Command("score", "spabench.operator.commands:score", ("operator", "suite"),
                "score recorded, unscored attempts: campaign=DIR; correct one: attempt=ID reason=... "
                "[invalidate=true]", ("campaign_dir",)),
        Command("console", "spabench.console.commands:console", ("operator", "suite"),
                "the browser console (bench page, review and scoring): campaign=DIR", ("campaign_dir",),
                presets=("operator=web",)),
        Command("report", "spabench.analysis.commands:report", (),
                "statistics, tables and figures: campaign=DIR or outcomes=FILE.csv, out=DIR",
                ("campaign_dir", "outcomes", "out")),
        Command("power", "spabench.analysis.power:power", (),
                "trials per cell for a target half-width, matched pairs for a paired difference: "
                "half_width=0.1 [rate=0.5] | rates=[0.3,0.6] [discordance=] [power=0.8] [outcomes=PILOT.csv]",
                ("outcomes", "campaign_dir")),
        Command("export lerobot", "spabench.record.commands:export_lerobot", (),
                "export recorded episodes as a LeRobotDataset v3: campaign=DIR out=DIR",
                ("campaign_dir", "out")),
        Command("serve lerobot", "spabench.serve.commands:serve_lerobot", (),
                "serve a local LeRobot checkpoint over the openpi websocket protocol: checkpoint=DIR",
                ("checkpoint",)),
        Command("serve scripted", "spabench.sim.serve:serve_scripted", (),
                "serve the twin's scripted stand-in policy (not a VLA): mode=compositional|memorising"),
        Command("ledger copy", "spabench.ledger.commands:ledger_copy", (),
                "copy a campaign's ledger, checked: SRC DST [ledger=postgresql://host/db]", ("src", "dst"),
                positionals=("src", "dst")),
        Command("ledger collect", "spabench.ledger.commands:ledger_collect", (),
                "gather the episodes from the benches that recorded them: campaign=DIR out=DIR "
                "+bench_dirs.<bench>=PATH|host:PATH", ("campaign_dir", "out")),
        Command("ledger status", "spabench.ledger.commands:ledger_status", (),
                "where a campaign's ledger lives, its progress and each bench's claim: campaign=DIR",
                ("campaign_dir",)),
        Command("demo", "spabench.demo:demo", ("campaign", "bench", "operator", "suite"),
                "plan, run and report a small campaign on the embedded MuJoCo twin", ("out",),
                presets=("bench=sim_demo", "campaign=demo_twin", "operator=auto")),
    )
}

# Which Python class validates each config group (imported lazily; none imports LeRobot).
GROUP_SCHEMAS: dict[str, str] = {
    "campaign": "spabench.plan.config:CampaignConfig",
    "bench": "spabench.bench.config:BenchConfig",
    "policy": "spabench.policy.card:PolicyCard",
    "operator": "spabench.operator.config:OperatorConfig",
    "suite": "spabench.suite.config:SuiteConfig",
}
