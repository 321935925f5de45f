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

from spabench.config import check_fields, field_error, opt, typed_node

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
    remote_port: int | None = opt(None, lo=1, hi=65535)
    startup_timeout_s: float = opt(300.0, gt=0)   # seconds
    max_restarts: int = opt(2, lo=0)
    order: int = 0

    def check(self, card: str) -> None:
        def fail(name: str, value: Any, allowed: str) -> None:
            raise field_error(f"policy card '{card}'", f"launch.{name}", f"{value!r} (allowed: {allowed})")

        check_fields(self, f"policy card '{card}'", "launch.")
        if not self.argv:
            fail("argv", self.argv, "a non-empty list of words, e.g. [spabench, serve, lerobot, checkpoint=DIR]")
        if self.cwd is not None and not self.cwd:
            fail("cwd", self.cwd, "null or a folder")
        if not all(_ENV_NAME.match(k) for k in self.env):
            fail("env", self.env, "a mapping NAME: value, e.g. {CUDA_VISIBLE_DEVICES: '1'}")
        if self.ssh is not None and not _SSH_HOST.match(self.ssh):
            fail("ssh", self.ssh, "null (this machine) or [user@]host")
        if self.remote_port is not None and self.ssh is None:
            fail("remote_port", self.remote_port, "null unless 'ssh' names a host")


def launch_from_mapping(data: Any, card: str) -> LaunchConfig | None:
    """The card's launch block (None stays None), typed by `typed_node`, then checked."""
    if data is None:
        return None
    launch = typed_node(LaunchConfig, data, f"policy card '{card}'", "launch.")
    launch.check(card)
    return launch
