"""`spabench serve lerobot`: a local LeRobot checkpoint behind the openpi websocket protocol."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from spabench.config import ServeKeys, opt
from spabench.errors import ConfigError
from spabench.network import check_bind, is_loopback

log = logging.getLogger(__name__)

__all__ = ["serve_lerobot", "make_lerobot_server", "DEFAULT_PORT"]

DEFAULT_PORT = 8000  # openpi's default; the act_local card uses it too
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass
class ServeLerobotConfig(ServeKeys):
    """`spabench serve lerobot`."""

    command: ClassVar[str] = "serve lerobot"

    checkpoint: Path | None = opt(None, 'a local LeRobot checkpoint folder')
    device: str = opt('cpu', 'torch device for the checkpoint')


def make_lerobot_server(cfg: ServeLerobotConfig, key_map: dict[str, str] | None = None):
    """Load the checkpoint and build (not start) its OpenPiServer. Keys: checkpoint, host, port
    (null: 8000), api_key, device; `key_map` optionally maps {lerobot_feature: openpi_key}."""
    from spabench.serve.lerobot_policy import LeRobotPolicy
    from spabench.serve.openpi_server import OpenPiServer

    if cfg.checkpoint is None:
        raise ConfigError("serve lerobot: checkpoint=DIR is required (a local LeRobot checkpoint folder, "
                          "e.g. outputs/train/<run>/checkpoints/last/pretrained_model)")
    port = DEFAULT_PORT if cfg.port is None else cfg.port
    api_key = cfg.api_key or None
    check_bind(cfg.host, api_key, cfg.allow_insecure, "serve lerobot")
    policy = LeRobotPolicy(str(cfg.checkpoint), device=cfg.device, key_map=key_map)
    if not is_loopback(cfg.host) and api_key is None:
        log.warning("serving on %s without api_key (allow_insecure=true): anyone on the network can drive "
                    "this policy", cfg.host)
    return OpenPiServer(policy, metadata=policy.metadata, host=cfg.host, port=port, api_key=api_key,
                        max_frame_bytes=cfg.max_frame_bytes,
                        supports_reset=True, reset_fn=policy.reset)


def serve_lerobot(cfg: ServeLerobotConfig) -> int:
    """Serve until Ctrl-C."""
    server = make_lerobot_server(cfg)
    try:
        server.listen()
    except OSError as exc:
        raise ConfigError(f"serve lerobot: cannot listen on {server.host}:{server.port}: {exc}") from None
    meta = server.metadata
    print(f"serving {meta['policy_type']} checkpoint {meta['checkpoint']} (chunk {meta['chunk_size']} x "
          f"{meta['action_dim']}) on ws://{server.host}:{server.port}  inputs: {meta['inputs']}  "
          f"digest: {meta['checkpoint_digest']}", flush=True)
    server.serve_forever()
    return 0
