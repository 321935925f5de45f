"""The campaign config group (conf/campaign/*.yaml): which policies, which tasks, how many, what order.

Validated in `__post_init__` so that a typo fails at `spabench plan`, before any robot moves. The
dataclasses are also the Hydra structured-config schema (OmegaConf.structured).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spabench.config import check_fields, field_error, group, opt, typed_node
from spabench.configtools import plain_container
from spabench.errors import ConfigError
from spabench.names import name_problem
from spabench.suite.vocabulary import CONDITION_COUNTS, CONDITIONS, TASKS

ORDERS: tuple[str, ...] = ("blocked", "interleaved")
BENCHES: tuple[str, ...] = ("so101", "sim")
STOPPING_KINDS: tuple[str, ...] = ("sequential",)   # analysis.sequential's test (spabench compare)


def _where(campaign: str) -> str:
    return f"campaign '{campaign}'" if campaign else "campaign config"   # a preset, a lab's or a file


def _fail(campaign: str, name: str, message: str, allowed=None) -> ConfigError:
    return field_error(_where(campaign), name, message + ("" if allowed is None else
                                                          f" (allowed: {', '.join(map(str, allowed))})"))


@dataclass
class PolicyEntry:
    """One policy of the campaign: its name (outcomes column), its card (conf/policy/<card>.yaml).

    timer_s / control_hz: None uses the card's (VLA-0's card: 90 s at 10 Hz); a number overrides it.
    counts: None runs every evaluation of the campaign; a mapping {condition: trials per task} runs
    only those conditions, on a spread subset of the same evaluations (ID-only baselines: GR00T F-FT
    {id: 20} = 120 trials, VLA-0 {id: 12} = 72).
    """

    name: str
    card: str
    timer_s: float | None = opt(None, gt=0)      # seconds (None: the card's)
    control_hz: float | None = opt(None, gt=0)   # Hz (None: the card's)
    counts: dict[str, int] | None = opt(None, lo=0)


@dataclass(frozen=True)
class StoppingRule:
    """`campaign.stopping`: a comparison campaign stops running the pairs of policies a and b once the
    sequential test of `spabench compare` (alpha at every look; the hybrid with max_pairs) decides,
    or once max_pairs pairs ran. Pairs are planned scene-major (order: interleaved) as always."""

    kind: str   # required, so a plain field: its choices are checked in stopping_rule()
    a: str
    b: str
    alpha: float = opt(0.05, gt=0, lt=0.5)   # the chance of a false decision over all looks
    max_pairs: int | None = opt(None, lo=1)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "a": self.a, "b": self.b, "alpha": self.alpha, "max_pairs": self.max_pairs}

    def describe(self) -> str:
        more = f", max_pairs {self.max_pairs} (hybrid)" if self.max_pairs is not None else ""
        return f"sequential comparison of {self.a} (a) and {self.b} (b), alpha {self.alpha:g}{more}"


def stopping_rule(campaign: str, value: Any, policies: list[str], order: str) -> StoppingRule | None:
    """`stopping:` checked: kind, a and b two of the campaign's policies, alpha in (0, 0.5), max_pairs."""
    if value is None:
        return None
    rule = typed_node(StoppingRule, value, _where(campaign), "stopping.")
    check_fields(rule, _where(campaign), "stopping.")
    if rule.kind not in STOPPING_KINDS:
        raise _fail(campaign, "stopping.kind", f"{rule.kind!r}", STOPPING_KINDS)
    for key in ("a", "b"):
        if getattr(rule, key) not in policies:
            raise _fail(campaign, f"stopping.{key}", f"{getattr(rule, key)!r} is not a policy of the campaign", policies)
    if rule.a == rule.b:
        raise _fail(campaign, "stopping.b", f"a and b are the same policy {rule.a!r}; a comparison needs two")
    if order != "interleaved":
        raise _fail(campaign, "order", f"{order!r}: a stopping rule needs order: interleaved (scene-major), so that "
                    "each evaluation's pair runs together and a decision saves the pairs after it")
    return rule


@dataclass
class CampaignConfig:
    name: str
    policies: list[PolicyEntry]
    seed: int
    order: str = opt("interleaved", choices=ORDERS)
    tasks: list[str] = opt(list(TASKS), choices=TASKS)
    # Per-condition trial counts overriding vocabulary.CONDITION_COUNTS for every task that has the
    # condition (small demo campaigns). None: the protocol's counts.
    counts: dict[str, int] | None = opt(None, lo=0)
    blind_aliases: bool = True
    bench: str = opt("so101", choices=BENCHES)
    # A comparison campaign's stopping rule ({kind: sequential, a:, b:, alpha:, max_pairs:}); None: run all.
    stopping: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        name = self.name
        if not name.strip():
            raise _fail("", "name", "must be a non-empty string")
        problem = name_problem(name)
        if problem:
            raise _fail("", "name", problem)
        check_fields(self, _where(name))
        self.policies = [_policy(name, i, p) for i, p in enumerate(self.policies or [])]
        if not self.policies:
            raise _fail(name, "policies", "at least one policy is required")
        names = [p.name for p in self.policies]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise _fail(name, "policies", f"duplicate policy name(s) {', '.join(dupes)}")
        self.tasks = list(self.tasks)
        if not self.tasks:
            raise _fail(name, "tasks", "at least one task is required", TASKS)
        if len(set(self.tasks)) != len(self.tasks):
            raise _fail(name, "tasks", "a task is listed twice")
        if self.counts is not None:
            self.counts = dict(self.counts)
            for condition in self.counts:
                if condition not in CONDITIONS:
                    raise _fail(name, "counts", f"unknown condition {condition!r}", CONDITIONS)
        protocol = self.trial_counts()
        for i, p in enumerate(self.policies):
            for condition, n in (p.counts or {}).items():
                most = max((per.get(condition, 0) for per in protocol.values()), default=0)
                if n > most:
                    raise _fail(name, f"policies[{i}].counts.{condition}", f"{n} trials per task, but the campaign "
                                f"plans {most} {condition} evaluations per task (a policy runs a subset of them)")
        for task, per in self.trial_counts().items():
            ood, direct = per.get("ood", 0), per.get("direct", 0)
            para = max(per.get("paraphrase_ood", 0), per.get("paraphrase_direct", 0))
            if direct > ood:
                raise _fail(name, "counts.direct", f"{task}: {direct} direct trials need as many OOD trials on "
                            f"the same matched scenes, but ood is {ood}")
            if para > direct:
                raise _fail(name, "counts.paraphrase_ood", f"{task}: paraphrase trials ({para}) sit on the "
                            f"paraphrase subset of the direct-control scenes, but direct is {direct}")
        if sum(n for per in self.trial_counts().values() for n in per.values()) == 0:
            raise _fail(name, "counts", "the campaign plans no trials")
        rule = stopping_rule(name, self.stopping, names, self.order)
        self.stopping = None if rule is None else rule.as_dict()

    def stopping_rule(self) -> StoppingRule | None:
        """The campaign's stopping rule, typed (None: every planned trial runs)."""
        return None if self.stopping is None else StoppingRule(**self.stopping)

    def trial_counts(self) -> dict[str, dict[str, int]]:
        """task -> condition -> trials per policy (protocol counts with this campaign's overrides)."""
        out = {}
        for task in self.tasks:
            per = dict(CONDITION_COUNTS[task])
            for condition, n in (self.counts or {}).items():
                if condition in per:
                    per[condition] = int(n)
            out[task] = per
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "policies": [{"name": p.name, "card": p.card, "timer_s": p.timer_s, "control_hz": p.control_hz,
                          "counts": None if p.counts is None else dict(sorted(p.counts.items()))}
                         for p in self.policies],
            "seed": int(self.seed),
            "order": self.order,
            "tasks": list(self.tasks),
            "counts": None if self.counts is None else {k: int(v) for k, v in sorted(self.counts.items())},
            "blind_aliases": bool(self.blind_aliases),
            "bench": self.bench,
            # only when set: the config hash of every campaign planned without one stays as it was
            **({"stopping": dict(self.stopping)} if self.stopping is not None else {}),
        }


def _policy(campaign: str, index: int, value: Any) -> PolicyEntry:
    where = f"policies[{index}]"
    entry = typed_node(PolicyEntry, value, _where(campaign), f"{where}.")
    check_fields(entry, _where(campaign), f"{where}.")
    for key in ("name", "card"):
        text = getattr(entry, key)
        problem = name_problem(text)  # it becomes the alias, trial ids and episode folders (i10)
        if problem:
            raise _fail(campaign, f"{where}.{key}", problem)
    counts = None
    if entry.counts is not None:
        counts = dict(plain_container(entry.counts))
        for condition in counts:
            if condition not in CONDITIONS:
                raise _fail(campaign, f"{where}.counts", f"unknown condition {condition!r}", CONDITIONS)
    return PolicyEntry(entry.name, entry.card, None if entry.timer_s is None else float(entry.timer_s),
                       None if entry.control_hz is None else float(entry.control_hz), counts)


def campaign_from_mapping(data: Any) -> CampaignConfig:
    """A CampaignConfig from a plain mapping or an OmegaConf node, rejecting unknown fields."""
    if not isinstance(data, Mapping):
        data = plain_container(data)
    if isinstance(data, CampaignConfig):
        return data
    values = dict(data) if isinstance(data, Mapping) else data
    if isinstance(values, dict) and values.get("tasks", ()) is None:
        values.pop("tasks")
    name = str(values.get("name") or "") if isinstance(values, dict) else ""
    if isinstance(values, dict) and isinstance(values.get("policies"), list):   # each item named by its place
        values["policies"] = [_policy(name, i, p) for i, p in enumerate(values["policies"])]
    return typed_node(CampaignConfig, values, _where(name))


def campaign_group() -> Any:
    """The `campaign` group field of a command's config (what `plan` plans)."""
    return group("what is planned (conf/campaign/)", "spabench.plan.config:campaign_from_mapping",
                 "spabench.plan.config:CampaignConfig")
