"""`spabench demo` (what `make demo` runs): a small campaign on the embedded MuJoCo twin, end to end.

It plans `campaign=demo_twin` into a fresh folder, serves the two scripted stand-in policies (NOT
VLAs: they read the twin's privileged scene state) over the openpi websocket protocol on loopback,
runs every trial on `bench=sim` with the auto operator (the sim success evaluator scores), and writes
the report with the same statistics code a real campaign uses.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from spabench.config import CardKeys, ReportKeys, opt
from spabench.console.config import operator_group
from spabench.errors import ConfigError
from spabench.plan.config import campaign_group
from spabench.sim.bench_config import bench_group
from spabench.suite.config import suite_group


@dataclass
class DemoConfig(CardKeys, ReportKeys):
    """`spabench demo`."""

    command: ClassVar[str] = "demo"

    out: Path | None = opt(None, "the demo's working folder (null: demo-out/ in the current folder)")
    seed: int = opt(0, 'stand-in policy seed', lo=0)
    campaign: Any = campaign_group()
    bench: Any = bench_group()
    operator: Any = operator_group()
    suite: Any = suite_group()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def start_stand_ins(cfg: DemoConfig) -> tuple[list[Any], dict[str, dict]]:
    """One scripted stand-in server per policy of the campaign, each on a free loopback port.

    Returns the servers and the per-card port overrides that `run` needs to reach them."""
    from spabench.policy.card import load_card
    from spabench.standins.serve import ServeScriptedConfig, build_server, card_mode

    servers, ports = [], {}
    for entry in cfg.need("campaign").policies:
        card = load_card(entry.card, search=cfg.group_dirs("policy"))
        mode = card_mode(card)
        if card.family != "scripted":
            raise ConfigError(f"demo: policy card '{card.name}' is family '{card.family}'; the demo serves "
                              "only the scripted stand-ins (allowed: scripted_compositional, scripted_memorising, "
                              "scripted_state_blind)")
        port = _free_port(card.host)
        ports[card.name] = {"port": port}
        _, server = build_server(ServeScriptedConfig(config_dir=cfg.config_dir, mode=mode, host=card.host, port=port,
                                                     seed=cfg.seed, policy=card, suite=cfg.suite))
        server.start()
        servers.append(server)
    return servers, ports


def by_alias(campaign_dir: Path, per_card: dict[str, dict]) -> dict[str, dict]:
    """Per-card overrides keyed as `run` takes them: by alias when the campaign is blinded (plan.csv)."""
    from spabench.plan.planner import PLAN_CSV, read_plan_csv

    alias = {r.card: r.alias for r in read_plan_csv(campaign_dir / PLAN_CSV)}
    return {alias.get(card, card): fields for card, fields in per_card.items()}


def _headline(report_dir: Path) -> list[str]:
    import pandas as pd

    summary = pd.read_csv(report_dir / "summary.csv")
    rows = summary[(summary.task == "all") & summary.condition.isin(["id", "ood", "direct", "ood_matched"])]
    lines = []
    for policy, rows_of in rows.groupby("policy"):
        parts = [f"{r.condition} {r.successes}/{r.trials} = {100 * r.rate:.0f}% "
                 f"[{100 * r.wilson_low:.0f}, {100 * r.wilson_high:.0f}]" for r in rows_of.itertuples()]
        lines.append(f"  {policy}: " + "; ".join(parts))
    return lines


def demo(cfg: DemoConfig) -> int:
    from spabench.analysis.commands import ReportConfig, report
    from spabench.plan.commands import PlanConfig, plan
    from spabench.rollout.commands import RunConfig, run

    base = cfg.out if cfg.out else Path.cwd() / "demo-out"   # the working folder (make demo: the checkout)
    from spabench.outputs import add_entries, claim_new_folder

    run_dir = claim_new_folder(base / time.strftime("%Y%m%d-%H%M%S"), "demo")
    campaign_dir, report_dir = run_dir / "campaign", run_dir / "report"
    print(f"spabench demo: a {cfg.campaign.name} campaign on the MuJoCo twin with scripted stand-in "
          "policies (not VLAs)", flush=True)
    add_entries(run_dir, campaign_dir.name, report_dir.name)
    rc = plan(PlanConfig(config_dir=cfg.config_dir, out=campaign_dir, campaign=cfg.campaign, suite=cfg.suite))
    if rc:
        return rc
    servers, ports = start_stand_ins(cfg)
    try:
        started = time.monotonic()
        rc = run(RunConfig(config_dir=cfg.config_dir, campaign_dir=campaign_dir, cards=by_alias(campaign_dir, ports),
                            bench=cfg.bench, operator=cfg.operator, suite=cfg.suite))
        elapsed = time.monotonic() - started
    finally:
        for server in servers:
            server.stop()
    if rc:
        print(f"spabench demo: the run stopped with exit code {rc}; resume with "
              f"`spabench run campaign={campaign_dir} bench=sim_demo operator=auto`")
        return rc
    rc = report(ReportConfig(config_dir=cfg.config_dir, campaign_dir=campaign_dir, out=report_dir, unpaired=cfg.unpaired,
                              bootstrap=cfg.bootstrap, bootstrap_seed=cfg.bootstrap_seed))
    if rc:
        return rc
    print(f"\nspabench demo finished: campaign ran in {elapsed:.0f} s")
    print(f"  campaign (ledger, plan, episodes): {campaign_dir}")
    print(f"  report (report.md, summary.csv, contrasts.csv, figures): {report_dir}")
    print("  success by condition, all tasks (scripted stand-ins, twin results are not robot results):")
    for line in _headline(report_dir):
        print(line)
    return 0
