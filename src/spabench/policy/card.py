"""The policy card: everything the harness must know to talk to one policy server.

A card is data (conf/policy/<name>.yaml). It says which wire protocol the server speaks, how robot
observations map to the server's keys, how long the returned chunks are and how many steps of each
are executed, the rollout timer and control rate, and the optional EMA filter and pre-rollout assist.
This module imports neither LeRobot nor torch; the Hydra CLI validates `policy=` against
`PolicyCard` (OmegaConf.structured merge), which runs `__post_init__`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeGuard

from spabench.config import check_fields, field_error, group, opt, typed_node
from spabench.configtools import load_option
from spabench.errors import ConfigError
from spabench.policy.identity import is_digest
from spabench.policy.launch import LaunchConfig, launch_from_mapping
from spabench.suite.vocabulary import CAMERAS, POLICY_CAMERAS

PROTOCOLS: tuple[str, ...] = ("openpi", "groot", "molmoact2", "vla0", "lerobot_grpc")
ASSIST_TYPES: tuple[str, ...] = ("lift",)
# Keys of `Observation.extras` a card may forward (only the sim bench fills them).
OBSERVATION_EXTRAS: tuple[str, ...] = ("privileged",)
# Largest pre-rollout lift we accept: the protocol's assist is "about 10 mm".
MAX_ASSIST_DZ_MM = 50.0

__all__ = ["PolicyCard", "load_card", "card_from_mapping", "available_cards", "PROTOCOLS",
           "POLICY_CAMERAS", "CAMERAS", "OBSERVATION_EXTRAS"]


@dataclass
class PolicyCard:
    """One policy server and how the harness drives it.

    `cameras` maps the server's image key to a bench camera name (e.g.
    `observation/image: middle`). `extra_keys` maps a server key to an `Observation.extras` entry
    (sim only, e.g. `observation/privileged: privileged` for the scripted stand-in). `extra` is
    opaque, protocol-specific data read by that protocol's client (e.g. GR00T state groups).
    `execute_steps` None means the whole horizon. The broker asks for the next chunk as soon as
    no more than `request_threshold` actions are queued (0: only when the queue is empty).
    `checkpoint` names what the server loads (a local path or a hub id), `checkpoint_digest` the
    sha256 it must have ("sha256:<hex>", see policy/identity.py); `launch` tells spabench how to
    start the server itself (policy/launch.py).
    """

    name: str
    protocol: str
    port: int
    horizon: int
    family: str = ""
    host: str = "127.0.0.1"
    api_key_env: str | None = None
    timeout_s: float = opt(10.0, gt=0)   # seconds
    cameras: dict[str, str] = opt({}, choices=CAMERAS)   # policies normally get middle and wrist
    state_key: str = "observation/state"
    prompt_key: str = "prompt"
    image_size: list[int] | None = None
    action_dim: int = opt(6, lo=6)   # the first six columns are the joints in order
    execute_steps: int | None = None
    control_hz: float = opt(30.0, gt=0)
    timer_s: float = opt(60.0, gt=0)   # seconds
    ema_alpha: float | None = opt(None, gt=0, hi=1)   # null: no filter
    pre_rollout_assist: dict[str, Any] | None = None
    request_threshold: int = 0
    allow_remote_pickle: bool = False
    extra_keys: dict[str, str] = opt({}, choices=OBSERVATION_EXTRAS)
    extra: dict[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None
    checkpoint_digest: str | None = None
    launch: LaunchConfig | None = None

    def __post_init__(self) -> None:
        self._check()

    # -- validation -------------------------------------------------------------------------
    def _fail(self, field_name: str, message: str, allowed: Any = None) -> NoReturn:
        allowed = "" if allowed is None else f" (allowed: {allowed})"
        raise field_error(f"policy card '{self.name}'", field_name, message + allowed)

    def _check(self) -> None:
        if not self.name:
            raise field_error("policy card", "name", f"{self.name!r} (allowed: a non-empty name)")
        check_fields(self, f"policy card '{self.name}'")
        if self.protocol not in PROTOCOLS:
            self._fail("protocol", f"{self.protocol!r}", " | ".join(PROTOCOLS))
        if not 1 <= self.port <= 65535:
            self._fail("port", f"{self.port!r}", "an integer 1..65535")
        if not self.host:
            self._fail("host", f"{self.host!r}", "a host name or IP address")
        if self.horizon < 1:
            self._fail("horizon", f"{self.horizon!r}", "an integer >= 1")
        if self.execute_steps is None:
            self.execute_steps = self.horizon
        if not 1 <= self.execute_steps <= self.horizon:
            self._fail("execute_steps", f"{self.execute_steps!r}",
                       f"an integer 1..horizon ({self.horizon}), or null for the whole horizon")
        if not 0 <= self.request_threshold < self.execute_steps:
            self._fail("request_threshold", f"{self.request_threshold!r}",
                       f"an integer 0..execute_steps-1 (0..{self.execute_steps - 1})")
        self.cameras, self.extra_keys = dict(self.cameras), dict(self.extra_keys)
        self._check_image_size()
        self._check_assist()
        for key in ("state_key", "prompt_key"):
            value = getattr(self, key)
            if not value:
                self._fail(key, f"{value!r}", "a non-empty server key")
        if self.api_key_env is not None and not self.api_key_env:
            self._fail("api_key_env", f"{self.api_key_env!r}", "null or an environment variable name")
        self.extra = dict(self.extra)
        if self.checkpoint is not None and not self.checkpoint:
            self._fail("checkpoint", f"{self.checkpoint!r}", "null, a local path or a hub id")
        if self.checkpoint_digest is not None and not is_digest(self.checkpoint_digest):
            self._fail("checkpoint_digest", f"{self.checkpoint_digest!r}", "null or sha256:<64 hex digits>")
        self.launch = launch_from_mapping(self.launch, self.name)

    @property
    def local_checkpoint(self) -> Path | None:
        """The card's checkpoint as a path on this machine, when it is one (not a hub id)."""
        if not self.checkpoint:
            return None
        path = Path(self.checkpoint).expanduser()
        return path if path.exists() else None

    def _check_image_size(self) -> None:
        if self.image_size is None:
            return
        size = list(self.image_size)
        if len(size) != 2 or not all(v > 0 for v in size):
            self._fail("image_size", f"{self.image_size!r}", "null (native resolution) or [height, width]")
        self.image_size = [int(size[0]), int(size[1])]

    def _check_assist(self) -> None:
        assist = self.pre_rollout_assist
        if assist is None:
            return
        if not isinstance(assist, dict):
            self._fail("pre_rollout_assist", f"{assist!r}", "null or {type: lift, dz_mm: <mm>}")
        if assist.get("type") not in ASSIST_TYPES:
            self._fail("pre_rollout_assist.type", f"{assist.get('type')!r}", " | ".join(ASSIST_TYPES))
        unknown = set(assist) - {"type", "dz_mm"}
        if unknown:
            self._fail("pre_rollout_assist", f"unknown keys {sorted(unknown)}", "type, dz_mm")
        dz = assist.get("dz_mm")
        if not _is_number(dz) or not 0.0 < dz <= MAX_ASSIST_DZ_MM:
            self._fail("pre_rollout_assist.dz_mm", f"{dz!r}", f"a number 0 < dz_mm <= {MAX_ASSIST_DZ_MM:g}")
        self.pre_rollout_assist = {"type": assist["type"], "dz_mm": float(dz)}

    # -- conveniences ----------------------------------------------------------------------
    @property
    def period_s(self) -> float:
        """Control period in seconds."""
        return 1.0 / self.control_hz

    def api_key(self) -> str | None:
        """The API key from the environment variable the card names (None when the card names none)."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"policy card '{self.name}': field 'api_key_env' names environment variable "
                f"{self.api_key_env!r}, which is not set"
            )
        return value


def _is_number(value: Any) -> TypeGuard[float]:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(float(value)))


def card_from_mapping(data: Any, source: str = "policy card") -> PolicyCard:
    """A card from a dict or DictConfig (e.g. the composed `cfg.policy`); unknown keys are an error."""
    try:
        return typed_node(PolicyCard, data, source)
    except ConfigError as exc:
        raise exc if str(exc).startswith(source) else ConfigError(f"{source}: {exc}") from None


def _policy_conf_dir() -> Path:
    from spabench.paths import conf_dir

    return conf_dir() / "policy"


def available_cards(search: list[Path] | None = None) -> list[str]:
    """Names of the cards in the search folders (default: conf/policy)."""
    return sorted({p.stem for d in (search or [_policy_conf_dir()]) for p in Path(d).glob("*.yaml")})


def load_card(name_or_path: str | os.PathLike, search: list[Path] | None = None) -> PolicyCard:
    """A card by name (<folder>/<name>.yaml, first of `search`, default conf/policy) or by path to a yaml file."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if not (path.suffix in (".yaml", ".yml") or path.exists()):
        folders = search or [_policy_conf_dir()]
        path = next((Path(d) / f"{text}.yaml" for d in folders if (Path(d) / f"{text}.yaml").exists()),
                    Path(folders[-1]) / f"{text}.yaml")
        if not path.exists():
            raise ConfigError(f"unknown policy card {text!r} in {' or '.join(map(str, folders))} "
                              f"(allowed: {', '.join(available_cards(folders))})")
    if not path.is_file():
        raise ConfigError(f"{path}: policy card file not found")
    from spabench.suite.yamlio import refuse_aliases

    refuse_aliases(path.read_bytes(), path)   # no YAML alias bombs (i10)
    # the command line's loader: a lab card's `defaults:` list and `${oc.env:VAR}` work here as in `serve`
    data = load_option("policy", path, [Path(d).parent for d in (search or [_policy_conf_dir()])])
    return card_from_mapping(data, source=str(path))


def policy_group() -> Any:
    """The `policy` group field of a command's config (one policy card)."""
    return group("a policy card (conf/policy/)", "spabench.policy.card:card_from_mapping",
                 "spabench.policy.card:PolicyCard")
