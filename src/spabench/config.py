"""The root config every `spabench` command receives: the top-level keys, typed, plus its groups.

The pattern every command follows:

- A top-level key of conf/config.yaml is a field of `SpabenchConfig` declared with `key(...)`: its
  type, default, allowed range or choices, the commands that read it and one line of help (which
  `spabench <command> --help` prints). The same key, with the same default, stays in
  conf/config.yaml with a comment (a test checks that both agree).
- A command's entry in cli/commands.py names the config groups it reads (bench, policy, campaign,
  operator, suite); `from_mapping` builds exactly those into their typed objects (BenchConfig,
  PolicyCard, CampaignConfig, OperatorConfig, SuiteConfig); groups the command does not read are None.
- The CLI composes conf/ with Hydra, turns the result into plain data and calls
  `SpabenchConfig.from_mapping`, which validates every top-level key and every group the command
  reads before the command runs; the command function then takes the object
  (`def run(cfg: SpabenchConfig) -> int`) and reads typed attributes only.
- Tests and library callers build the same object: `SpabenchConfig.from_mapping({...}, groups=(...))`.

No LeRobot, torch or Hydra imports here: configs validate on machines without the bench extra.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from spabench.errors import ConfigError

__all__ = ["SpabenchConfig", "Key", "key", "GROUPS", "top_level_keys", "keys_for"]

# Which builder turns each config group into its typed object (imported lazily; none imports LeRobot).
GROUPS: dict[str, str] = {
    "bench": "spabench.bench.config:bench_config",
    "policy": "spabench.policy.card:card_from_mapping",
    "campaign": "spabench.plan.config:campaign_from_mapping",
    "operator": "spabench.operator.config:operator_config",
    "suite": "spabench.suite.config:suite_config",
}


# Modules that register further bench types with BenchConfig (the twin registers "sim" itself; the
# bench package knows nothing of it). Imported before a bench group is built.
BENCH_TYPE_MODULES: tuple[str, ...] = ("spabench.sim.bench_config",)
# Operator types that register themselves from outside the operator package (imported on demand).
OPERATOR_TYPE_MODULES: dict[str, str] = {"web": "spabench.console.operator"}
# Sections of a group that another package types: (group, key) -> the dataclass that checks them when
# the group is built (a typo in operator.console fails before anything connects). The operator
# package keeps the section as a plain mapping, so it never imports the console (which imports it).
GROUP_SECTIONS: dict[tuple[str, str], str] = {("operator", "console"): "spabench.console.config:ConsoleConfig"}


def _import(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Key:
    """What a top-level key takes. kind: str, int, float, bool, Path, dict or list."""

    kind: type
    help: str
    commands: tuple[str, ...]
    optional: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None

    def allowed(self) -> str:
        if self.choices is not None:
            text = " | ".join(map(str, self.choices))
        elif self.kind is bool:
            text = "true | false"
        elif self.kind in (int, float):
            noun = "an integer" if self.kind is int else "a number"
            if self.minimum is not None and self.maximum is not None:
                text = f"{noun} {self.minimum:g}..{self.maximum:g}"
            elif self.minimum is not None:
                text = f"{noun} >= {self.minimum:g}"
            else:
                text = noun
        elif self.kind is Path:
            text = "a path"
        elif self.kind is dict:
            text = "a mapping"
        elif self.kind is list:
            text = "a list, e.g. [0.3,0.6]"
        else:
            text = "a string"
        return text + (", or null" if self.optional else "")

    def check(self, name: str, value: Any) -> Any:
        """The value converted to the key's type, or a ConfigError naming key, value and allowed."""
        if value is None:
            if self.optional:
                return None
            raise self._bad(name, value)
        kind = self.kind
        if kind is bool:
            if not isinstance(value, bool):
                raise self._bad(name, value)
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self._bad(name, value)
        elif kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise self._bad(name, value)
            value = float(value)
        elif kind is Path:
            if not isinstance(value, (str, Path)) or not str(value).strip():
                raise self._bad(name, value)
            value = Path(str(value)).expanduser().resolve()
        elif kind is dict:
            if not isinstance(value, Mapping):
                raise self._bad(name, value)
            value = dict(value)
        elif kind is list:
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
                raise self._bad(name, value)
            value = list(value)
        elif not isinstance(value, str):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)   # host=10 or api_key=1234 arrive as numbers from the command line
            else:
                raise self._bad(name, value)
        if self.choices is not None and value not in self.choices:
            raise self._bad(name, value)
        if self.minimum is not None and value < self.minimum:
            raise self._bad(name, value)
        if self.maximum is not None and value > self.maximum:
            raise self._bad(name, value)
        return value

    def _bad(self, name: str, value: Any) -> ConfigError:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        return ConfigError(f"conf/config.yaml: key '{name}': {shown} (allowed: {self.allowed()})")


def key(default: Any, kind: type, help: str, commands: tuple[str, ...] | str, **spec: Any) -> Any:
    """A top-level key: a dataclass field whose metadata says how to check it and who reads it."""
    commands = (commands,) if isinstance(commands, str) else tuple(commands)
    meta = {"spabench": Key(kind, help, commands, **spec)}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


SERVE = ("serve lerobot", "serve scripted")
ALL = ("plan", "run", "score", "console", "report", "power", "compare", "export lerobot", "export outcomes",
       "import lerobot", "serve lerobot",
       "serve scripted", "demo",
       "suite generate", "suite validate", "ledger copy", "ledger collect", "ledger status", "servers up",
       "servers status", "servers down", "bench check")


@dataclass
class SpabenchConfig:
    """Everything one command was given, validated (see the module docstring for the pattern)."""

    # ---- groups: the typed objects of the groups the command reads; None for the others
    bench: Any = None       # spabench.bench.config.BenchConfig
    policy: Any = None      # spabench.policy.card.PolicyCard
    campaign: Any = None    # spabench.plan.config.CampaignConfig
    operator: Any = None    # spabench.operator.config.OperatorConfig
    suite: Any = None       # spabench.suite.config.SuiteConfig

    # ---- top-level keys (conf/config.yaml)
    out: Path | None = key(None, Path, "output folder (export outcomes: the CSV file; init: the lab folder, "
                           "also its first word)",
                           ("plan", "report", "compare", "export lerobot", "export outcomes", "import lerobot", "demo",
                            "suite generate", "ledger collect", "bench check", "init"), optional=True)
    campaign_dir: Path | None = key(
        None, Path, "the campaign folder written by `spabench plan` (given as campaign=DIR)",
        ("run", "score", "console", "report", "power", "compare", "export lerobot", "export outcomes",
         "ledger collect", "ledger status", "servers up", "servers status", "servers down", "bench check"),
        optional=True)
    outcomes: Path | None = key(None, Path, "an outcomes CSV to report on (instead of campaign=DIR)",
                                ("report", "power", "compare"), optional=True)
    checkpoint: Path | None = key(None, Path, "a local LeRobot checkpoint folder", "serve lerobot",
                                  optional=True)
    host: str = key("127.0.0.1", str, "where the server listens", SERVE)
    port: int | None = key(None, int, "where the server listens (null: the policy card's port)", SERVE,
                           optional=True, minimum=0, maximum=65535)
    api_key: str | None = key(None, str, "require `Authorization: Api-Key <key>` from clients", SERVE,
                              optional=True)
    allow_insecure: bool = key(False, bool, "allow a non-loopback host without api_key (anyone on the network "
                               "could drive it)", SERVE)
    max_frame_bytes: int | None = key(None, int, "largest request frame (null: 4 MiB, two native 640x480 frames)",
                                      SERVE, optional=True, minimum=1)
    device: str = key("cpu", str, "torch device for the checkpoint", "serve lerobot")
    mode: str | None = key(None, str, "which stand-in policy: compositional | memorising | state_blind (null: the "
                           "one the policy card names, policy=scripted_<mode>)", "serve scripted", optional=True)
    grasp_noise_cm: float = key(0.0, float, "grasp position noise of the stand-in", "serve scripted",
                                minimum=0.0)
    seed: int = key(0, int, "stand-in policy seed", ("serve scripted", "demo"), minimum=0)
    unpaired: str | None = key(None, str, "a direct/paraphrase row without its partner: error (the default for a "
                               "CSV) | exclude (the default for a campaign, whose partner trials may still be "
                               "pending); at `compare`, a rollout of a or b without the other's on its evaluation",
                               ("report", "demo", "compare"), optional=True, choices=("error", "exclude"))
    bootstrap: int = key(100000, int, "bootstrap resamples (the published analysis: 100,000)", ("report", "demo"),
                         minimum=1)
    bootstrap_seed: int = key(20260906, int, "bootstrap seed (the published analysis's)", ("report", "demo"),
                              minimum=0)
    half_width: float | None = key(None, float, "target half-width of the 95% interval per cell (0.1 = +-10 pp)",
                                   "power", optional=True)
    rate: float = key(0.5, float, "assumed success rate for half_width (0.5 = the worst case)", "power")
    rates: list[float] | None = key(None, list, "assumed rates of a paired contrast, e.g. rates=[0.3,0.6] "
                                    "(matched pairs needed)", "power", optional=True)
    discordance: float | None = key(None, float, "assumed share of discordant pairs (null: the outcomes "
                                    "independent)", "power", optional=True)
    alpha: float = key(0.05, float, "two-sided test level; at `compare` the chance of a false decision over all "
                       "looks, in (0, 0.5)", ("power", "compare"))
    power: float = key(0.8, float, "target power of the paired test", "power")
    a: str | None = key(None, str, "the first policy of the comparison (as the outcomes name it)", "compare",
                        optional=True)
    b: str | None = key(None, str, "the second policy of the comparison", "compare", optional=True)
    max_pairs: int | None = key(None, int, "the most pairs the comparison will run: the hybrid test, with a final "
                                "exact McNemar test at max_pairs (null: the purely sequential test)", "compare",
                                optional=True, minimum=1)
    verbose: bool = key(False, bool, "print one line per look (pair) as well as the decision (also --verbose)",
                        "compare")
    display_names: dict[str, str] = key({}, dict, "policy -> its name in figures and report.md, e.g. "
                                        "'display_names.groot_fllm=GR00T-N1.7 F-LLM'", "report")
    max_trials: int | None = key(None, int, "stop after this many trials (null: every pending one)",
                                 "run", optional=True, minimum=1)
    attempt: str | None = key(None, str, "one attempt to rescore (or invalidate), e.g. attempt=E0001-P2-a1",
                              "score", optional=True)
    reason: str | None = key(None, str, "why the score is corrected / the attempt is invalid (required with "
                             "attempt=); at `run`, why a new policy server identity is accepted (required with "
                             "accept_new_identity=true)", ("score", "run"), optional=True)
    invalidate: bool = key(False, bool, "declare the complete attempt invalid (its trial is re-run)", "score")
    second_rater: bool = key(False, bool, "score blind, as operator.rater, the attempts another rater scored and "
                             "you have not (their scores, stop reason and motion pre-fill hidden): the "
                             "report's rater agreement", "score")
    repo_id: str | None = key(None, str, "the exported dataset's repo id (org/name)", "export lerobot", optional=True)
    include_invalid: bool = key(False, bool, "export invalid attempts too", "export lerobot")
    reencode: bool = key(False, bool, "re-encode every camera stream instead of copying it", "export lerobot")
    codec: str | None = key(None, str, "codec for reencode=true (null: libx264)", "export lerobot", optional=True)
    crf: int | None = key(None, int, "quality for reencode=true, lower is better (null: 23)", "export lerobot",
                          optional=True, minimum=0, maximum=51)
    dataset: Path | None = key(None, Path, "a LeRobotDataset v3 folder to import (or a Hub id already in LeRobot's "
                               "local cache)", "import lerobot", optional=True)
    cells: Path | None = key(None, Path, "a CSV mapping each episode to its Spa-Bench cell: episode_index, task, "
                             "condition, evaluation_id [, policy, matched_group, scene_id] (without it: a review "
                             "campaign)", "import lerobot", optional=True)
    lab: str | None = key(None, str, "the lab's name written in every row's lab column (to combine several labs' "
                          "exports into one report; null: left empty)", "export outcomes", optional=True)
    dry_run: bool = key(False, bool, "allow running on a bench of another kind than the campaign was "
                        "planned for (twin vs robot); its attempts are marked dry_run", "run")
    config_dir: Path | None = key(None, Path, "a lab's own folder with bench/, policy/, campaign/ files "
                                  "(used before the installed conf/)", ALL, optional=True)
    cards: dict[str, dict[str, Any]] = key(
        {}, dict, "per-card field overrides: cards.<card>.<field>=value (e.g. cards.pi05.host=10.0.0.5)",
        ("run", "demo", "servers up", "servers status", "servers down", "bench check"))
    figures: dict[str, Any] = key({"width": "single", "style": None, "formats": ["svg"]}, dict,
                                  "how the figures are drawn (the fields of spabench.analysis.figures."
                                  "FigureSettings): figures.width=single|double (a 3.5 in or 7 in column), "
                                  "figures.style=PATH (a lab's own .mplstyle, applied on top of spabench's), "
                                  "figures.formats=[svg,pdf,png] (the files per figure; svg or png shown in "
                                  "the report's pages)",
                                  ("report", "compare"))
    bench_kind: str | None = key(None, str, "report the rollouts of this bench kind only (twin and robot are "
                                 "never pooled)", ("report", "compare"), optional=True, choices=("so101", "sim"))
    ledger: str | None = key(None, str, "where the ledger lives: null/sqlite (a file in the campaign folder) or "
                             "postgresql://[user@]host[:port]/db (no password: PGPASSWORD/PGPASSFILE)",
                             ("plan", "run", "report", "power", "compare", "export outcomes", "ledger copy",
                              "ledger status", "ledger collect"), optional=True)
    ledger_grant: str | None = key(None, str, "the benches' group role on a PostgreSQL ledger, granted what a "
                                   "bench needs", ("plan", "ledger copy"), optional=True)
    bench_id: str | None = key(None, str, "this bench's name in a shared ledger (null: the host name)", "run",
                               optional=True)
    src: Path | None = key(None, Path, "the campaign folder to copy (first positional)", "ledger copy",
                           optional=True)
    dst: Path | None = key(None, Path, "the new campaign folder (its back end: ledger=)", "ledger copy",
                           optional=True)
    bench_dirs: dict[str, str] = key({}, dict, "bench id -> its campaign folder (local path or "
                                     "[user@]host:/path)", "ledger collect")
    launch: bool = key(False, bool, "start the campaign's policy servers from their cards' launch: blocks "
                       "first and stop them at the end", "run")
    accept_new_identity: bool = key(False, bool, "go on although a policy server's identity (checkpoint, "
                                    "metadata) differs from the one the campaign pinned; needs reason=",
                                    "run")
    lease_s: float = key(60.0, float, "on a shared ledger, a claim lapses this long after its bench went "
                         "silent (seconds)", "run", minimum=0.001)
    reconnect_s: float = key(180.0, float, "on a shared ledger, how long a lost connection to its database is "
                             "retried (with backoff) before the session stops; the arm holds meanwhile (seconds)",
                             "run", minimum=0.0)

    requests: int = key(20, int, "`bench check`: inference requests per policy server for its latency "
                        "(p50/p90/max)", "bench check", minimum=1, maximum=10000)
    camera_s: float = key(3.0, float, "how long `bench check` measures each camera's frame rate (seconds; "
                          "longer until every camera could show three new frames)", "bench check",
                          minimum=0.1, maximum=600.0)
    camera_references: Path | None = key(None, Path, "where `bench check` keeps one reference picture per camera "
                                          "(null: bench-checks/references/<robot_id>/ in the current folder)",
                                          ("bench check", "run"), optional=True)
    parts: list | None = key(None, list, "`bench check`: only these parts, e.g. [servers] after a policy server "
                             "moved (null: bus, cameras, servers, system)", "bench check", optional=True)
    accept_cameras: bool = key(False, bool, "`bench check`: the cameras' views are right as they are now (a camera "
                               "was moved on purpose): store them as the new references instead of refusing a "
                               "camera that looks like another's; `run`: go on although a camera looks like "
                               "another's reference (recorded in the ledger)", ("bench check", "run"))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, groups: tuple[str, ...] | list[str] = ()
                     ) -> SpabenchConfig:
        """Validate the top-level keys of `data` and build the groups named in `groups`.

        `data` is plain (the composed config after OmegaConf.to_container, or a test's dict). A group
        value that is already its typed object is kept as is."""
        data = dict(data or {})
        spec = {f.name: f.metadata["spabench"] for f in fields(cls) if "spabench" in f.metadata}
        unknown = sorted(k for k in data if k not in spec and k not in GROUPS)
        if unknown:
            raise ConfigError(f"conf/config.yaml: unknown key '{unknown[0]}' (allowed top-level keys: "
                              f"{', '.join(spec)}; config groups: {', '.join(GROUPS)})")
        values: dict[str, Any] = {}
        for name, k in spec.items():
            if name in data:
                values[name] = k.check(name, data[name])
        cfg = cls(**values)
        cfg._check_cards()
        for group in groups:
            if group not in GROUPS:
                raise ConfigError(f"unknown config group {group!r} (allowed: {', '.join(GROUPS)})")
            node = data.get(group)
            if node is None:
                raise ConfigError(f"conf/config.yaml: config group '{group}' is not set (see conf/{group}/)")
            setattr(cfg, group, build_group(group, node))
        return cfg

    def _check_cards(self) -> None:
        """Each cards.<card> is a mapping; its fields are checked against PolicyCard when `run` loads
        the campaign's cards (before anything connects or is written)."""
        for card, overrides in self.cards.items():
            if not isinstance(overrides, Mapping):
                raise ConfigError(f"conf/config.yaml: key 'cards.{card}': {overrides!r} (allowed: a "
                                  f"mapping of card fields, e.g. cards.{card}.host=10.0.0.5)")
            self.cards[card] = dict(overrides)

    @property
    def ledger_url(self) -> str | None:
        """`ledger=` as a connection: None for the campaign's own back end (null or sqlite), else the
        URL every command that reads or writes the ledger connects with."""
        return None if self.ledger in (None, "", "sqlite") else self.ledger

    def replace(self, **changes: Any) -> SpabenchConfig:
        """A copy with some keys changed (validated like the originals)."""
        spec = {f.name: f.metadata["spabench"] for f in fields(self) if "spabench" in f.metadata}
        for name, value in changes.items():
            if name in spec:
                changes[name] = spec[name].check(name, value)
        return dataclasses.replace(self, **changes)

    def group_dirs(self, group: str) -> list[Path]:
        """Where a group's option files live, first match wins: config_dir/<group>, then conf/<group>."""
        from spabench.paths import option_dirs

        return [d / group for d in option_dirs(self.config_dir)]

    def need(self, group: str) -> Any:
        """The typed object of a group the command reads (a programming error if it was not built)."""
        value = getattr(self, group)
        if value is None:
            raise ConfigError(f"config group '{group}' was not loaded for this command (see conf/{group}/)")
        return value


def build_group(group: str, node: Any) -> Any:
    """One group's typed object from its plain mapping (kept as is when already typed)."""
    if group == "bench":
        for module in BENCH_TYPE_MODULES:
            importlib.import_module(module)
    built = _import(GROUPS[group])(node)
    for (owner, section) in GROUP_SECTIONS:
        if owner == group:
            section_class(group, section).from_mapping(getattr(built, section))
    if group == "operator" and built.type in OPERATOR_TYPE_MODULES:
        importlib.import_module(OPERATOR_TYPE_MODULES[built.type])
    return built


def section_class(group: str, key: str) -> Any:
    """The dataclass another package types a group's section with (GROUP_SECTIONS), or None."""
    target = GROUP_SECTIONS.get((group, key))
    return None if target is None else _import(target)


def top_level_keys() -> dict[str, tuple[Any, Key]]:
    """name -> (default, Key) for every top-level key."""
    out = {}
    for f in fields(SpabenchConfig):
        if "spabench" in f.metadata:
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                raise TypeError(f"top-level key {f.name} has no default")
            out[f.name] = (default, f.metadata["spabench"])
    return out


def keys_for(command: str) -> dict[str, tuple[Any, Key]]:
    """The top-level keys a command reads."""
    return {n: v for n, v in top_level_keys().items() if command in v[1].commands}
