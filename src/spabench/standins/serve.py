"""`spabench serve scripted`: the twin's scripted stand-in policy (NOT a VLA) over openpi websocket.

Keys (typed in spabench.config): mode compositional|memorising|state_blind (null: the stand-in the policy card
names, `policy=scripted_memorising` serves the memorising one; mode= given wins), host, port (null: the card's),
seed, grasp_noise_cm, api_key; the suite group's root/hardware say where tasks/ lives; the policy
group's horizon sets the chunk length.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from spabench.config import ServeKeys, opt
from spabench.policy.card import policy_group
from spabench.standins.grounding import MODES
from spabench.suite.config import suite_group

log = logging.getLogger(__name__)
DEFAULT_PORT = 8765


@dataclass
class ServeScriptedConfig(ServeKeys):
    """`spabench serve scripted`."""

    command: ClassVar[str] = "serve scripted"

    mode: str | None = opt(None, 'which stand-in policy (null: the one the policy card names, policy=scripted_<mode>)',
                           choices=MODES)
    grasp_noise_cm: float = opt(0.0, 'grasp position noise of the stand-in', lo=0.0)
    seed: int = opt(0, 'stand-in policy seed', lo=0)
    policy: Any = policy_group()
    suite: Any = suite_group()


def card_mode(card: Any) -> str:
    """The stand-in a card names: its `mode` extra, else its name (conf/policy/scripted_<mode>.yaml);
    compositional for any other card."""
    mode = str(card.extra.get("mode", card.name.removeprefix("scripted_")))
    return mode if mode in MODES else MODES[0]


def build_server(cfg: ServeScriptedConfig):
    """(ScriptedPolicy, OpenPiServer) from the typed config, not yet listening."""
    from spabench.serve.openpi_server import OpenPiServer
    from spabench.standins.scripted import ScriptedPolicy

    card, suite = cfg.need("policy"), cfg.need("suite")
    mode = cfg.mode or card_mode(card)   # a declared choice, or the card's (compositional for any other)
    from spabench.network import check_bind

    port = cfg.port if cfg.port is not None else (card.port or DEFAULT_PORT)
    check_bind(cfg.host, cfg.api_key, cfg.allow_insecure, "serve scripted")
    policy = ScriptedPolicy(mode=mode, seed=cfg.seed, grasp_noise_cm=cfg.grasp_noise_cm,
                            horizon=card.horizon, tasks_root=suite.root, hardware_root=suite.hardware)
    server = OpenPiServer(policy.infer, policy.metadata, host=cfg.host, port=port,
                          max_frame_bytes=cfg.max_frame_bytes, api_key=cfg.api_key, reset_fn=policy.reset)
    return policy, server


def serve_scripted(cfg: ServeScriptedConfig) -> int:
    """Serve until Ctrl-C. Returns the exit code."""
    policy, server = build_server(cfg)
    log.warning("serving the scripted stand-in policy (mode=%s; NOT a VLA) on ws://%s:%d",
                policy.mode, server.host, server.port)
    server.serve_forever()
    return 0
