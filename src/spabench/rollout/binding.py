"""What a campaign was planned with binds every session that runs it: the bench kind, the Relational
Placement rule and the config hash (its ledger refuses a changed suite or campaign config). The arm's
safety limits are not bound: a change since the last session is recorded in the ledger and said.

Checked before anything is written or moves; a mismatch is one ConfigError saying how to run it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from spabench.errors import ConfigError

log = logging.getLogger(__name__)

BENCH_WORDS = {"so101": "the SO-101 robot", "sim": "the MuJoCo twin"}


def check_bench_binding(campaign_dir: Path, bench_kind: str, dry_run: bool) -> str | None:
    """The planned bench kind; refuses (ConfigError) a bench of another kind unless dry_run."""
    from spabench.plan.planner import planned_bench_kind

    planned = planned_bench_kind(campaign_dir)
    if planned is None or planned == bench_kind:
        return planned
    if not dry_run:
        raise ConfigError(
            f"{campaign_dir}: this campaign was planned for bench kind '{planned}' ({BENCH_WORDS.get(planned, planned)}), "
            f"but bench kind '{bench_kind}' ({BENCH_WORDS.get(bench_kind, bench_kind)}) was asked for; "
            f"{BENCH_WORDS.get(bench_kind, bench_kind)} rollouts never enter a {planned} campaign. Run it on its own "
            f"bench (`spabench run campaign={campaign_dir}` picks bench={planned}), or add dry_run=true for a "
            "dry run whose attempts are marked dry_run and kept out of the results")
    log.warning("dry run: bench kind %s on a campaign planned for %s; attempts are marked dry_run",
                bench_kind, planned)
    return planned


def check_relation_binding(campaign_dir: Path, rule: Any) -> None:
    """Refuses (ConfigError) a Relational Placement rule other than the one the campaign was planned
    with: its scenes were checked for that rule, and its scores must all mean the same thing."""
    from spabench.plan.planner import planned_relation_rule

    planned = planned_relation_rule(campaign_dir)
    if planned is None or planned == rule:
        return
    raise ConfigError(
        f"{campaign_dir}: this campaign was planned with the Relational Placement rule {planned.as_dict()} "
        f"({planned.bound} bound) but conf/suite `relation` now says {rule.as_dict()}; scores under two rules "
        f"never mix. Run with the planned rule (e.g. suite.relation.bound={planned.bound}) or plan a new campaign")


def check_operator_binding(operator_kind: str, bench_kind: str) -> None:
    """operator=auto scores from the twin's object poses, so it is refused on any other bench."""
    if operator_kind == "auto" and bench_kind != "sim":
        raise ConfigError(f"operator=auto scores from the twin's object poses and runs only on the twin; "
                          f"at the robot (bench kind {bench_kind}) use operator=terminal (the "
                          "default), operator=web or operator=unattended")


def check_timer_binding(pending: list[Any], timer_s: float | None, dry_run: bool) -> None:
    """Refuses (ConfigError) `operator.timer_s` different from a pending trial's planned timer on a
    counted run: the plan fixed each trial's timer, and a counted rollout under another one would be
    reported under the planned one. A dry run (never counted) may shorten it; a pilot plans its own."""
    if timer_s is None or dry_run:
        return
    planned = sorted({float(t.timer_s) for t in pending if float(t.timer_s) != float(timer_s)})
    if planned:
        raise ConfigError(
            f"spabench run: operator.timer_s={timer_s:g} would replace the planned timer "
            f"({', '.join(f'{p:g} s' for p in planned)}) of counted trials; the plan is binding (see plan.csv). "
            "Plan a campaign with campaign.policies[].timer_s for a pilot with a shorter timer, or add "
            "dry_run=true for a dry run whose attempts are never counted")


def open_ledger(campaign_dir: Path, url: str | None = None) -> Any:
    """The campaign's ledger, refused when the suite or campaign config changed since planning.

    A ledger without the planner's config.yaml beside it (built by another tool) opens unchecked.
    `url` (a shared PostgreSQL ledger) replaces the pointer's URL, e.g. to connect as this bench's role."""
    from spabench.ledger import Ledger
    from spabench.plan.planner import CONFIG_YAML, hashes_for_campaign_dir

    if not (campaign_dir / CONFIG_YAML).is_file() and Ledger.exists(campaign_dir):
        log.warning("%s has no %s: the config hash cannot be checked", campaign_dir, CONFIG_YAML)
        return Ledger.open(campaign_dir, url=url, lock=True)
    return Ledger.open(campaign_dir, expect_hash=hashes_for_campaign_dir(campaign_dir), url=url,
                       lock=True)  # one session per campaign, before anything is touched


LIMITS_CHANGED, LIMITS_RECORDED = "safety_limits_changed", "safety_limits_recorded"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def limit_diff(old: Any, new: Any) -> dict[str, list[Any]]:
    """Each limit that differs, as dotted key -> [old, new] (None: not stated)."""
    a, b = _flat(old or {}), _flat(new or {})
    return {k: [a.get(k), b.get(k)] for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}


def record_safety_limits(ledger: Any, campaign_dir: Path, say: Any) -> None:
    """A change of the arm's safety limits (bench.yaml) since planning or the last change is allowed:
    one ledger event with the old and new values (the report lists it), and said. A campaign planned
    before its limits were recorded gets today's as its reference."""
    from spabench.plan.planner import CONFIG_YAML, campaign_hardware_root, safety_limits

    if not (campaign_dir / CONFIG_YAML).is_file():
        return
    new = safety_limits(campaign_hardware_root(campaign_dir))
    seen = sorted(ledger.events(kind=LIMITS_CHANGED) + ledger.events(kind=LIMITS_RECORDED),
                  key=lambda e: e["event_id"])
    meta = ledger.meta()
    if seen:
        old = seen[-1]["payload"]["new"]
    elif "safety_limits" in meta:
        old = meta["safety_limits"]
    else:
        ledger.log_event(None, LIMITS_RECORDED, {"new": new})
        return
    changed = limit_diff(old, new)
    if not changed:
        return
    ledger.log_event(None, LIMITS_CHANGED, {"old": old, "new": new, "changed": changed})
    say("safety limits changed since the last session (recorded in the ledger, shown in the report): "
        + "; ".join(f"{k} {o} -> {n}" for k, (o, n) in changed.items()))
