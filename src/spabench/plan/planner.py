"""From a suite and a campaign config to a trial plan: conditions, matched subsets, ids, order, aliases.

Evaluation ids name one scene under one trial condition and are numbered over the whole suite
(every scene eligible for every condition, in vocabulary order), so they depend on the suite alone:
the same scene under the same condition has the same id for every policy and in every campaign
planned from the same suite. A trial is one policy on one evaluation.

Matching rules: direct trials sit on OOD scenes that carry a matched_group, and every such scene
also gets its OOD trial; paraphrase trials sit on the paraphrase subset of those direct scenes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spabench.errors import ConfigError, DataError
from spabench.ledger import TRIAL_COLUMNS, Ledger, TrialRow
from spabench.plan.aliases import assign_aliases
from spabench.plan.config import CampaignConfig, campaign_from_mapping
from spabench.plan.orders import design_record, run_order
from spabench.suite.model import SceneSpec
from spabench.suite.vocabulary import CONDITION_COUNTS, CONDITIONS, TASKS

# The scene condition each trial condition runs on.
SCENE_CONDITION: dict[str, str] = {
    "id": "id",
    "ood": "ood",
    "direct": "ood",
    "paraphrase_ood": "ood",
    "paraphrase_direct": "ood",
    "cross_task": "cross_task",
    "novel_object": "novel_object",
    "no_intervention": "no_intervention",
    "no_movement": "no_movement",
    "movement_required": "movement_required",
}
_OOD_FAMILY = ("ood", "direct", "paraphrase_ood", "paraphrase_direct")

PLAN_CSV = "plan.csv"
CONFIG_YAML = "config.yaml"


@dataclass(frozen=True)
class Evaluation:
    """One scene under one trial condition; every policy of the campaign runs it once."""

    evaluation_id: str
    task: str
    condition: str
    scene: SceneSpec
    instruction: str
    instruction_variant: str


@dataclass(frozen=True)
class Plan:
    campaign: CampaignConfig
    evaluations: list[Evaluation]
    trials: list[TrialRow]
    aliases: dict[str, str]


def _scene_file(task: str, condition: str) -> str:
    return f"tasks/{task}/scenes/{SCENE_CONDITION[condition]}.yaml"


def eligible_scenes(suite, task: str, condition: str) -> list[SceneSpec]:
    """Scenes a trial condition may use, sorted by scene id."""
    scenes = list(suite.scenes_for(task, SCENE_CONDITION[condition]))
    if condition == "direct":
        scenes = [s for s in scenes if s.matched_group]
    elif condition in ("paraphrase_ood", "paraphrase_direct"):
        scenes = [s for s in scenes if s.matched_group and s.paraphrase]
    return sorted(scenes, key=lambda s: s.scene_id)


def evaluation_ids(suite) -> dict[tuple[str, str], str]:
    """(condition, scene_id) -> evaluation id, numbered over the whole suite (not the campaign)."""
    keys: list[tuple[str, str]] = []
    for task in TASKS:
        if task not in suite.tasks:
            continue
        for condition in CONDITIONS:
            if condition in CONDITION_COUNTS[task]:
                keys.extend((condition, s.scene_id) for s in eligible_scenes(suite, task, condition))
    width = max(4, len(str(len(keys))))
    return {key: f"E{i + 1:0{width}d}" for i, key in enumerate(keys)}


def spread_pick(candidates: Sequence[SceneSpec], n: int, already: Iterable[SceneSpec] = ()) -> list[SceneSpec]:
    """n scenes spread over as many cells as possible (deterministic: least-used cell first, by id)."""
    queues: dict[str, list[SceneSpec]] = {}
    for scene in sorted(candidates, key=lambda s: s.scene_id):
        queues.setdefault(scene.cell.key, []).append(scene)
    used = {key: 0 for key in queues}
    for scene in already:
        if scene.cell.key in used:
            used[scene.cell.key] += 1
    rank = {key: i for i, key in enumerate(queues)}
    picked: list[SceneSpec] = []
    while len(picked) < n:
        open_cells = [k for k, q in queues.items() if q]
        if not open_cells:
            break
        cell = min(open_cells, key=lambda k: (used[k], rank[k]))
        picked.append(queues[cell].pop(0))
        used[cell] += 1
    return sorted(picked, key=lambda s: s.scene_id)


def _need(task: str, condition: str, n: int, available: int, what: str) -> None:
    if n > available:
        raise DataError(_scene_file(task, condition),
                        f"the campaign needs {n} {condition} trials of {task} on {what}, the suite has {available}")


def select_scenes(suite, task: str, counts: Mapping[str, int]) -> dict[str, list[SceneSpec]]:
    """condition -> the scenes its trials use, honouring the matching rules."""
    chosen: dict[str, list[SceneSpec]] = {}
    n_ood, n_direct = counts.get("ood", 0), counts.get("direct", 0)
    n_pood, n_pdirect = counts.get("paraphrase_ood", 0), counts.get("paraphrase_direct", 0)
    if any(counts.get(c, 0) for c in _OOD_FAMILY):
        ood = eligible_scenes(suite, task, "ood")
        matched = eligible_scenes(suite, task, "direct")
        para = eligible_scenes(suite, task, "paraphrase_ood")
        n_para = max(n_pood, n_pdirect)
        _need(task, "paraphrase_ood", n_para, len(para), "paraphrase-subset scenes")
        _need(task, "direct", n_direct, len(matched), "matched OOD scenes (matched_group set)")
        _need(task, "ood", n_ood, len(ood), "OOD scenes")
        para_pick = spread_pick(para, n_para)
        taken = {s.scene_id for s in para_pick}
        direct_pick = para_pick + spread_pick([s for s in matched if s.scene_id not in taken],
                                              n_direct - n_para, already=para_pick)
        taken = {s.scene_id for s in direct_pick}
        ood_pick = direct_pick + spread_pick([s for s in ood if s.scene_id not in taken],
                                             n_ood - n_direct, already=direct_pick)
        chosen["ood"] = sorted(ood_pick, key=lambda s: s.scene_id)
        chosen["direct"] = sorted(direct_pick, key=lambda s: s.scene_id)
        # both paraphrase conditions on the same scenes (the four-condition comparison)
        chosen["paraphrase_ood"] = para_pick[:n_pood]
        chosen["paraphrase_direct"] = para_pick[:n_pdirect]
    for condition, n in counts.items():
        if condition in _OOD_FAMILY or n == 0:
            continue
        scenes = eligible_scenes(suite, task, condition)
        _need(task, condition, n, len(scenes), f"{SCENE_CONDITION[condition]} scenes")
        chosen[condition] = spread_pick(scenes, n)
    return {c: s for c, s in chosen.items() if s}


def direct_scene(suite, ood: SceneSpec) -> SceneSpec:
    """The scene a direct control plays on: the declared direct variant of a matched OOD scene (Object
    State: the non-target twin removed) when the suite has one, else the OOD scene itself."""
    if ood.matched_group:
        for scene in suite.scenes.values():
            if scene.condition == "direct" and scene.matched_group == ood.matched_group:
                return scene
    return ood


def instruction_for(scene: SceneSpec, condition: str) -> tuple[str, str]:
    """(instruction text, instruction_variant) of a scene under a trial condition."""
    ins = scene.instructions
    field, variant = {
        "direct": ("direct", "original"),
        "paraphrase_ood": ("paraphrase_spatial", "paraphrase"),
        "paraphrase_direct": ("paraphrase_direct", "paraphrase"),
    }.get(condition, ("spatial", "original"))
    text = getattr(ins, field)
    if not text or not str(text).strip():
        raise DataError(_scene_file(scene.task, condition), f"scene {scene.scene_id} has no {field} instruction "
                        f"but is planned for {condition}", field=f"instructions.{field}")
    return str(text), variant


def policy_rates(campaign: CampaignConfig, cards: Mapping[str, Any] | None = None) -> dict[str, tuple[float, float]]:
    """policy name -> (timer_s, control_hz): the campaign's value where it sets one, else the card's."""
    from spabench.policy.card import load_card

    out = {}
    for entry in campaign.policies:
        timer, rate = entry.timer_s, entry.control_hz
        if timer is None or rate is None:   # the card says what the entry leaves out
            card = (cards or {}).get(entry.card) or load_card(entry.card)
            timer = timer if timer is not None else float(card.timer_s)
            rate = rate if rate is not None else float(card.control_hz)
        out[entry.name] = (float(timer), float(rate))
    return out


def policy_evaluations(campaign: CampaignConfig, evaluations: Sequence[Evaluation]) -> dict[str, set[str]]:
    """policy name -> the evaluation ids it runs: all, or (entry.counts) a spread subset per task and
    condition of the same evaluations (the same scene specifications as the full policies)."""
    out: dict[str, set[str]] = {}
    for entry in campaign.policies:
        if entry.counts is None:
            out[entry.name] = {e.evaluation_id for e in evaluations}
            continue
        chosen: set[str] = set()
        for (_task, condition), group in _by_task_condition(evaluations).items():
            n = entry.counts.get(condition, 0)
            if n:
                picked = {s.scene_id for s in spread_pick([e.scene for e in group], n)}
                chosen |= {e.evaluation_id for e in group if e.scene.scene_id in picked}
        out[entry.name] = chosen
    return out


def _by_task_condition(evaluations: Sequence[Evaluation]) -> dict[tuple[str, str], list[Evaluation]]:
    groups: dict[tuple[str, str], list[Evaluation]] = {}
    for e in sorted(evaluations, key=lambda e: e.evaluation_id):
        groups.setdefault((e.task, e.condition), []).append(e)
    return groups


def build_plan(campaign: CampaignConfig, suite, cards: Mapping[str, Any] | None = None) -> Plan:
    """The campaign's evaluations and trials, in run order. `cards` (card name -> PolicyCard; loaded
    from conf/policy when absent) give the timer and control rate a campaign entry leaves out."""
    for task in campaign.tasks:
        if task not in suite.tasks:
            raise DataError("tasks/suite.yaml", f"campaign '{campaign.name}' plans task {task!r}, "
                            "which the suite does not hold", allowed=sorted(suite.tasks))
    ids = evaluation_ids(suite)
    evaluations: list[Evaluation] = []
    for task, per in campaign.trial_counts().items():
        for condition, scenes in select_scenes(suite, task, per).items():
            for scene in scenes:
                played = direct_scene(suite, scene) if condition in ("direct", "paraphrase_direct") else scene
                text, variant = instruction_for(played, condition)
                evaluations.append(Evaluation(ids[(condition, scene.scene_id)], task, condition, played,
                                              text, variant))
    names = [p.name for p in campaign.policies]
    entries = {p.name: p for p in campaign.policies}
    rates = policy_rates(campaign, cards)
    runs = policy_evaluations(campaign, evaluations)
    evaluations = [e for e in evaluations if any(e.evaluation_id in runs[n] for n in names)]
    aliases = assign_aliases(names, campaign.seed, campaign.blind_aliases)
    pairs = run_order(evaluations, names, campaign.order, campaign.seed, campaign.tasks,
                      key=lambda e: (e.task, e.condition, e.scene.scene_id),
                      policies_for=lambda e: [n for n in names if e.evaluation_id in runs[n]])
    trials = []
    for i, (ev, policy) in enumerate(pairs):
        scene = ev.scene
        trials.append(TrialRow(
            trial_id=f"{ev.evaluation_id}-{aliases[policy]}",
            evaluation_id=ev.evaluation_id,
            policy=policy,
            card=entries[policy].card,
            alias=aliases[policy],
            task=ev.task,
            condition=ev.condition,
            scene_id=scene.scene_id,
            scene_condition=scene.condition,
            matched_group=scene.matched_group or None,
            cell=scene.cell.key,
            withheld=bool(scene.withheld),
            instruction=ev.instruction,
            instruction_variant=ev.instruction_variant,
            timer_s=rates[policy][0],
            order=i + 1,
            control_hz=rates[policy][1],
        ))
    return Plan(campaign, sorted(evaluations, key=lambda e: e.evaluation_id), trials, aliases)


# ---------------------------------------------------------------------------- config hash
def _suite_files(tasks_root: Path, hardware_root: Path) -> list[tuple[str, Path]]:
    if not tasks_root.is_dir():
        raise DataError(tasks_root, "suite folder not found", field="suite.root")
    files = [(f"tasks/{p.relative_to(tasks_root).as_posix()}", p) for p in tasks_root.rglob("*")
             if p.is_file() and p.suffix in (".yaml", ".yml")
             and not any(part.startswith(".") for part in p.relative_to(tasks_root).parts)]
    bench = hardware_root / "bench.yaml"
    if bench.is_file():
        files.append(("hardware/bench.yaml", bench))
    return sorted(files)


def _bench_yaml(hardware_root: Path) -> dict[str, Any]:
    from spabench.suite.yamlio import read_yaml

    path = hardware_root / "bench.yaml"
    data = read_yaml(path) if path.is_file() else {}
    return data if isinstance(data, dict) else {}


def safety_limits(hardware_root: str | os.PathLike) -> Any:
    """The arm's safety limits as bench.yaml states them now (its SAFETY_GROUP; None when left out)."""
    from spabench.suite.loader import SAFETY_GROUP

    return _bench_yaml(Path(hardware_root)).get(SAFETY_GROUP)


def _file_digest(label: str, path: Path, legacy: bool) -> bytes:
    """A suite file's digest; bench.yaml's without its safety limits (not part of the plan's identity)."""
    if label != "hardware/bench.yaml" or legacy:
        return hashlib.sha256(path.read_bytes()).digest()
    from spabench.suite.loader import SAFETY_GROUP

    rest = {k: v for k, v in _bench_yaml(path.parent).items() if k != SAFETY_GROUP}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":"), default=str).encode()).digest()


def config_hash(campaign: CampaignConfig, suite_settings: Mapping[str, Any], tasks_root: str | os.PathLike,
                hardware_root: str | os.PathLike, *, legacy: bool = False) -> str:
    """sha256 over the canonical resolved campaign + suite config and the suite's data files.

    Paths enter as configured (relative), file contents by their own digest, so moving the checkout
    keeps the hash while editing a scene, prompt or the bench geometry changes it. The arm's safety
    limits (bench.yaml's SAFETY_GROUP) are left out: changing one never orphans a campaign.
    `legacy`: the v1 hash, over bench.yaml's bytes, that campaigns planned before v2 carry.
    """
    digest = hashlib.sha256(b"spabench-config-hash-v1\0" if legacy else b"spabench-config-hash-v2\0")
    canonical = json.dumps({"campaign": campaign.as_dict(), "suite": dict(suite_settings)},
                           sort_keys=True, separators=(",", ":"), default=str)
    digest.update(canonical.encode())
    for label, path in _suite_files(Path(tasks_root), Path(hardware_root)):
        digest.update(b"\0" + label.encode() + b"\0")
        digest.update(_file_digest(label, path, legacy))
    return digest.hexdigest()


def read_campaign_config(campaign_dir: str | os.PathLike) -> dict[str, Any]:
    """DIR/config.yaml as written by the planner: {campaign, suite, config_hash}."""
    import yaml

    path = Path(campaign_dir) / CONFIG_YAML
    if not path.is_file():
        raise ConfigError(f"{path}: not found; is {campaign_dir} a campaign folder written by `spabench plan`?")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or "campaign" not in data or "suite" not in data:
        raise DataError(path, "expected the keys campaign, suite, config_hash")
    return data


def planned_bench_kind(campaign_dir: str | os.PathLike) -> str | None:
    """The bench kind (so101 | sim) DIR's campaign was planned for; None when DIR holds no plan."""
    folder = Path(campaign_dir)
    if not (folder / CONFIG_YAML).is_file():
        return None
    return str(read_campaign_config(folder)["campaign"].get("bench") or "so101")


def planned_relation_rule(campaign_dir: str | os.PathLike):
    """The Relational Placement rule DIR's campaign was planned with (the paper's when unrecorded)."""
    from spabench.suite.success import DEFAULT_RELATION_RULE, RelationRule

    folder = Path(campaign_dir)
    if not (folder / CONFIG_YAML).is_file():
        return None
    recorded = read_campaign_config(folder)["suite"].get("relation")
    return RelationRule.from_mapping(recorded) if recorded else DEFAULT_RELATION_RULE


def campaign_hardware_root(campaign_dir: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """The hardware folder DIR's campaign was planned with (its config.yaml's suite.hardware)."""
    from spabench.paths import repo_root, resolve

    suite = read_campaign_config(campaign_dir)["suite"]
    return resolve(suite.get("hardware", "hardware"), Path(root) if root is not None else repo_root())


def hash_for_campaign_dir(campaign_dir: str | os.PathLike, root: str | os.PathLike | None = None, *,
                          legacy: bool = False) -> str:
    """The config hash that DIR's campaign has *now* (its config.yaml with today's suite files).

    Pass it to `Ledger.open(..., expect_hash=...)` when resuming: a mismatch means the suite or the
    campaign changed since planning.
    """
    from spabench.paths import repo_root, resolve

    data = read_campaign_config(campaign_dir)
    campaign = campaign_from_mapping(data["campaign"])
    suite = data["suite"]
    base = Path(root) if root is not None else repo_root()
    return config_hash(campaign, suite, resolve(suite.get("root", "tasks"), base),
                       resolve(suite.get("hardware", "hardware"), base), legacy=legacy)


def hashes_for_campaign_dir(campaign_dir: str | os.PathLike, root: str | os.PathLike | None = None
                            ) -> tuple[str, str]:
    """The hashes a resumable campaign may carry: today's (v2) and the v1 hash of a campaign planned
    before the safety limits were left out of it."""
    return (hash_for_campaign_dir(campaign_dir, root), hash_for_campaign_dir(campaign_dir, root, legacy=True))


def open_campaign(campaign_dir: str | os.PathLike, *, readonly: bool = False, check_hash: bool = True,
                  root: str | os.PathLike | None = None, lock: bool = False, **open_kw) -> Ledger:
    """DIR's ledger, refusing it (ConfigError) when the campaign config or suite files changed since planning.

    `lock=True` for a writer session (Ledger.open: one session per campaign)."""
    expect = hashes_for_campaign_dir(campaign_dir, root) if check_hash else None
    return Ledger.open(Path(campaign_dir), expect_hash=expect, readonly=readonly, lock=lock, **open_kw)


# ---------------------------------------------------------------------------- writing
def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def plan_csv_text(trials: Sequence[TrialRow]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(TRIAL_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for t in trials:
        row = t.as_dict()
        row["matched_group"] = row["matched_group"] or ""
        row["withheld"] = "true" if row["withheld"] else "false"
        writer.writerow(row)
    return buf.getvalue()


def write_campaign(out_dir: str | os.PathLike, plan: Plan, digest: str,
                   suite_settings: Mapping[str, Any], ledger_url: str | None = None,
                   ledger_grant: str | None = None, config_dir: str | os.PathLike | None = None,
                   limits: Any = None) -> dict[str, Path]:
    """DIR/ledger.sqlite (new, never overwritten; with `ledger_url` a new PostgreSQL schema and its
    pointer DIR/ledger.pg.json instead), DIR/plan.csv and DIR/config.yaml. `limits`: the arm's safety
    limits at planning (`safety_limits`), the ledger's reference for a later change."""
    import yaml

    from spabench import __version__
    from spabench.outputs import add_entries, claim_new_folder

    out = Path(out_dir)
    ledger_path = out / Ledger.FILENAME
    if Ledger.exists(out):
        raise ConfigError(Ledger._exists_message(ledger_path))
    claim_new_folder(out, "plan", refusal=not_a_campaign_message(out))
    campaign = plan.campaign
    meta = {
        "campaign": campaign.name,
        "seed": campaign.seed,
        "order": campaign.order,
        "bench": campaign.bench,
        "blind_aliases": campaign.blind_aliases,
        "aliases": plan.aliases,
        "policies": [{"name": p.name, "card": p.card, "timer_s": p.timer_s, "control_hz": p.control_hz,
                      "counts": p.counts} for p in campaign.policies],
        "carryover": design_record([p.name for p in campaign.policies], campaign.seed, campaign.order),
        "n_evaluations": len(plan.evaluations),
        "spabench_version": __version__,
        "safety_limits": limits,
    }
    Ledger.create(ledger_path, plan.trials, digest, meta, url=ledger_url, grant=ledger_grant).close()
    if ledger_url not in (None, "", "sqlite"):
        ledger_path = out / Ledger.POINTER
    _atomic_write(out / PLAN_CSV, plan_csv_text(plan.trials))
    resolved = {"campaign": campaign.as_dict(), "suite": dict(suite_settings), "config_hash": digest}
    if config_dir is not None:   # later commands use the lab's files it was planned with (not hashed)
        resolved["config_dir"] = str(Path(config_dir).resolve())
    _atomic_write(out / CONFIG_YAML, yaml.safe_dump(resolved, sort_keys=False))
    add_entries(out, ledger_path.name, PLAN_CSV, CONFIG_YAML)
    return {"ledger": ledger_path, "plan": out / PLAN_CSV, "config": out / CONFIG_YAML}


def not_a_campaign_message(out: Path) -> str:
    entries = sorted(p.name for p in Path(out).iterdir()) if Path(out).is_dir() else []
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    return (f"out={out} is not empty ({shown}) and is not a campaign; plan writes a new campaign only "
            "into a new or empty folder and never deletes or overwrites files: choose another folder")


def read_plan_csv(path: str | os.PathLike) -> list[TrialRow]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [TrialRow.from_mapping(row) for row in csv.DictReader(fh)]


# ---------------------------------------------------------------------------- summary
def count_table(plan: Plan) -> dict[tuple[str, str], dict[str, int]]:
    """(task, condition) -> alias (or policy when not blind) -> trials."""
    label = (lambda t: t.alias) if plan.campaign.blind_aliases else (lambda t: t.policy)
    table: dict[tuple[str, str], dict[str, int]] = {}
    for t in plan.trials:
        per = table.setdefault((t.task, t.condition), {})
        per[label(t)] = per.get(label(t), 0) + 1
    return table


def summary_table(plan: Plan):
    """A rich Table of trials per task x condition (rows) x policy (columns; aliases when blind)."""
    from rich.table import Table

    counts = count_table(plan)
    blind = plan.campaign.blind_aliases
    who = sorted({t.alias if blind else t.policy for t in plan.trials}, key=lambda a: (len(a), a))
    table = Table(title=f"campaign {plan.campaign.name}: trials per task x condition x "
                        f"{'alias' if blind else 'policy'}")
    table.add_column("task")
    table.add_column("condition")
    for w in who:
        table.add_column(w, justify="right")
    c_rank = {c: i for i, c in enumerate(CONDITIONS)}
    for task in plan.campaign.tasks:
        rows = sorted((c for (t, c) in counts if t == task), key=c_rank.__getitem__)
        for i, condition in enumerate(rows):
            per = counts[(task, condition)]
            table.add_row(task if i == 0 else "", condition, *[str(per.get(w, 0)) for w in who])
        totals = [sum(counts[(task, c)].get(w, 0) for c in rows) for w in who]
        table.add_row("", "total", *map(str, totals), style="bold", end_section=True)
    grand = [sum(per.get(w, 0) for per in counts.values()) for w in who]
    table.add_row("all tasks", "total", *map(str, grand), style="bold")
    return table
