"""`spabench serve lerobot`: a local LeRobot checkpoint behind the openpi websocket protocol."""

from __future__ import annotations

import logging
from typing import Any

from spabench.errors import ConfigError
from spabench.serve.security import check_bind, check_port, is_loopback

log = logging.getLogger(__name__)

__all__ = ["serve_lerobot", "make_lerobot_server", "DEFAULT_PORT"]

DEFAULT_PORT = 8000  # openpi's default; the act_local card uses it too
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    value = cfg.get(key, default) if hasattr(cfg, "get") else getattr(cfg, key, default)
    return default if value is None else value


def make_lerobot_server(cfg: Any):
    """Load the checkpoint and build (not start) its OpenPiServer. Keys: checkpoint, host, port,
    api_key, device ('cpu'), key_map (optional {lerobot_feature: openpi_key})."""
    from spabench.serve.lerobot_policy import LeRobotPolicy
    from spabench.serve.openpi_server import OpenPiServer

    checkpoint = _get(cfg, "checkpoint")
    if not checkpoint:
        raise ConfigError("serve lerobot: checkpoint=DIR is required (a local LeRobot checkpoint folder, "
                          "e.g. outputs/train/<run>/checkpoints/last/pretrained_model)")
    host = str(_get(cfg, "host", "127.0.0.1"))
    port = _get(cfg, "port", DEFAULT_PORT)
    check_port(port, "serve lerobot")
    api_key = _get(cfg, "api_key") or None
    check_bind(host, api_key, _get(cfg, "allow_insecure", False), "serve lerobot")
    device = str(_get(cfg, "device", "cpu"))
    key_map = _get(cfg, "key_map") or None
    if key_map is not None and hasattr(key_map, "items"):
        key_map = {str(k): str(v) for k, v in key_map.items()}
    policy = LeRobotPolicy(checkpoint, device=device, key_map=key_map)
    if not is_loopback(host) and api_key is None:
        log.warning("serving on %s without api_key (allow_insecure=true): anyone on the network can drive "
                    "this policy", host)
    return OpenPiServer(policy, metadata=policy.metadata, host=host, port=port, api_key=api_key,
                        max_frame_bytes=_get(cfg, "max_frame_bytes"),
                        supports_reset=True, reset_fn=policy.reset)


def serve_lerobot(cfg: Any) -> int:
    """Serve until Ctrl-C."""
    server = make_lerobot_server(cfg)
    try:
        server.listen()
    except OSError as exc:
        raise ConfigError(f"serve lerobot: cannot listen on {server.host}:{server.port}: {exc}") from None
    meta = server.metadata
    print(f"serving {meta['policy_type']} checkpoint {meta['checkpoint']} (chunk {meta['chunk_size']} x "
          f"{meta['action_dim']}) on ws://{server.host}:{server.port}  inputs: {meta['inputs']}", flush=True)
    server.serve_forever()
    return 0
