"""The command table: which function serves which `spabench` command, and which config groups it reads.

Targets are imported lazily so that `spabench report` never pays for (or needs) LeRobot and torch.
Every target takes one `spabench.config.SpabenchConfig` (the pattern is described there).
"""

from __future__ import annotations

from dataclasses import dataclass

# How a command reads `campaign=`: a preset name or a campaign YAML file (plan, demo), or the
# folder `spabench plan` wrote (run, score, report, export).
CAMPAIGN_PRESET, CAMPAIGN_FOLDER = "preset", "folder"


@dataclass(frozen=True)
class Command:
    name: str
    target: str                  # "module:function", called with the SpabenchConfig
    groups: tuple[str, ...]      # config groups validated into typed objects before the call
    summary: str
    campaign: str | None = None  # CAMPAIGN_PRESET | CAMPAIGN_FOLDER | None (the command ignores campaign=)
    presets: tuple[str, ...] = ()    # overrides applied before the caller's (who may override them)
    positionals: tuple[str, ...] = ()  # keys that bare words after the command fill, in order
    bench_from_campaign: bool = False  # without bench=..., use the bench kind the campaign was planned for
    usage: str = ""              # the required arguments, for --help
    optional_groups: tuple[str, ...] = ()  # of `groups`: built only when the caller picks or sets one
                                           # (`policy=pi05`, `policy.port=8001`), else left None
    flags: tuple[tuple[str, str], ...] = ()   # (--flag, the key=value it stands for), e.g. --verbose

    @property
    def group(self) -> str:
        return self.name.split(" ")[0]


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("suite generate", "spabench.suite.commands:generate", ("suite",),
                "regenerate the frozen scene specifications (seeded)", usage="[out=DIR]"),
        Command("suite validate", "spabench.suite.commands:validate", ("suite",),
                "check the suite's data and design contracts"),
        Command("plan", "spabench.plan.commands:plan", ("campaign", "suite"),
                "write a campaign's trial plan into a new folder", CAMPAIGN_PRESET,
                usage="campaign=<preset>|FILE.yaml out=DIR"),
        Command("run", "spabench.rollout.commands:run", ("bench", "operator", "suite"),
                "run (or resume) a planned campaign at the bench it was planned for", CAMPAIGN_FOLDER,
                bench_from_campaign=True, usage="campaign=DIR [operator=terminal|web|unattended|auto] [bench=<preset>] [launch=true]"),
        Command("score", "spabench.operator.commands:score", ("operator", "suite"),
                "score recorded, unscored attempts; correct one: attempt=ID reason=... [invalidate=true]; "
                "second_rater=true: score blind what another rater scored",
                CAMPAIGN_FOLDER, presets=("operator=terminal",),
                usage="campaign=DIR [attempt=ID reason=... [invalidate=true] | second_rater=true] [operator.rater=NAME]"),
        Command("console", "spabench.console.commands:console", ("operator", "suite"),
                "the browser console (bench page, review and scoring)", CAMPAIGN_FOLDER,
                presets=("operator=web",), usage="campaign=DIR"),
        Command("report", "spabench.analysis.commands:report", (),
                "statistics, tables and figures", CAMPAIGN_FOLDER,
                usage="campaign=DIR | outcomes=FILE.csv, out=DIR"),
        Command("power", "spabench.analysis.power:power", (),
                "trials per cell for a target half-width, matched pairs for a paired difference", CAMPAIGN_FOLDER,
                usage="half_width=0.1 [rate=0.5] | rates=[0.3,0.6] [discordance=] [power=0.8] "
                      "[outcomes=PILOT.csv | campaign=DIR]"),
        Command("compare", "spabench.analysis.compare:compare", (),
                "is policy b better than a? a sequential test on matched pairs that stops when decided",
                CAMPAIGN_FOLDER, usage="outcomes=FILE.csv | campaign=DIR, a=POLICY b=POLICY [alpha=0.05] "
                                       "[max_pairs=N] [out=DIR] [--verbose]",
                flags=(("--verbose", "verbose=true"),)),
        Command("export lerobot", "spabench.record.commands:export_lerobot", (),
                "export recorded episodes as a LeRobotDataset v3", CAMPAIGN_FOLDER,
                usage="campaign=DIR out=DIR"),
        Command("export outcomes", "spabench.analysis.export:export_outcomes", (),
                "a campaign's outcomes as the CSV `report outcomes=` reads (one row per rollout)", CAMPAIGN_FOLDER,
                usage="campaign=DIR out=FILE.csv [lab=NAME]"),
        Command("import lerobot", "spabench.record.commands:import_lerobot", (),
                "a LeRobotDataset v3 (recorded elsewhere) as a campaign to score: one complete, unscored attempt "
                "per episode, videos linked, never re-encoded", None,
                usage="dataset=DIR out=DIR [cells=FILE.csv]"),
        Command("serve lerobot", "spabench.serve.commands:serve_lerobot", (),
                "serve a local LeRobot checkpoint over the openpi websocket protocol",
                usage="checkpoint=DIR [port=8000]"),
        Command("serve scripted", "spabench.standins.serve:serve_scripted", ("policy", "suite"),
                "serve the twin's scripted stand-in policy (not a VLA)",
                usage="[mode=compositional|memorising] [port=N]"),
        Command("servers up", "spabench.rollout.server_commands:servers_up", (),
                "start the campaign's policy servers from their cards' launch: blocks", CAMPAIGN_FOLDER,
                usage="campaign=DIR"),
        Command("servers status", "spabench.rollout.server_commands:servers_status", (),
                "the campaign's launched policy servers: pid, restarts, checkpoint digest, log", CAMPAIGN_FOLDER,
                usage="campaign=DIR"),
        Command("servers down", "spabench.rollout.server_commands:servers_down", (),
                "stop the policy servers spabench launched for the campaign", CAMPAIGN_FOLDER,
                usage="campaign=DIR"),
        Command("ledger copy", "spabench.ledger.commands:ledger_copy", (),
                "copy a campaign's ledger, checked", positionals=("src", "dst"),
                usage="SRC DST [ledger=postgresql://host/db]"),
        Command("ledger collect", "spabench.record.commands:ledger_collect", (),
                "gather the episodes from the benches that recorded them", CAMPAIGN_FOLDER,
                usage="campaign=DIR out=DIR bench_dirs.<bench>=PATH|host:PATH"),
        Command("ledger status", "spabench.ledger.commands:ledger_status", (),
                "where a campaign's ledger lives, its progress and each bench's claim", CAMPAIGN_FOLDER,
                usage="campaign=DIR"),
        Command("bench check", "spabench.commission.commands:bench_check", ("bench", "policy"),
                "commission the bench: bus, motors, pose, cameras, policy servers (torque never enabled); "
                "a dated report", CAMPAIGN_FOLDER, optional_groups=("policy",),
                usage="bench=<preset> [campaign=DIR | policy=<card> [policy.port=N] | cards.<card>.port=N ...] "
                      "[out=DIR] [requests=20] [camera_s=3] [accept_cameras=true]"),
        Command("init", "spabench.lab.commands:init", (),
                "make a lab folder to edit (bench file, policy cards, a pilot campaign, a README); never "
                "overwrites a file", positionals=("out",), usage="DIR"),
        Command("demo", "spabench.demo:demo", ("campaign", "bench", "operator", "suite"),
                "plan, run and report a small campaign on the embedded MuJoCo twin", CAMPAIGN_PRESET,
                presets=("bench=sim_demo", "campaign=demo_twin", "operator=auto")),
    )
}
