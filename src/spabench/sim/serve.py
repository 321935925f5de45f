"""`spabench serve scripted`: the twin's scripted stand-in policy (NOT a VLA) over openpi websocket.

cfg keys (conf/config.yaml top level): mode compositional|memorising|state_blind, host, port (null: the policy
card's), seed, grasp_noise_cm, api_key; the suite group's root/hardware say where tasks/ lives; the
policy group's horizon sets the chunk length (default 30).
"""

from __future__ import annotations

import logging
from typing import Any

from spabench.errors import ConfigError

log = logging.getLogger(__name__)
DEFAULT_PORT = 8765


def _get(cfg: Any, path: str, default=None):
    node = cfg
    for part in path.split("."):
        if node is None:
            return default
        try:
            node = node.get(part) if hasattr(node, "get") else getattr(node, part, None)
        except Exception:  # noqa: BLE001 - omegaconf raises on missing keys in struct mode
            return default
    return default if node is None else node


def build_server(cfg: Any):
    """(ScriptedPolicy, OpenPiServer) from the composed config, not yet listening."""
    from spabench.serve.openpi_server import OpenPiServer
    from spabench.sim.grounding import MODES
    from spabench.sim.scripted import ScriptedPolicy

    mode = str(_get(cfg, "mode", "compositional"))
    if mode not in MODES:
        raise ConfigError(f"serve scripted: field 'mode': {mode!r} (allowed: {', '.join(MODES)})")
    try:
        noise = float(_get(cfg, "grasp_noise_cm", 0.0))
        seed = int(_get(cfg, "seed", 0))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"serve scripted: fields 'seed' / 'grasp_noise_cm' must be numbers ({exc})") from exc
    if noise < 0:
        raise ConfigError(f"serve scripted: field 'grasp_noise_cm': {noise} (allowed: >= 0)")
    from spabench.serve.security import check_bind, check_port

    port = check_port(_get(cfg, "port") or _get(cfg, "policy.port") or DEFAULT_PORT, "serve scripted")
    host = str(_get(cfg, "host", "127.0.0.1"))
    check_bind(host, _get(cfg, "api_key"), _get(cfg, "allow_insecure", False), "serve scripted")
    horizon = int(_get(cfg, "policy.horizon", 30))
    policy = ScriptedPolicy(mode=mode, seed=seed, grasp_noise_cm=noise, horizon=horizon,
                            tasks_root=str(_get(cfg, "suite.root", "tasks")),
                            hardware_root=str(_get(cfg, "suite.hardware", "hardware")))
    server = OpenPiServer(policy.infer, policy.metadata, host=host, port=int(port),
                          max_frame_bytes=_get(cfg, "max_frame_bytes"),
                          api_key=_get(cfg, "api_key"), reset_fn=policy.reset)
    return policy, server


def serve_scripted(cfg: Any) -> int:
    """Serve until Ctrl-C. Returns the exit code."""
    policy, server = build_server(cfg)
    log.warning("serving the scripted stand-in policy (mode=%s; NOT a VLA) on ws://%s:%d",
                policy.mode, server.host, server.port)
    server.serve_forever()
    return 0
