"""`spabench <command> [hydra overrides]`: compose conf/, validate the groups a command reads, call it."""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path

from spabench.cli.commands import COMMANDS, GROUP_SCHEMAS, Command
from spabench.errors import ConfigError, SpabenchError

log = logging.getLogger("spabench")


def _import(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: spabench <command> [key=value ...]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {c.summary}" for name, c in COMMANDS.items()]
    lines += ["", "Overrides are Hydra syntax (group=option, key=value, +new_key=value); see conf/."]
    return "\n".join(lines)


def split_command(argv: list[str]) -> tuple[Command, list[str]]:
    """The longest command name made of the leading words, and the overrides after it."""
    words = [a for a in argv if "=" not in a and not a.startswith("-")]
    for n in (2, 1):
        name = " ".join(argv[:n])
        if len(words) >= n and name in COMMANDS:
            return COMMANDS[name], argv[n:]
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


def _top_level_keys(conf: Path) -> list[str]:
    import yaml

    data = yaml.safe_load((conf / "config.yaml").read_text()) or {}
    return [k for k in data if k != "defaults"]


def _group_options(conf: Path, group: str) -> list[str]:
    return sorted(p.stem for p in (conf / group).glob("*.yaml"))


def normalise_overrides(command: Command, overrides: list[str], conf: Path) -> list[str]:
    """Rewrite `campaign=<folder>` to `campaign_dir=<folder>`; make path keys absolute from the cwd."""
    out = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r} is not key=value")
        bare = key.lstrip("+~")
        if bare == "campaign" and value not in _group_options(conf, "campaign") and (
            "/" in value or Path(value).is_dir()
        ):
            key, bare = "campaign_dir", "campaign_dir"
        if bare in command.path_keys and value not in ("", "null"):
            value = str(Path(value).expanduser().resolve())
            if any(c in value for c in "=,[]{}()'\" \t:*?$"):  # Hydra's grammar: quote it (i10)
                value = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        out.append(f"{key}={value}")
    return out


def compose(command: Command, overrides: list[str]):
    """The composed, validated config for one command (a DictConfig in struct mode)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import ConfigCompositionException, MissingConfigException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from spabench.paths import conf_dir

    conf = conf_dir()
    from spabench.suite.yamlio import refuse_aliases

    for path in sorted(conf.rglob("*.yaml")):  # no YAML alias bombs in config files (i10)
        refuse_aliases(path.read_bytes(), path)
    given = {o.partition("=")[0].lstrip("+~") for o in overrides}
    presets = [p for p in command.presets if p.partition("=")[0] not in given]
    overrides = normalise_overrides(command, [*presets, *overrides], conf)
    try:
        with initialize_config_dir(config_dir=str(conf), version_base=None):
            cfg = hydra_compose(config_name="config", overrides=overrides)
    except MissingConfigException as exc:
        for item in overrides:
            group, _, option = item.lstrip("+~").partition("=")
            if group in GROUP_SCHEMAS and option not in _group_options(conf, group):
                raise ConfigError(f"{conf / group}: no option '{option}' for group '{group}' "
                                  f"(allowed: {', '.join(_group_options(conf, group))})") from None
        raise ConfigError(f"{conf}: {str(exc).splitlines()[0]}") from None
    except (ConfigCompositionException, OmegaConfBaseException) as exc:
        cause = exc.__cause__ or exc
        first = str(cause).splitlines()[0]
        if "not in struct" in first:
            key = getattr(cause, "full_key", None) or (first.split("'")[1] if "'" in first else first)
            if "." in str(key):
                raise ConfigError(f"{conf}: unknown key '{key}' (see conf/{str(key).split('.')[0]}/ "
                                  "for the fields this group takes)") from None
            known = ", ".join(k for k in _top_level_keys(conf))
            raise ConfigError(f"{conf}/config.yaml: unknown key '{key}' (allowed top-level keys: "
                              f"{known}; config groups: {', '.join(GROUP_SCHEMAS)})") from None
        raise ConfigError(f"{conf}/config.yaml: {first}") from None
    for group in command.groups:
        validate_group(cfg, group, conf)
    OmegaConf.set_struct(cfg, True)
    return cfg


def validate_group(cfg, group: str, conf: Path) -> object:
    """Merge a group into its dataclass schema: unknown keys, wrong types and bad values fail here."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if group not in cfg or cfg[group] is None:
        raise ConfigError(f"{conf}: config group '{group}' is not set "
                          f"(allowed: {', '.join(_group_options(conf, group))})")
    schema = _import(GROUP_SCHEMAS[group])
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), cfg[group])
        return OmegaConf.to_object(merged)
    except SpabenchError:
        raise
    except OmegaConfBaseException as exc:
        if isinstance(exc.__cause__, SpabenchError):
            raise exc.__cause__ from None
        key = getattr(exc, "full_key", None) or getattr(exc, "key", None)
        raise ConfigError(f"{conf}/{group}: field '{key}': {exc.msg if hasattr(exc, 'msg') else exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{conf}/{group}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for chatty in ("websockets", "httpx", "urllib3"):  # per-connection chatter hides the progress lines
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        command, overrides = split_command(argv)
        overrides = fill_positionals(command, overrides)
        if any(a in ("-h", "--help") for a in overrides):
            print(f"spabench {command.name}: {command.summary}")
            return 0
        cfg = compose(command, [a for a in overrides if a not in ("-h", "--help")])
        return int(_import(command.target)(cfg) or 0)
    except SpabenchError as exc:
        print(f"spabench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("spabench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
