"""`spabench <command> [key=value ...]`: compose conf/ into the command's own config dataclass, call the command.

Composition rules (the README's "Configuration" section documents them for operators):
- `group=option` picks conf/<group>/<option>.yaml; with `config_dir=DIR` the lab's own
  DIR/<group>/<option>.yaml files are options too (and win over spabench's own of the same name).
- every other `key=value` (the command's own key or dotted, e.g. `cards.pi05.host=...`, `bench.port=...`)
  is a Hydra override of the command's schema node (spabench.config.schema_node: each group it reads
  typed by its chosen option's dataclass), registered in the ConfigStore and composed in struct mode:
  an unknown or ill-typed key, of the command or of a group, is OmegaConf's error at Hydra's merge,
  reworded once (spabench.config.reword) to name the command, the key and what it accepts, before
  anything connects or is written. Entries of a mapping (cards.<card>.host, display_names.<name>) are
  the user's to name; nothing is forced past the struct check.
- `campaign=`: for plan/demo a preset name or a campaign YAML file; for run/score/report/export the
  campaign folder `spabench plan` wrote.
"""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path
from typing import Any, NamedTuple

from spabench.cli.commands import CAMPAIGN_FOLDER, CAMPAIGN_PRESET, COMMANDS, Command
from spabench.config import GROUP_NAMES as GROUPS
from spabench.config import (
    CommandConfig,
    LabConfig,
    accepts,
    allowed_text,
    default_of,
    keys_of,
    reword,
    schema_node,
)
from spabench.configtools import OPTION_FILE, load_option, overlay
from spabench.errors import ConfigError, SpabenchError
from spabench.paths import option_dirs

log = logging.getLogger("spabench")


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: spabench <command> [key=value ...]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {c.summary}" for name, c in COMMANDS.items()]
    lines += ["", "`spabench <command> --help` lists a command's keys with their defaults.",
              "Overrides: group=option (conf/<group>/), key=value, dotted keys (bench.port=/dev/ttyACM1,",
              "cards.pi05.host=10.0.0.5); config_dir=DIR adds a lab's own bench/policy/campaign files."]
    return "\n".join(lines)


def _group_usage(group: str) -> str:
    subs = {name: c for name, c in COMMANDS.items() if c.group == group and " " in name}
    width = max(len(n) for n in subs)
    lines = [f"usage: spabench {group} <subcommand> [key=value ...]", "", "subcommands:"]
    lines += [f"  {n.ljust(width)}  {c.summary}" for n, c in subs.items()]
    lines += ["", f"`spabench {group} <subcommand> --help` lists its keys with their defaults."]
    return "\n".join(lines)


class UsageShown(Exception):
    """`spabench <group>` alone: the listing is the answer, not an error."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


def split_command(argv: list[str]) -> tuple[Command, list[str]]:
    """The longest command name made of the leading words, and the overrides after it."""
    words = [a for a in argv if "=" not in a and not a.startswith("-")]
    for n in (2, 1):
        name = " ".join(argv[:n])
        if len(words) >= n and name in COMMANDS:
            return COMMANDS[name], argv[n:]
    groups = {c.group for c in COMMANDS.values() if " " in c.name}
    if argv and argv[0] in groups:
        rest = [a for a in argv[1:] if a not in ("-h", "--help")]
        if not rest:
            raise UsageShown(_group_usage(argv[0]))
        raise ConfigError(f"unknown subcommand {' '.join(argv[:2])!r}\n\n{_group_usage(argv[0])}")
    raise ConfigError(f"unknown command {' '.join(argv[:2]) or '(none)'!r}\n\n{_usage()}")


def fill_positionals(command: Command, args: list[str]) -> list[str]:
    """Leading bare words become `key=value` for the command's positional keys (`ledger copy SRC DST`)."""
    out, keys = [], list(command.positionals)
    for arg in args:
        if "=" not in arg and not arg.startswith("-") and keys:
            out.append(f"{keys.pop(0)}={arg}")
        else:
            out.append(arg)
    return out


def expand_flags(command: Command, args: list[str]) -> list[str]:
    """A command's `--flag` words as the `key=value` each stands for (`compare --verbose`)."""
    flags = dict(command.flags)
    return [flags.get(arg, arg) for arg in args]


# ---------------------------------------------------------------------------- config folders
def group_options(dirs: list[Path], group: str) -> list[str]:
    return sorted({p.stem for d in dirs for p in (d / group).glob("*.yaml")})


def _check_lab_dir(value: str) -> Path:
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"config_dir={value}: not a folder (allowed: a folder holding any of "
                          f"{', '.join(f'{g}/' for g in GROUPS)} with <option>.yaml files)")
    if (path / "config.yaml").exists():
        raise ConfigError(f"config_dir={value}: holds a config.yaml; a lab folder holds only group folders "
                          f"({', '.join(f'{g}/' for g in GROUPS)}); top-level keys go on the command line")
    if not any((path / g).is_dir() for g in GROUPS):
        raise ConfigError(f"config_dir={value}: no group folder inside (allowed: "
                          f"{', '.join(f'{g}/' for g in GROUPS)})")
    return path


# ---------------------------------------------------------------------------- overrides
def _split(item: str) -> tuple[str, str, str]:
    key, sep, value = item.partition("=")
    if not sep:
        raise ConfigError(f"override {item!r} is not key=value")
    bare = key.lstrip("+~")
    return key[: len(key) - len(bare)], bare, value


NULL_WORDS = ("null", "None", "none", "~")   # `out=None` (Python's word) means null, never a folder "None"


def refuse_unread(command: Command, bare: str) -> None:
    """What Hydra's compose does not refuse itself: hydra.* settings (taken silently, with no effect) and a
    group the command does not read (Hydra's "no match in the defaults list" names no group it reads)."""
    root = bare.split(".")[0]
    if root == "hydra":
        raise ConfigError(f"spabench {command.name}: '{bare}' is not accepted: spabench composes conf/ itself and "
                          "runs no Hydra job, so hydra.* settings have no effect")
    if root in GROUPS and root not in command.groups and not (root == "campaign" and command.campaign and "." not in bare):
        raise ConfigError(f"spabench {command.name}: '{bare}' is not accepted: it reads no '{root}' group. "
                          f"It accepts: {accepts(command.schema)}")


def literal_value(node: Any, bare: str) -> tuple[bool, bool]:
    """(text, path): whether `bare` names a string or a path in the schema node (free text, a URL, a
    name: its value is passed literally, never parsed by the override grammar), and whether a path."""
    from omegaconf import DictConfig
    from omegaconf.nodes import PathNode, StringNode

    parts = bare.split(".")
    if parts[0] == "cards" and len(parts) == 3:   # a field of a card composed later, by its name
        from omegaconf import OmegaConf

        from spabench.policy.card import PolicyCard

        node, parts = OmegaConf.structured(PolicyCard), parts[2:]
    for part in parts:
        child = node._get_node(part, validate_access=False) if isinstance(node, DictConfig) \
            and not node._is_none() and not node._is_missing() else None
        if child is None:   # an entry the user names: text when the mapping holds text
            return isinstance(node, DictConfig) and node._metadata.element_type is str, False
        node = child
    return isinstance(node, (StringNode, PathNode)), isinstance(node, PathNode)


def _literal(value: str) -> str:
    """A value as a Hydra quoted string, so the override grammar reads none of its characters.
    Values already quoted by the caller (Hydra's own habit) and null are kept."""
    if value in ("", "null") or (len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""):
        return value
    import re

    # Hydra's quoted strings: a backslash is literal unless it precedes a quote or the closing quote
    return "'" + re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), value) + "'"


def _campaign_file(value: str) -> Path | None:
    path = Path(value).expanduser()
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return path.resolve()
    return None


class Prepared(NamedTuple):
    overrides: list[str]          # Hydra's
    campaign_file: Path | None    # a campaign file given by path, composed as the campaign option
    dirs: list[Path]              # the config folders, the lab's first
    node: Any                     # the command's schema node, its groups typed (config.schema_node)
    groups: tuple[str, ...]       # the groups this call composes
    options: dict[str, str]       # group -> the option it composes
    nulls: list[str]              # `mapping={...}` for a mapping its schema leaves null (campaign.stopping.kind=x):
                                  # OmegaConf's merge cannot add into a null typed mapping, so these are set after


def prepare(command: Command, argv: list[str]) -> Prepared:
    """What Hydra composes for this command line (see Prepared)."""
    from omegaconf import OmegaConf

    read = argv
    argv = run_policy_items(command, argv)
    defaults = group_defaults()
    given = {_split(o)[1] for o in argv}
    argv = [_from_cwd(item) for item in argv] + recorded_settings(command, argv, given)
    argv = [p for p in command.presets if p.partition("=")[0] not in given] + list(argv)
    lab = None
    rest = []
    for item in argv:
        prefix, bare, value = _split(item)
        if bare == "config_dir" and issubclass(command.schema, LabConfig):
            lab = _check_lab_dir(value) if value not in ("", *NULL_WORDS) else None
        rest.append(item)
    dirs = option_dirs(lab)
    bench_kind = functools.cache(lambda option: _bench_type(dirs, option))   # read once: it types the bench node
    overrides: list[str] = []
    entries: list[tuple[str, str, str]] = []
    chosen: dict[str, str] = {}
    campaign_file = None
    for item in rest:
        refuse_unread(command, _split(item)[1])
        prefix, bare, value = _split(item)
        if bare == "campaign" and command.campaign == CAMPAIGN_FOLDER:
            overrides.append(f"campaign_dir={_literal(str(Path(value).expanduser().resolve()))}")  # a folder here
            continue
        if bare == "campaign" and command.campaign == CAMPAIGN_PRESET:
            presets = group_options(dirs, "campaign")
            path = _campaign_file(value)
            if value in presets and path is None:
                overrides.append(item)
            elif path is not None:
                if not path.is_file():
                    raise ConfigError(f"campaign={path}: no such file (allowed: a campaign preset name, or a "
                                      "campaign YAML file like conf/campaign/smoke.yaml)")
                campaign_file = path
                overrides.append(f"campaign={OPTION_FILE}")
            elif Path(value).expanduser().is_dir():
                raise ConfigError(f"campaign={value} is a folder; `spabench {command.name}` takes a campaign "
                                  f"preset (allowed: {', '.join(presets)}) or a campaign YAML file. A folder "
                                  f"written by `spabench plan` is run with `spabench run campaign={value}`.")
            else:
                raise ConfigError(f"campaign={value}: no campaign preset of that name and no such file "
                                  f"(allowed: {', '.join(presets)}, or a path to a campaign .yaml file)")
            continue
        if bare == "config_dir" and issubclass(command.schema, LabConfig):
            overrides.append(f"config_dir={_literal(str(lab)) if lab is not None else 'null'}")
            continue
        if bare in GROUPS and not prefix:
            chosen[bare] = value
            options = group_options(dirs, bare)
            if value not in options:
                raise ConfigError(f"{bare}={value}: no option '{value}' for group '{bare}' in "
                                  f"{' or '.join(str(d / bare) for d in dirs)} (allowed: {', '.join(options)})")
            overrides.append(item)
            continue
        entries.append((prefix, bare, value))
    if command.bench_from_campaign:
        kind = _planned_bench(next((_split(i)[2] for i in rest if _split(i)[1] in ("campaign", "campaign_dir")), None))
        if kind is not None and "bench" not in given:
            chosen["bench"] = kind
            overrides.append(f"bench={kind}")
        if "operator" not in given:   # a person at the robot; the twin scores itself
            option = chosen.get("bench")
            chosen["operator"] = "auto" if option is not None and bench_kind(option) == "sim" else "terminal"
            overrides.append(f"operator={chosen['operator']}")
    picked = {**defaults, **chosen}
    groups = read_groups(command, read)
    node = schema_node(command.schema, {g: bench_kind(picked[g]) if g == "bench" else None for g in groups})
    nulls: dict[str, list[str]] = {}   # fields of a mapping its schema leaves null (campaign.stopping.kind)
    for prefix, bare, value in entries:   # once every group's option is known: the schema node types them
        text, is_path = literal_value(node, bare)
        if text:
            value = "null" if is_path and value in NULL_WORDS else _literal(value)
        parent, _, leaf = bare.rpartition(".")
        if parent.split(".")[0] in groups and OmegaConf.select(node, parent, default=0) is None:
            nulls.setdefault(parent, []).append(f"{leaf}: {value}")   # set after composing (see Prepared)
        else:
            overrides.append(f"{prefix}{bare}={value}")
    return Prepared(overrides, campaign_file, dirs, node, groups, {g: picked[g] for g in groups if g in picked},
                    [f"{parent}={{{', '.join(items)}}}" for parent, items in nulls.items()])


SUITE_PATHS = ("suite.root", "suite.hardware")   # folders a user gives are taken from the working directory


def _from_cwd(item: str) -> str:
    """A suite folder given on the command line, relative to the working directory (as out= is)."""
    prefix, bare, value = _split(item)
    if bare in SUITE_PATHS and value and value not in NULL_WORDS and not Path(value).expanduser().is_absolute():
        return f"{prefix}{bare}={Path(value).expanduser().resolve()}"
    return item


def recorded_settings(command: Command, argv: list[str], given: set[str]) -> list[str]:
    """What the campaign folder recorded at `plan` and the caller did not give: the lab's config_dir
    and the suite's folders and relational rule, so later commands read what the campaign was planned with."""
    if command.campaign != CAMPAIGN_FOLDER:
        return []
    folder = next((_split(a)[2] for a in argv if _split(a)[1] in ("campaign", "campaign_dir")), None)
    path = Path(folder).expanduser() / "config.yaml" if folder else None
    if path is None or not path.is_file():
        return []
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []   # the command itself says what is wrong with the folder
    out = []
    lab = data.get("config_dir")
    if lab and "config_dir" not in given:
        if not Path(lab).is_dir():
            raise ConfigError(f"{path}: the campaign was planned with config_dir={lab}, which is not a folder here; "
                              "give the lab's folder on this machine with config_dir=DIR")
        out.append(f"config_dir={lab}")
    if "suite" in command.groups and not any(g == "suite" or g.startswith("suite.") for g in given):
        suite = data.get("suite") or {}
        out += [f"suite.{k}={suite[k]}" for k in ("root", "hardware") if suite.get(k) is not None]
        out += [f"suite.relation.{k}={v}" for k, v in (suite.get("relation") or {}).items()]
    return out


def _bench_type(dirs: list[Path], option: str) -> str:
    """The `type:` of a bench option as composed (its `defaults:` included; so101 when it does not say)."""
    data = load_option("bench", option, dirs)
    return str(data.get("type") or "so101") if isinstance(data, dict) else "so101"


PLANNED_FIELDS = ("timer_s", "control_hz")   # fixed per trial by `spabench plan` (plan.csv)


def run_policy_items(command: Command, argv: list[str]) -> list[str]:
    """`run` reads the campaign's own cards: `policy.<field>` is mapped to the one card of a single-card
    campaign and refused with the exact replacement otherwise; planned fields are refused with a
    pointer to `plan`. With blind aliases on, cards are named by alias only."""
    if command.name != "run":
        return argv
    folder = next((_split(a)[2] for a in argv if _split(a)[1] == "campaign"), None)
    labels: list[str] = []
    if folder:
        from spabench.plan.planner import PLAN_CSV, read_plan_csv

        path = Path(folder).expanduser() / PLAN_CSV
        try:
            rows = read_plan_csv(path) if path.is_file() else []
        except (SpabenchError, OSError, ValueError):
            rows = []
        blind = any(r.alias != r.policy for r in rows)
        labels = list(dict.fromkeys(r.alias if blind else r.card for r in rows))
    out = []
    for item in argv:
        prefix, bare, value = _split(item)
        parts = bare.split(".")
        planned = (parts[2] if parts[0] == "cards" and len(parts) >= 3 else
                   parts[1] if parts[0] == "policy" and len(parts) >= 2 else None)
        if planned in PLANNED_FIELDS:
            raise ConfigError(f"spabench run: '{bare}' is planned: each trial's {planned} was fixed by "
                              "`spabench plan` (see plan.csv) and `run` does not change it. Plan a campaign with "
                              f"campaign.policies[].{planned} for another value"
                              + ("; for a short dry run use dry_run=true operator.timer_s=S" if planned == "timer_s" else ""))
        if parts[0] != "policy":
            out.append(item)
            continue
        if len(parts) == 1:
            raise ConfigError("spabench run: 'policy=' is not accepted: run uses the policy cards the "
                              f"campaign was planned with ({', '.join(labels) or 'see plan.csv'}); change one "
                              "card's field with cards.<card or alias>.<field>=value")
        rest = ".".join(parts[1:])
        if len(labels) == 1:
            out.append(f"{prefix}cards.{labels[0]}.{rest}={value}")
            continue
        choices = " or ".join(f"cards.{x}.{rest}={value}" for x in labels) or f"cards.<card or alias>.{rest}={value}"
        raise ConfigError(f"spabench run: '{bare}' is ambiguous: this campaign has {len(labels) or 'several'} "
                          f"policy servers. Address one: {choices}")
    return out


def _planned_bench(folder: str | None) -> str | None:
    """The bench kind the campaign folder was planned for (None: not known here; `run` says why)."""
    if not folder:
        return None
    from spabench.plan.planner import planned_bench_kind

    try:
        return planned_bench_kind(Path(folder).expanduser())
    except SpabenchError:
        return None


# ---------------------------------------------------------------------------- composition
def group_defaults() -> dict[str, str]:
    """The option each group uses when the command line names none: conf/config.yaml's defaults list."""
    import yaml

    from spabench.paths import conf_dir

    out: dict[str, str] = {}
    for entry in (yaml.safe_load((conf_dir() / "config.yaml").read_text()) or {}).get("defaults", []):
        if isinstance(entry, dict):
            out.update({str(k): str(v) for k, v in entry.items()})
    return out


def register(command: Command, prepared: Prepared) -> str:
    """The command's schema node (its groups typed by their chosen options' dataclasses) and its primary
    config (the schema, then its groups' options) in Hydra's ConfigStore; returns the primary config's name."""
    from hydra.core.config_store import ConfigStore

    name = "spabench_" + command.name.replace(" ", "_")
    store = ConfigStore.instance()
    store.store(name=f"{name}_schema", node=prepared.node)
    store.store(name=name, node={"defaults": [f"{name}_schema", "_self_",
                                              *({g: prepared.options[g]} for g in prepared.groups)]})
    return name


def composed(command: Command, argv: list[str]) -> Any:
    """The composed node of what the command reads, typed by its schema (struct mode): its keys and
    the groups it reads (groups it does not read are never composed)."""
    import yaml
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import ConfigCompositionException, MissingConfigException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from spabench.suite.yamlio import refuse_aliases

    prepared = prepare(command, argv)
    overrides, campaign_file, dirs = prepared.overrides, prepared.campaign_file, prepared.dirs
    files = [p for d in dirs for p in sorted(d.rglob("*.yaml"))] + ([campaign_file] if campaign_file else [])
    for path in files:   # no YAML alias bombs in config files (i10)
        refuse_aliases(path.read_bytes(), path)
    with overlay(dirs, ("campaign", campaign_file) if campaign_file else None) as conf:
        try:
            with initialize_config_dir(config_dir=str(conf), version_base=None):
                node = hydra_compose(config_name=register(command, prepared), overrides=overrides)
            if campaign_file and OmegaConf.is_dict(node.get("campaign")) and "name" not in node.campaign:
                # a campaign file without a name is named after the file
                OmegaConf.update(node, "campaign.name", campaign_file.stem, force_add=True)
            for override in OverridesParser.create().parse_overrides(prepared.nulls):
                key = override.key_or_group
                OmegaConf.update(node, key, override.value(), merge=OmegaConf.select(node, key) is not None)
        except (ConfigCompositionException, OmegaConfBaseException) as exc:
            raise reword(command.schema, exc, key_readers(), node=prepared.node) from None
        except MissingConfigException as exc:
            raise ConfigError(f"spabench {command.name}: {str(exc).splitlines()[0]}") from None
        except yaml.YAMLError as exc:   # the mark names the file and line
            raise ConfigError("not readable YAML: " + " ".join(str(exc).split())) from None
    return node


def key_readers() -> dict[str, list[str]]:
    """key -> the commands whose config declares it (for the error of a command that does not)."""
    out: dict[str, list[str]] = {}
    for name, c in COMMANDS.items():
        for f in keys_of(c.schema):
            out.setdefault("campaign" if f.name == "campaign_dir" else f.name, []).append(name)
    return out


def typed(command: Command, node: Any) -> CommandConfig:
    """The command's config object from its composed node (the schema's own checks run here)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        for key in sorted(OmegaConf.missing_keys(node)):   # a typed group field takes its default over `???`
            OmegaConf.select(node, key, throw_on_missing=True)
        return OmegaConf.to_object(node)   # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        raise reword(command.schema, exc) from None


def job_config(command: Command, argv: list[str]) -> str:
    """`--cfg job`: the keys and groups this command reads, as YAML, once they passed validation (a
    bad value is the same error the command itself would give)."""
    import yaml
    from omegaconf import OmegaConf

    node = composed(command, argv)
    typed(command, node)
    plain = OmegaConf.to_container(node, resolve=True)
    return yaml.safe_dump(_as_text(plain), sort_keys=False)


def _as_text(value: Any) -> Any:
    """Paths as their text, for YAML."""
    if isinstance(value, dict):
        return {k: _as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_text(v) for v in value]
    return str(value) if isinstance(value, Path) else value


def read_groups(command: Command, argv: list[str]) -> tuple[str, ...]:
    """The groups this call builds: the command's, less its optional ones the caller left alone."""
    given = {_split(item)[1].split(".")[0] for item in argv if "=" in item}
    return tuple(g for g in command.groups if g not in command.optional_groups or g in given)


def compose(command: Command, argv: list[str]) -> CommandConfig:
    """The composed, validated config for one command."""
    return typed(command, composed(command, argv))


# ---------------------------------------------------------------------------- help
RUN_KEYS_HELP = (
    "keys at the bench during a rollout (operator=terminal):",
    "  s        stop: the rollout ends now and counts (valid, scored as usual)",
    "  a        abort: the attempt is invalid and the trial is re-run",
    "  space/e  e-stop: the arm holds still, the attempt is invalid, the session stops",
    "  Ctrl-C   abort this attempt and end the session (resume with the same command)",
    "before a trial: Enter when the scene matches the checklist, q to stop the session",
)


def command_help(command: Command) -> str:
    from spabench.paths import conf_dir

    lines = [f"usage: spabench {command.name} {command.usage}".rstrip(), "", command.summary]
    if command.groups:
        defaults = group_defaults()
        for preset in command.presets:
            g, _, o = preset.partition("=")
            defaults[g] = o
        lines += ["", "config groups (group=option; options in conf/<group>/ and config_dir=DIR/<group>/):"]
        for group in command.groups:
            options = group_options([conf_dir()], group)
            default = defaults.get(group, "")
            if group == "bench" and command.bench_from_campaign:
                default = "the bench kind the campaign was planned for"
            elif group == "operator" and command.bench_from_campaign:
                default = "terminal on a robot campaign, auto on the twin"
            elif group == "campaign" and command.campaign == CAMPAIGN_PRESET:
                options.append("FILE.yaml")
            if group in command.optional_groups:
                default = "none (read only when given)"
            lines.append(f"  {group:<9} default {default}; allowed: {', '.join(options)}")
    keys = keys_of(command.schema)
    if keys:
        lines += ["", "keys (key=value; default in brackets):"]
        width = max(len(f.name) for f in keys)
        for f in keys:
            default = default_of(f)
            shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else default
            label = "campaign" if f.name == "campaign_dir" else f.name
            allowed = allowed_text(f)
            lines.append(f"  {label.ljust(width)}  [{shown}]  {f.metadata['help']}" + (f"; {allowed}" if allowed else ""))
    if command.name == "run":
        lines += ["", *RUN_KEYS_HELP]
    return "\n".join(lines)


def _cfg_flag(args: list[str]) -> str | None:
    """The value of `--cfg job|all` (or `-c job`), None without it."""
    for i, a in enumerate(args):
        if a in ("--cfg", "-c"):
            value = args[i + 1] if i + 1 < len(args) else ""
            if value not in ("job", "all"):
                raise ConfigError(f"--cfg {value}: allowed: job | all (the composed config this command reads)")
            return value
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] in ("--version", "-V"):
        from spabench import __version__

        print(f"spabench {__version__}")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for chatty in ("websockets", "httpx", "urllib3"):  # per-connection chatter hides the progress lines
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        command, overrides = split_command([a for a in argv if a not in ("--cfg", "-c", "job", "all")])
        show = _cfg_flag(argv)
        overrides = expand_flags(command, fill_positionals(command, overrides))
        if any(a in ("-h", "--help") for a in overrides):
            print(command_help(command))
            return 0
        if show is not None:   # Hydra's habit: print the composed config of this command, run nothing
            print(job_config(command, overrides), end="")
            return 0
        cfg = compose(command, overrides)
        return int(command.target(cfg) or 0)
    except UsageShown as shown:
        print(shown.text)
        return 0
    except SpabenchError as exc:
        print(f"spabench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("spabench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
