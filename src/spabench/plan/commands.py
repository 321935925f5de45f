"""`spabench plan campaign=<name> out=DIR`: write a campaign's plan into a new campaign folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from spabench.config import LedgerKeys, opt
from spabench.errors import ConfigError
from spabench.plan.config import CampaignConfig, campaign_group
from spabench.plan.planner import build_plan, config_hash, safety_limits, summary_table, write_campaign
from spabench.suite.config import SuiteConfig, suite_group
from spabench.suite.success import DEFAULT_RELATION_RULE


@dataclass
class PlanConfig(LedgerKeys):
    """`spabench plan`."""

    command: ClassVar[str] = "plan"

    out: Path | None = opt(None, "the new campaign folder")
    ledger_grant: str | None = opt(None, "the benches' group role on a PostgreSQL ledger, granted what a bench needs")
    campaign: Any = campaign_group()
    suite: Any = suite_group()


def suite_settings(suite: SuiteConfig) -> dict[str, Any]:
    """The suite group as the plain dict the campaign's config.yaml and hash record. The Relational
    Placement rule enters only when it is not the paper's (campaigns planned before it was recorded
    keep their hash); `run` refuses a rule other than the planned one."""
    settings: dict[str, Any] = {"root": suite.root, "hardware": suite.hardware, "seed": suite.seed}
    if suite.relation != DEFAULT_RELATION_RULE:
        settings["relation"] = suite.relation.as_dict()
    return settings


def load_campaign_cards(campaign: CampaignConfig, folders: list[Path]) -> dict:
    """card name -> PolicyCard, first found in `folders` (their timer and control rate go into the plan)."""
    from spabench.policy.card import load_card

    return {e.card: load_card(e.card, folders) for e in campaign.policies
            if any((Path(f) / f"{e.card}.yaml").is_file() for f in folders)}


def check_policy_cards(campaign: CampaignConfig, folders: list[Path]) -> None:
    """Every policy's card must exist as <folder>/<card>.yaml in one of the card folders."""
    folders = [Path(f) for f in folders if Path(f).is_dir()]
    if not folders:
        return
    available = sorted({p.stem for f in folders for p in f.glob("*.yaml")})
    for i, entry in enumerate(campaign.policies):
        if entry.card not in available:
            raise ConfigError(f"campaign '{campaign.name}': field 'policies[{i}].card': no policy card "
                              f"{entry.card!r} in {' or '.join(map(str, folders))} "
                              f"(allowed: {', '.join(available) or 'none'})")


def suite_overrides(suite: SuiteConfig) -> list[str]:
    """The `suite.*` overrides a run of this campaign needs: its suite folders and its Relational
    Placement rule where they are not the defaults (`run` refuses another rule)."""
    default = SuiteConfig()
    out = [f"suite.{key}={getattr(suite, key)}" for key in ("root", "hardware")
           if getattr(suite, key) != getattr(default, key)]
    planned, usual = suite.relation.as_dict(), default.relation.as_dict()
    return out + [f"suite.relation.{key}={value}" for key, value in planned.items() if value != usual[key]]


def next_command(out_dir: Path, campaign: CampaignConfig, cfg: PlanConfig) -> str:
    """The exact `spabench run` line for this campaign: its bench kind, the operator it needs and
    the suite settings it was planned with."""
    operator = "auto" if campaign.bench == "sim" else "terminal"
    extra = [f"config_dir={cfg.config_dir}"] if cfg.config_dir else []
    extra += suite_overrides(cfg.need("suite"))
    return " ".join([f"spabench run campaign={out_dir} bench={campaign.bench} operator={operator}", *extra])


def plan(cfg: PlanConfig) -> int:
    """Validate, check the suite's contracts, build the plan, write DIR/{ledger.sqlite,plan.csv,config.yaml}."""
    from rich.console import Console

    from spabench.paths import repo_root, resolve

    campaign: CampaignConfig = cfg.need("campaign")
    if cfg.out is None:
        raise ConfigError("plan: set out=DIR, a new folder for the campaign's ledger.sqlite, plan.csv and config.yaml")
    out_dir = cfg.out
    from spabench.ledger import Ledger

    if Ledger.exists(out_dir):
        raise ConfigError(Ledger._exists_message(out_dir / Ledger.FILENAME))
    ledger_url = cfg.ledger
    if ledger_url not in (None, "", "sqlite"):
        from spabench.ledger.postgres import check_url

        check_url(str(ledger_url))   # a password in the URL fails before anything is written
        if campaign.stopping is not None:
            raise ConfigError("plan: campaign.stopping runs on one bench (its SQLite ledger); a shared PostgreSQL "
                              "ledger's benches claim scene sets on their own, so a stopping rule is refused there "
                              "(plan without ledger=, or without stopping:)")
    from spabench.outputs import check_new_folder
    from spabench.plan.planner import not_a_campaign_message

    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise ConfigError(not_a_campaign_message(out_dir))
    check_new_folder(out_dir, "plan")

    settings = suite_settings(cfg.need("suite"))
    root = repo_root()
    tasks_root = resolve(settings["root"], root)
    hardware_root = resolve(settings["hardware"], root)
    check_policy_cards(campaign, cfg.group_dirs("policy"))

    import spabench.suite as suite_pkg

    suite = suite_pkg.load_suite(tasks_root, hardware_root)
    suite.relation_rule = cfg.need("suite").relation   # its scenes must test the cells under this rule
    check = getattr(suite_pkg, "check_suite", None)
    if check is not None:
        check(suite)

    the_plan = build_plan(campaign, suite, cards=load_campaign_cards(campaign, cfg.group_dirs("policy")))
    digest = config_hash(campaign, settings, tasks_root, hardware_root)
    paths = write_campaign(out_dir, the_plan, digest, settings, ledger_url=ledger_url,
                           ledger_grant=cfg.ledger_grant or None, config_dir=cfg.config_dir,
                           limits=safety_limits(hardware_root))

    console = Console()
    console.print(summary_table(the_plan))
    n_policies = len(campaign.policies)
    console.print(
        f"{len(the_plan.trials)} trials over {len(the_plan.evaluations)} evaluations and {n_policies} "
        f"polic{'y' if n_policies == 1 else 'ies'}; order {campaign.order} (Williams carryover design), "
        f"seed {campaign.seed}, "
        f"config hash {digest[:12]}"
    )
    rule = campaign.stopping_rule()
    if rule is not None:
        console.print(f"stopping rule: {rule.describe()}: `run` stops running their pairs once it decides",
                      markup=False, highlight=False)
    if campaign.blind_aliases:
        console.print("blind aliases: the policy behind each alias is stored in the ledger's meta only")
    console.print(f"wrote {paths['ledger']}, {paths['plan'].name}, {paths['config'].name}")
    console.print(f"next: {next_command(out_dir, campaign, cfg)}", soft_wrap=True, markup=False, highlight=False)
    return 0
