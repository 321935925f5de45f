"""The `launch:` block of a policy card: how spabench starts the card's server itself.

Data only (validated here, run by `spabench.servers`). The server answers on the card's own
host and port; with `ssh`, the command runs on that host and the card's port on this machine is
forwarded to `remote_port` there (the card then says host 127.0.0.1). GPU selection goes through
`env` (e.g. CUDA_VISIBLE_DEVICES: "1").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from spabench.config import check_fields, typed_node
from spabench.errors import ConfigError

__all__ = ["LaunchConfig", "launch_from_mapping"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SSH_HOST = re.compile(r"^([A-Za-z0-9._-]+@)?[A-Za-z0-9._:-]+$")


@dataclass
class LaunchConfig:
    """argv: the command, one word per item (no shell). cwd: its working folder (on the ssh host
    with `ssh`). env: added to the environment. ssh: null (this machine) or [user@]host.
    remote_port: the port the server listens on at the ssh host (null: the card's port).
    startup_timeout_s: how long the server may take until its protocol's health check answers.
    max_restarts: how often a launched server that died is started again per campaign.
    order: servers of a lower order are up before those of a higher one start; equal orders start
    together."""

    argv: list[str]
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    ssh: str | None = None
    remote_port: int | None = None
    startup_timeout_s: float = 300.0
    max_restarts: int = 2
    order: int = 0

    def check(self, card: str) -> None:
        def fail(name: str, value: Any, allowed: str) -> None:
            raise ConfigError(f"policy card '{card}': field 'launch.{name}' is {value!r} (allowed: {allowed})")

        check_fields(self, f"policy card '{card}'", "launch.")
        if not self.argv:
            fail("argv", self.argv, "a non-empty list of words, e.g. [spabench, serve, lerobot, checkpoint=DIR]")
        if self.cwd is not None and not self.cwd:
            fail("cwd", self.cwd, "null or a folder")
        if not all(_ENV_NAME.match(k) for k in self.env):
            fail("env", self.env, "a mapping NAME: value, e.g. {CUDA_VISIBLE_DEVICES: '1'}")
        if self.ssh is not None and not _SSH_HOST.match(self.ssh):
            fail("ssh", self.ssh, "null (this machine) or [user@]host")
        if self.remote_port is not None and not 1 <= self.remote_port <= 65535:
            fail("remote_port", self.remote_port, "null or an integer 1..65535")
        if self.remote_port is not None and self.ssh is None:
            fail("remote_port", self.remote_port, "null unless 'ssh' names a host")
        if not self.startup_timeout_s > 0:
            fail("startup_timeout_s", self.startup_timeout_s, "a number > 0 (seconds)")
        if self.max_restarts < 0:
            fail("max_restarts", self.max_restarts, "an integer >= 0")


def launch_from_mapping(data: Any, card: str) -> LaunchConfig | None:
    """The card's launch block (None stays None), typed by `typed_node`, then checked."""
    if data is None:
        return None
    launch = typed_node(LaunchConfig, data, f"policy card '{card}'", "launch.")
    launch.check(card)
    return launch
