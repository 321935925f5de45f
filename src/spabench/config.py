"""What every command's config is built from: the base class, the key sets several commands share,
and the groups (bench, policy, campaign, operator, suite) as typed objects.

The pattern (CONTRIBUTING.md "Adding a command"):

- A command declares the dataclass of exactly what it reads, next to its function, e.g.
  `ReportConfig(CampaignInput, FigureKeys)` in analysis/commands.py. A key is a field declared with
  `opt(default, help, lo=, hi=, gt=, lt=, choices=)`; a config group is a field declared with `group(...)`.
  A group's dataclass declares its fields' ranges the same way (`opt(default, lo=...)`).
- The CLI registers that dataclass in Hydra's ConfigStore as the command's schema, each group field typed
  by its chosen option's dataclass (`schema_node`), and composes conf/ into it in struct mode: an
  unknown key, a wrong type or a `???` left unset, of the command or a group, is OmegaConf's own error,
  reworded once (`reword`) into one line naming the command, the key and what it accepts.
- `__post_init__` does what OmegaConf cannot: the declared ranges and choices, finite floats, paths
  from the working directory, and a group given as a mapping (a library caller's) into its typed object
  (BenchConfig, PolicyCard, CampaignConfig, OperatorConfig, SuiteConfig) by the one group loader,
  `typed_node` (OmegaConf's structured merge); each group object's own `__post_init__` calls
  `check_fields` (finite numbers, the declared ranges and choices) and keeps only the rules between
  fields as code.
- Library callers and tests build the same object with `<Command>Config.from_mapping({...})`.

No LeRobot, torch or Hydra imports here: configs validate on machines without the bench extra.
"""

from __future__ import annotations

import copy
import importlib
import math
import operator
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Self

from spabench.errors import ConfigError

GROUP_NAMES = ("bench", "policy", "campaign", "operator", "suite")   # conf/<group>/

__all__ = ["CommandConfig", "LabConfig", "opt", "group", "GROUP_NAMES", "reword", "accepts", "CampaignInput", "LedgerKeys",
           "CardKeys", "ServeKeys", "FigureKeys", "ReportKeys", "typed_node", "check_fields", "field_error"]

def _import(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def opt(default: Any, help: str = "", *, lo: float | None = None, hi: float | None = None,
        gt: float | None = None, lt: float | None = None, choices: tuple[Any, ...] | None = None) -> Any:
    """A key of a command or a field of a group: its default, one line of help (every command key gives
    it: `--help` prints it), its range (lo/hi inclusive, gt/lt exclusive) or choices. A range on a
    mapping or a list bounds each of its values. `check_fields` and `CommandConfig` check it."""
    meta = {"help": help, "lo": lo, "hi": hi, "gt": gt, "lt": lt, "choices": choices}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def group(help: str, build: str, schema: str, sections: dict[str, str] | None = None) -> Any:
    """A config group the command reads: `group=option` picks conf/<group>/<option>.yaml. `build`
    ("module:function") turns a mapping into the typed object; `schema` ("module:Class") is the dataclass
    Hydra composes the option into (a class with `schema_for(kind)` picks by the option's `type:`);
    `sections` names the dataclass another package types a section with (operator.console). Named by
    string: the owning packages import this module."""
    return field(default=None, metadata={"help": help, "group": True, "build": build, "schema": schema,
                                         "sections": sections or {}})


def build_group(f: Field, node: Any) -> Any:
    """One group's typed object from its plain mapping (kept as is when already typed)."""
    return _import(f.metadata["build"])(node)


def group_schema(f: Field, kind: str | None = None) -> type:
    """The dataclass a group's option composes into (`kind`: the option's `type:`, for a polymorphic group)."""
    cls = _import(f.metadata["schema"])
    return cls.schema_for(kind) if hasattr(cls, "schema_for") else cls


def schema_node(cls: type[CommandConfig], kinds: Mapping[str, str | None]) -> Any:
    """The command's schema as Hydra composes into it: each group it reads (`kinds`: group -> its option's
    `type:`) typed by the option's dataclass, so an unknown or ill-typed group key is OmegaConf's error at
    Hydra's merge; a mapping's entries are the user's to name (`cards.pi05.host=...` needs no `+`)."""
    from omegaconf import OmegaConf

    node = OmegaConf.structured(cls)
    for f in cls.group_fields():
        if f.name in kinds:
            node[f.name] = OmegaConf.structured(group_schema(f, kinds[f.name]))
            for section in f.metadata["sections"]:   # typed by its own package (operator.console)
                node[f.name][section] = OmegaConf.structured(section_class(f, section))
    _open_mappings(node)
    return node


def _open_mappings(node: Any) -> None:
    """Mappings (not dataclasses) take the keys the user names: `cards.<card>`, `display_names.<name>`."""
    from omegaconf import OmegaConf

    for key in node:
        if OmegaConf.is_missing(node, key) or not OmegaConf.is_dict(child := node[key]):
            continue
        if is_dataclass(OmegaConf.get_type(child)):
            _open_mappings(child)
        else:
            OmegaConf.set_struct(child, False)


def section_class(f: Field, key: str) -> Any:
    """The dataclass another package types a group's section with, or None."""
    target = f.metadata["sections"].get(key)
    return None if target is None else _import(target)


KINDS = {"int": "an integer", "float": "a number", "bool": "true | false", "str": "a string", "Path": "a path",
         "dict": "a mapping", "list": "a list", "Any": "any value"}


def typed_node[T](cls: type[T], data: Any, where: str, prefix: str = "") -> T:
    """The one loader of a group's file or mapping (a bench, a card, a campaign, the operator, the suite):
    OmegaConf merges `data` into `cls`'s structured schema (an unknown key, a wrong type, a `???` left
    unset are its errors, reworded once by `node_error`), then builds `cls`, whose `__post_init__`
    checks the ranges. An object already of `cls` is kept as it is. `prefix`: where the node sits in its
    file (OmegaConf loses the path of a list item: "policies[0].")."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(data, cls):
        return data
    if not isinstance(data, (Mapping, DictConfig)):
        raise ConfigError(f"{where}: expected a mapping of its fields, got {type(data).__name__} {data!r:.80}")
    try:
        built = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), data))
    except OmegaConfBaseException as exc:
        raise node_error(exc, where, prefix) from None
    assert isinstance(built, cls)
    return built


def node_error(exc: BaseException, where: str, prefix: str = "") -> ConfigError:
    """OmegaConf's error about a group's node as one line: where (file or group), the field, the value
    and what the field takes (its declaring dataclass's annotation)."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, MissingMandatoryValue, ValidationError

    key = prefix + str(getattr(exc, "full_key", "") or getattr(exc, "key", "") or "")
    first = (str(exc).splitlines() or [type(exc).__name__])[0]
    owner = getattr(exc, "object_type", None)
    declared = {f.name: f for f in fields(owner)} if isinstance(owner, type) and is_dataclass(owner) else {}
    if isinstance(exc, MissingMandatoryValue):
        return ConfigError(f"{where}: field '{key}' is required (???) and was not given (set it, e.g. {key}=...)")
    if isinstance(exc, (ConfigKeyError, ConfigAttributeError)):
        return field_error(where, key, f"unknown field (allowed: {', '.join(declared)})")
    if isinstance(exc, ValidationError) and key:
        f = declared.get(key.split(".")[-1])
        allowed = allowed_text(f) if f is not None else first
        return field_error(where, key, f"{shown_value(getattr(exc, 'value', None))} (allowed: {allowed})")
    return ConfigError(f"{where}: {first}")


def check_fields(obj: Any, where: str, prefix: str = "") -> None:
    """The one check of a group's object, called by its `__post_init__`: no non-finite number anywhere
    in it (OmegaConf takes "inf" and "nan" for a float field), then every field within its declared
    range or choices (`opt(lo=, hi=, gt=, lt=, choices=)`), nested objects included. One error:
    "<where>: field '<prefix><key>': <value> (allowed: ...)". `prefix`: where the object sits in its group."""
    for key, value in _members(obj, prefix):
        if non_finite(value):
            raise field_error(where, key, f"{value!r} (allowed: a finite number)")
        if isinstance(value, (Mapping, list)) or is_dataclass(value):
            check_fields(value, where, f"{key}.")
    for f in fields(obj) if is_dataclass(obj) else ():
        if declares_range(f):
            value = getattr(obj, f.name)
            each = _members(value, f"{prefix}{f.name}.") if isinstance(value, (Mapping, list)) \
                else [(f"{prefix}{f.name}", value)]
            for key, item in each:
                if not in_range(f, item):
                    raise field_error(where, key, f"{shown_value(item)} (allowed: {allowed_text(f)})")


def field_error(where: str, key: str, text: str) -> ConfigError:
    """The one shape of a group's error: "<where>: field '<key>': <text>" (a rule between fields too)."""
    return ConfigError(f"{where}: field '{key}': {text}")


def _members(obj: Any, prefix: str) -> list[tuple[str, Any]]:
    """(key, value) of a dataclass's fields, a mapping's entries ("prefix.key") or a list's items ("prefix[i]")."""
    if is_dataclass(obj):
        return [(f"{prefix}{f.name}", getattr(obj, f.name)) for f in fields(obj)]
    if isinstance(obj, Mapping):
        return [(f"{prefix}{k}", v) for k, v in obj.items()]
    if isinstance(obj, list):
        return [(f"{prefix.removesuffix('.')}[{i}]", v) for i, v in enumerate(obj)]
    return []


def non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def declares_range(f: Field) -> bool:
    return any(f.metadata.get(key) is not None for key in ("choices", *(b[0] for b in BOUNDS)))


def in_range(f: Field, value: Any) -> bool:
    """Whether one value keeps its field's declaration: a finite number within lo/hi/gt/lt, one of the
    choices; None only where the annotation allows it (its type is OmegaConf's to check)."""
    if value is None:
        return "None" in str(f.type)
    meta = f.metadata
    return (not non_finite(value) and (not meta.get("choices") or value in meta["choices"])
            and all(meta.get(key) is None or holds(value, meta[key]) for key, _, holds in BOUNDS))


# a declared bound: its `opt` keyword, how `allowed_text` writes it, what `in_range` tests
BOUNDS = (("lo", ">=", operator.ge), ("gt", ">", operator.gt), ("hi", "<=", operator.le), ("lt", "<", operator.lt))


def shown_value(value: Any) -> str:
    return repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."


def allowed_text(f: Field) -> str:
    """What a key takes, from its annotation and its declaration: "an integer 0..65535, or null",
    "a number > 0", "blocked | interleaved" (a range on a mapping or a list: what each value takes)."""
    kind = str(f.type).split("[")[0].split(" ")[0]
    meta = f.metadata
    if kind in ("dict", "list") and declares_range(f):   # the values' type: dict[str, float] -> float
        kind = str(f.type).split("[", 1)[1].split("]")[0].split(",")[-1].strip()
    if meta.get("choices"):
        text = " | ".join(map(str, meta["choices"]))
    elif meta.get("lo") is not None and meta.get("hi") is not None and meta.get("gt") is meta.get("lt") is None:
        text = f"{KINDS.get(kind, 'a number')} {meta['lo']:g}..{meta['hi']:g}"
    else:
        bounds = [f"{sign} {meta[key]:g}" for key, sign, _ in BOUNDS if meta.get(key) is not None]
        text = " ".join([KINDS.get(kind, "a mapping of its fields"), " and ".join(bounds)]).strip()
    return text + (", or null" if "None" in str(f.type) else "")


@dataclass
class CommandConfig:
    """The base of every command's config (see the module docstring)."""

    command: ClassVar[str] = ""   # `spabench <command>`, for errors and --help

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("group"):
                if value is not None:
                    setattr(self, f.name, build_group(f, value))
                continue
            if value is None:
                continue
            if "Path" in str(f.type) and isinstance(value, (str, Path)):
                if not str(value).strip():
                    raise ConfigError(f"spabench {self.command}: {f.name} is empty (allowed: a path, or null)")
                setattr(self, f.name, value := Path(value).expanduser().resolve())
            if not in_range(f, value):   # the groups' rule (check_fields), in the command's words
                raise bad_value(type(self), f.name, value)

    @classmethod
    def group_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in cls.group_fields())

    @classmethod
    def group_fields(cls) -> list[Field]:
        return [f for f in fields(cls) if f.metadata.get("group")]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None = None) -> Self:
        """The config from plain values (a test's or a library caller's dict), checked exactly as the
        command line is: OmegaConf's struct merge into the schema, then `__post_init__`."""
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        data = dict(data or {})
        groups = {name: data.pop(name) for name in cls.group_names() if name in data}   # typed or plain
        try:
            node = OmegaConf.merge(OmegaConf.structured(cls), data)
            built = OmegaConf.to_object(node)
        except OmegaConfBaseException as exc:
            raise reword(cls, exc) from None
        assert isinstance(built, cls)
        return replace(built, **groups) if groups else built

    def need(self, name: str) -> Any:
        """The typed object of a group the command reads (a programming error if it was not built)."""
        value = getattr(self, name, None)
        if value is None:
            raise ConfigError(f"config group '{name}' was not loaded for this command (see conf/{name}/)")
        return value


def keys_of(cls: type[CommandConfig]) -> list[Field]:
    """The keys (not the groups) of a command's config, as declared."""
    return [f for f in fields(cls) if not f.metadata.get("group")]


def default_of(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return "???"


def accepts(cls: type[CommandConfig]) -> str:
    """What a command accepts, for its errors: its keys and its groups."""
    keys = ["campaign" if f.name == "campaign_dir" else f.name for f in keys_of(cls)]
    text = f"keys {', '.join(keys)}"
    if cls.group_names():
        text += "; groups " + ", ".join(f"{g}=<option> and {g}.<field>" for g in cls.group_names())
    return text


def bad_value(cls: type[CommandConfig], key: str, value: Any) -> ConfigError:
    """One line naming the command, the key, the value and what the key takes."""
    f = next((f for f in fields(cls) if f.name == key.split(".")[0]), None)
    allowed = f" (allowed: {allowed_text(f)})" if f is not None and "." not in key else ""
    return ConfigError(f"spabench {cls.command}: key '{key}': {shown_value(value)}{allowed}")


def reword(cls: type[CommandConfig], exc: BaseException, readers: Mapping[str, list[str]] | None = None,
           node: Any = None) -> ConfigError:
    """OmegaConf's (or Hydra's) error about a command's config as one line naming the command, the key
    and what the command (or the group holding the key) accepts; `readers` (key -> the commands that read
    it) says where a key lives; `node`: the schema node (`schema_node`), for where a key lives instead."""
    from omegaconf.errors import (
        ConfigAttributeError,
        ConfigKeyError,
        MissingMandatoryValue,
        OmegaConfBaseException,
        ValidationError,
    )

    cause = exc.__cause__ if exc.__cause__ is not None and not str(exc).startswith("In ") else exc
    if str(exc).startswith("In ") and isinstance(exc.__context__, OmegaConfBaseException):
        cause = exc.__context__   # Hydra's merge of an option file into the group's typed node
    if cause.__cause__ is not None:
        cause = cause.__cause__
    full = str(getattr(cause, "full_key", "") or "")
    first = (str(cause).splitlines() or [type(cause).__name__])[0]
    where = f"spabench {cls.command}"
    owner = getattr(cause, "object_type", None)
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError, ValidationError)) and owner not in (None, cls) \
            and full.split(".")[0] in cls.group_names():   # a group's field: its dataclass says what it takes
        return node_error(cause, where)
    if isinstance(cause, MissingMandatoryValue):
        return ConfigError(f"{where}: '{full}' is required (??? in its config file) and was not given; set it "
                           f"on the command line, e.g. {full}=...")
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        key = full or first
        root = key.split(".")[0]
        if root in GROUP_NAMES and root not in cls.group_names():
            what = f"'{key}' is not accepted: it reads no '{root}' group"
        elif "." in key and root in {f.name for f in fields(cls)}:
            what = f"unknown key '{key}' ({first})"
        elif readers and root in readers:   # where it lives: a group this command reads, else other commands
            where_else = hint(cls, root, node) or (f" ('{root}' is read by: "
                                             f"{', '.join(f'spabench {c}' for c in readers[root])})")
            what = f"key '{key}' is not read by this command{where_else}"
        else:
            what = f"unknown key '{key}'{hint(cls, root, node)}"
        return ConfigError(f"{where}: {what}. It accepts: {accepts(cls)}")
    if isinstance(cause, ValidationError) and full:
        error = bad_value(cls, full, getattr(cause, "value", None))
        return error if "(allowed:" in str(error) else ConfigError(f"{error} ({first})")
    return ConfigError(f"{where}: {first}")


def hint(cls: type[CommandConfig], root: str, node: Any) -> str:
    """Where a key the command does not read lives instead: a field of a group it reads."""
    for g in cls.group_fields():
        group_node = node.get(g.name) if node is not None else None
        if group_node is not None and root in list(group_node):
            return f" (did you mean {g.name}.{root}=...?)"
        for section in g.metadata["sections"]:
            if root in {f.name for f in fields(section_class(g, section))}:
                return f" (did you mean {g.name}.{section}.{root}=...?)"
    return ""


# ---------------------------------------------------------------------------- key sets several commands read
@dataclass
class LabConfig(CommandConfig):
    """A command that reads the lab's own files (every command but `init`)."""

    config_dir: Path | None = opt(None, "a lab's own folder with bench/, policy/, campaign/ files (used before "
                                  "the installed conf/)")

    def group_dirs(self, name: str) -> list[Path]:
        """Where a group's option files live, first match wins: config_dir/<group>, then conf/<group>."""
        from spabench.paths import option_dirs

        return [d / name for d in option_dirs(self.config_dir)]


@dataclass
class CampaignInput(LabConfig):
    """A command that reads the campaign folder `spabench plan` wrote (given as campaign=DIR)."""

    campaign_dir: Path | None = opt(None, "the campaign folder written by `spabench plan` (given as campaign=DIR)")


@dataclass
class LedgerKeys(LabConfig):
    ledger: str | None = opt(None, "where the ledger lives: null/sqlite (a file in the campaign folder) or "
                             "postgresql://[user@]host[:port]/db (no password: PGPASSWORD/PGPASSFILE)")

    @property
    def ledger_url(self) -> str | None:
        """`ledger=` as a connection: None for the campaign's own back end (null or sqlite), else the
        URL every command that reads or writes the ledger connects with."""
        return None if self.ledger in (None, "", "sqlite") else self.ledger


@dataclass
class CardKeys(LabConfig):
    cards: dict[str, dict[str, Any]] = opt({}, "per-card field overrides: cards.<card>.<field>=value (e.g. "
                                           "cards.pi05.host=10.0.0.5)")


@dataclass
class ServeKeys(LabConfig):
    host: str = opt("127.0.0.1", "where the server listens")
    port: int | None = opt(None, "where the server listens (null: the policy card's port)", lo=0, hi=65535)
    api_key: str | None = opt(None, "require `Authorization: Api-Key <key>` from clients")
    allow_insecure: bool = opt(False, "allow a non-loopback host without api_key (anyone on the network could "
                               "drive it)")
    max_frame_bytes: int | None = opt(None, "largest request frame (null: 4 MiB, two native 640x480 frames)", lo=1)


@dataclass
class FigureKeys(LabConfig):
    figures: dict[str, Any] = opt({"width": "single", "style": None, "formats": ["svg"]},
                                  "how the figures are drawn (spabench.analysis.figures.FigureSettings): "
                                  "figures.width=single|double (a 3.5 in or 7 in column), figures.style=PATH (a "
                                  "lab's own .mplstyle on top of spabench's), figures.formats=[svg,pdf,png]")
    bench_kind: str | None = opt(None, "only this bench kind's rollouts (twin and robot are never pooled)",
                                 choices=("so101", "sim"))


@dataclass
class ReportKeys(LabConfig):
    unpaired: str | None = opt(None, "a direct/paraphrase row without its partner: error (the default for a CSV) | "
                               "exclude (the default for a campaign, whose partner trials may still be pending)",
                               choices=("error", "exclude"))
    bootstrap: int = opt(100000, "bootstrap resamples (the published analysis: 100,000)", lo=1)
    bootstrap_seed: int = opt(20260906, "bootstrap seed (the published analysis's)", lo=0)
