"""The command table: which function serves which `spabench` command, and which config groups it reads.

The functions are imported here, so argv can be followed to the code that serves it. Their modules
import LeRobot, torch, pandas and matplotlib inside the functions, so that loading the table costs
about half a second and `spabench report` never needs the bench extra (tests/cli/test_command_table.py).
Every target takes its own config dataclass (`schema`), declared next to it (spabench.config
describes the pattern).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spabench.analysis.commands import ReportConfig, report
from spabench.analysis.compare import CompareConfig, compare
from spabench.analysis.export import ExportOutcomesConfig, export_outcomes
from spabench.analysis.power import PowerCommandConfig, power
from spabench.commission.commands import BenchCheckConfig, bench_check
from spabench.config import CommandConfig
from spabench.console.commands import ConsoleCommandConfig, console
from spabench.demo import DemoConfig, demo
from spabench.lab.commands import InitConfig, init
from spabench.ledger.commands import LedgerCopyConfig, LedgerStatusConfig, ledger_copy, ledger_status
from spabench.operator.commands import ScoreConfig, score
from spabench.plan.commands import PlanConfig, plan
from spabench.record.commands import (
    ExportLerobotConfig,
    ImportLerobotConfig,
    LedgerCollectConfig,
    export_lerobot,
    import_lerobot,
    ledger_collect,
)
from spabench.rollout.commands import RunConfig, run
from spabench.rollout.server_commands import (
    ServersDownConfig,
    ServersStatusConfig,
    ServersUpConfig,
    servers_down,
    servers_status,
    servers_up,
)
from spabench.serve.commands import ServeLerobotConfig, serve_lerobot
from spabench.standins.serve import ServeScriptedConfig, serve_scripted
from spabench.suite.commands import SuiteGenerateConfig, SuiteValidateConfig, generate, validate

# How a command reads `campaign=`: a preset name or a campaign YAML file (plan, demo), or the
# folder `spabench plan` wrote (run, score, report, export).
CAMPAIGN_PRESET, CAMPAIGN_FOLDER = "preset", "folder"


@dataclass(frozen=True)
class Command:
    name: str
    target: Callable[..., int | None]   # the command function, called with its typed config
    schema: type[CommandConfig]  # what the command reads: its keys and config groups
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
    def groups(self) -> tuple[str, ...]:
        return self.schema.group_names()

    @property
    def group(self) -> str:
        return self.name.split(" ")[0]


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("suite generate", generate, SuiteGenerateConfig,
                "regenerate the frozen scene specifications (seeded)", usage="[out=DIR]"),
        Command("suite validate", validate, SuiteValidateConfig,
                "check the suite's data and design contracts"),
        Command("plan", plan, PlanConfig,
                "write a campaign's trial plan into a new folder", CAMPAIGN_PRESET,
                usage="campaign=<preset>|FILE.yaml out=DIR"),
        Command("run", run, RunConfig,
                "run (or resume) a planned campaign at the bench it was planned for", CAMPAIGN_FOLDER,
                bench_from_campaign=True, usage="campaign=DIR [operator=terminal|web|unattended|auto] [bench=<preset>] [launch=true]"),
        Command("score", score, ScoreConfig,
                "score recorded, unscored attempts; correct one: attempt=ID reason=... [invalidate=true]; "
                "second_rater=true: score blind what another rater scored",
                CAMPAIGN_FOLDER, presets=("operator=terminal",),
                usage="campaign=DIR [attempt=ID reason=... [invalidate=true] | second_rater=true] [operator.rater=NAME]"),
        Command("console", console, ConsoleCommandConfig,
                "the browser console (bench page, review and scoring)", CAMPAIGN_FOLDER,
                presets=("operator=web",), usage="campaign=DIR"),
        Command("report", report, ReportConfig,
                "statistics, tables and figures", CAMPAIGN_FOLDER,
                usage="campaign=DIR | outcomes=FILE.csv, out=DIR"),
        Command("power", power, PowerCommandConfig,
                "trials per cell for a target half-width, matched pairs for a paired difference", CAMPAIGN_FOLDER,
                usage="half_width=0.1 [rate=0.5] | rates=[0.3,0.6] [discordance=] [power=0.8] "
                      "[outcomes=PILOT.csv | campaign=DIR]"),
        Command("compare", compare, CompareConfig,
                "is policy b better than a? a sequential test on matched pairs that stops when decided",
                CAMPAIGN_FOLDER, usage="outcomes=FILE.csv | campaign=DIR, a=POLICY b=POLICY [alpha=0.05] "
                                       "[max_pairs=N] [out=DIR] [--verbose]",
                flags=(("--verbose", "verbose=true"),)),
        Command("export lerobot", export_lerobot, ExportLerobotConfig,
                "export recorded episodes as a LeRobotDataset v3", CAMPAIGN_FOLDER,
                usage="campaign=DIR out=DIR"),
        Command("export outcomes", export_outcomes, ExportOutcomesConfig,
                "a campaign's outcomes as the CSV `report outcomes=` reads (one row per rollout)", CAMPAIGN_FOLDER,
                usage="campaign=DIR out=FILE.csv [lab=NAME]"),
        Command("import lerobot", import_lerobot, ImportLerobotConfig,
                "a LeRobotDataset v3 (recorded elsewhere) as a campaign to score: one complete, unscored attempt "
                "per episode, videos linked, never re-encoded", None,
                usage="dataset=DIR out=DIR [cells=FILE.csv]"),
        Command("serve lerobot", serve_lerobot, ServeLerobotConfig,
                "serve a local LeRobot checkpoint over the openpi websocket protocol",
                usage="checkpoint=DIR [port=8000]"),
        Command("serve scripted", serve_scripted, ServeScriptedConfig,
                "serve the twin's scripted stand-in policy (not a VLA)",
                usage="[mode=compositional|memorising] [port=N]"),
        Command("servers up", servers_up, ServersUpConfig,
                "start the campaign's policy servers from their cards' launch: blocks", CAMPAIGN_FOLDER,
                usage="campaign=DIR"),
        Command("servers status", servers_status, ServersStatusConfig,
                "the campaign's launched policy servers: pid, restarts, checkpoint digest, log", CAMPAIGN_FOLDER,
                usage="campaign=DIR"),
        Command("servers down", servers_down, ServersDownConfig,
                "stop the policy servers spabench launched for the campaign", CAMPAIGN_FOLDER,
                usage="campaign=DIR"),
        Command("ledger copy", ledger_copy, LedgerCopyConfig,
                "copy a campaign's ledger, checked", positionals=("src", "dst"),
                usage="SRC DST [ledger=postgresql://host/db]"),
        Command("ledger collect", ledger_collect, LedgerCollectConfig,
                "gather the episodes from the benches that recorded them", CAMPAIGN_FOLDER,
                usage="campaign=DIR out=DIR bench_dirs.<bench>=PATH|host:PATH"),
        Command("ledger status", ledger_status, LedgerStatusConfig,
                "where a campaign's ledger lives, its progress and each bench's claim", CAMPAIGN_FOLDER,
                usage="campaign=DIR"),
        Command("bench check", bench_check, BenchCheckConfig,
                "commission the bench: bus, motors, pose, cameras, policy servers (torque never enabled); "
                "a dated report", CAMPAIGN_FOLDER, optional_groups=("policy",),
                usage="bench=<preset> [campaign=DIR | policy=<card> [policy.port=N] | cards.<card>.port=N ...] "
                      "[out=DIR] [requests=20] [camera_s=3] [accept_cameras=true]"),
        Command("init", init, InitConfig,
                "make a lab folder to edit (bench file, policy cards, a pilot campaign, a README); never "
                "overwrites a file", positionals=("out",), usage="DIR"),
        Command("demo", demo, DemoConfig,
                "plan, run and report a small campaign on the embedded MuJoCo twin", CAMPAIGN_PRESET,
                presets=("bench=sim_demo", "campaign=demo_twin", "operator=auto")),
    )
}
