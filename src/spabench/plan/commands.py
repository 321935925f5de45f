"""`spabench plan campaign=<name> out=DIR`: write a campaign's plan into a new campaign folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from spabench.configtools import plain_container
from spabench.errors import ConfigError
from spabench.plan.config import CampaignConfig, campaign_from_mapping
from spabench.plan.planner import build_plan, config_hash, summary_table, write_campaign


def suite_settings(node: Any) -> dict[str, Any]:
    """The suite group as a plain dict with root and hardware (relative to the repo root)."""
    data = plain_container(node) if node is not None else {}
    if not isinstance(data, dict):
        raise ConfigError(f"conf/suite: expected a mapping with root, hardware, seed; got {data!r}")
    data = dict(data)
    data.setdefault("root", "tasks")
    data.setdefault("hardware", "hardware")
    return data


def load_campaign_cards(campaign: CampaignConfig, policy_conf: str | os.PathLike) -> dict:
    """card name -> PolicyCard from `policy_conf` (their timer and control rate go into the plan)."""
    from spabench.policy.card import load_card

    folder = Path(policy_conf)
    return {e.card: load_card(folder / f"{e.card}.yaml") for e in campaign.policies
            if (folder / f"{e.card}.yaml").is_file()}


def check_policy_cards(campaign: CampaignConfig, policy_conf: str | os.PathLike) -> None:
    """Every policy's card must exist as conf/policy/<card>.yaml (skipped when that folder is absent)."""
    folder = Path(policy_conf)
    if not folder.is_dir():
        return
    available = sorted(p.stem for p in folder.glob("*.yaml"))
    for i, entry in enumerate(campaign.policies):
        if entry.card not in available:
            raise ConfigError(f"conf/campaign/{campaign.name}.yaml: field 'policies[{i}].card': no policy card "
                              f"{entry.card!r} in {folder} (allowed: {', '.join(available) or 'none'})")


def plan(cfg) -> int:
    """Validate, check the suite's contracts, build the plan, write DIR/{ledger.sqlite,plan.csv,config.yaml}."""
    from rich.console import Console

    from spabench.paths import repo_root, resolve

    campaign = campaign_from_mapping(cfg.campaign)
    out = cfg.get("out") if hasattr(cfg, "get") else None
    if not out:
        raise ConfigError("plan: set out=DIR, a new folder for the campaign's ledger.sqlite, plan.csv and config.yaml")
    out_dir = Path(str(out)).expanduser().resolve()
    from spabench.ledger import Ledger

    if Ledger.exists(out_dir):
        raise ConfigError(Ledger._exists_message(out_dir / Ledger.FILENAME))
    ledger_url = cfg.get("ledger") if hasattr(cfg, "get") else None
    if ledger_url not in (None, "", "sqlite"):
        from spabench.ledger.postgres import check_url

        check_url(str(ledger_url))   # a password in the URL fails before anything is written
    from spabench.outputs import check_new_folder
    from spabench.plan.planner import not_a_campaign_message

    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise ConfigError(not_a_campaign_message(out_dir))
    check_new_folder(out_dir, "plan")

    settings = suite_settings(cfg.get("suite"))
    root = repo_root()
    tasks_root = resolve(settings["root"], root)
    hardware_root = resolve(settings["hardware"], root)
    check_policy_cards(campaign, root / "conf" / "policy")

    import spabench.suite as suite_pkg

    suite = suite_pkg.load_suite(tasks_root, hardware_root)
    check = getattr(suite_pkg, "check_suite", None)
    if check is not None:
        check(suite)

    the_plan = build_plan(campaign, suite, cards=load_campaign_cards(campaign, root / "conf" / "policy"))
    digest = config_hash(campaign, settings, tasks_root, hardware_root)
    paths = write_campaign(out_dir, the_plan, digest, settings, ledger_url=ledger_url,
                           ledger_grant=cfg.get("ledger_grant") or None)

    console = Console()
    console.print(summary_table(the_plan))
    n_policies = len(campaign.policies)
    console.print(
        f"{len(the_plan.trials)} trials over {len(the_plan.evaluations)} evaluations and {n_policies} "
        f"polic{'y' if n_policies == 1 else 'ies'}; order {campaign.order} (Williams carryover design), "
        f"seed {campaign.seed}, "
        f"config hash {digest[:12]}"
    )
    if campaign.blind_aliases:
        console.print("blind aliases: the policy behind each alias is stored in the ledger's meta only")
    console.print(f"wrote {paths['ledger']}, {paths['plan'].name}, {paths['config'].name}")
    console.print(f"next: spabench run campaign={out_dir}")
    return 0
