"""Typed settings of the browser console (`operator.console.*`, shared by `run operator=web` and
`spabench console`). No web imports here (the console package's __init__ imports nothing either):
the root config checks the operator group's `console` section against this class when it builds the
group (spabench.config.GROUP_SECTIONS), before anything starts, without loading the server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spabench.config import finite_floats, group, typed_node
from spabench.configtools import int_in, number_in
from spabench.errors import ConfigError
from spabench.network import is_loopback  # one loopback rule for policy servers and the console
from spabench.operator.alignment import DEFAULT_ROI, DEFAULT_THRESHOLD


@dataclass
class ConsoleConfig:
    """host/port: where the console listens (127.0.0.1 by default; any other address requires the
    token: `token` or, when empty, a random one printed at start-up).
    stream_hz / jpeg_quality / stream_width: live views (latest frame only, JPEG, encoded off the
    control loop; stream_width caps the width sent to the browser).
    alignment_threshold: the live alignment score (0..1) at which the scene counts as matching the
    reference; workspace_roi: the scored region as fractions [x0, y0, x1, y1] of the image.
    camera_check_s: how long the session-start camera check measures frame rates before it reports.
    deadman_s: the dead-man: while the arm goes home before a trial or a rollout runs, a bench page
    must be heard from (its state polls, every 0.2 s) at least this often, else the arm holds and the
    session ends (attempt invalid, `console_lost`).
    allowed_hosts: extra host names the console answers to (the Host header); the bound address, IP
    literals and localhost always work, any other name is refused (DNS rebinding).
    max_body_bytes: the largest request body the API reads (larger ones get 413 before being read).
    max_note_chars: the longest score note, rescore reason or rater name accepted (longer: 400).
    max_connections / idle_timeout_s / request_timeout_s: open connections the console keeps (past
    the cap another one is closed, live-view pollers before the bench page's own connections: see
    console.connections, so an e-stop from a new connection gets in); a connection that sends
    no complete request head for idle_timeout_s, or whose body is not in after request_timeout_s, is
    closed.
    max_stream_clients: pages that may watch the live views at once (others get 503 for frames).
    fd_reserve: file descriptors kept free for the session (recorder, ledger, bus) beyond everything
    the console can hold; the soft RLIMIT_NOFILE is raised to make room, or the console refuses to start.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    token: str = ""
    stream_hz: float = 8.0
    jpeg_quality: int = 70
    stream_width: int = 320
    alignment_threshold: float = DEFAULT_THRESHOLD
    workspace_roi: list[float] = field(default_factory=lambda: list(DEFAULT_ROI))
    camera_check_s: float = 1.0
    deadman_s: float = 1.0
    allowed_hosts: list[str] = field(default_factory=list)
    max_body_bytes: int = 1_048_576
    max_note_chars: int = 4000
    max_connections: int = 64
    idle_timeout_s: float = 10.0
    request_timeout_s: float = 30.0
    max_stream_clients: int = 4
    fd_reserve: int = 512

    def __post_init__(self) -> None:
        where = "operator.console, field"
        finite_floats(self, "operator.console")
        if not self.host:
            raise ConfigError(f"{where} 'host': {self.host!r} (allowed: an address to bind, e.g. 127.0.0.1)")
        int_in(f"{where} 'port'", self.port, 0, 65535, "; 0 = a free port")
        self.token = "" if self.token is None else str(self.token)
        for name, lo, hi in (("stream_hz", 0.5, 30.0), ("alignment_threshold", 0.0, 1.0),
                             ("camera_check_s", 0.1, 30.0), ("deadman_s", 0.5, 30.0),
                             ("idle_timeout_s", 0.5, 600.0), ("request_timeout_s", 1.0, 3600.0)):
            setattr(self, name, number_in(f"{where} '{name}'", getattr(self, name), lo, hi))
        for name, ilo, ihi in (("jpeg_quality", 10, 95), ("stream_width", 64, 1920),
                               ("max_body_bytes", 1024, 64 * 2**20), ("max_note_chars", 100, 100_000),
                               ("max_connections", 8, 1024), ("max_stream_clients", 1, 64),
                               ("fd_reserve", 64, 65536)):
            int_in(f"{where} '{name}'", getattr(self, name), ilo, ihi)
        roi = list(self.workspace_roi or [])
        ok = len(roi) == 4 and all(0 <= v <= 1 for v in roi)
        if not ok or roi[0] >= roi[2] or roi[1] >= roi[3]:
            raise ConfigError(f"{where} 'workspace_roi': {self.workspace_roi!r} "
                              "(allowed: [x0, y0, x1, y1], fractions 0..1 with x0 < x1 and y0 < y1)")
        self.workspace_roi = [float(v) for v in roi]
        hosts = self.allowed_hosts
        if not all(h.strip() for h in hosts):
            raise ConfigError(f"{where} 'allowed_hosts': {hosts!r} (allowed: a list of host names, e.g. [bench1.lab])")
        self.allowed_hosts = [h.strip().lower() for h in hosts]

    @property
    def needs_token(self) -> bool:
        return not is_loopback(self.host)

    @classmethod
    def from_mapping(cls, data: Any) -> ConsoleConfig:
        return typed_node(cls, data, "operator.console")


def operator_group_with_console(data: Any) -> Any:
    """The operator group with its console section checked (a typo in operator.console fails before
    anything connects); the web operator type registers itself when its module is imported."""
    import importlib

    from spabench.operator.config import operator_config

    built = operator_config(data)
    ConsoleConfig.from_mapping(built.console)
    if built.type == "web":
        importlib.import_module("spabench.console.operator")
    return built


def operator_group() -> Any:
    """The `operator` group field of a command that may run the browser console (operator=web)."""
    return group("who resets scenes and scores (conf/operator/)", "spabench.console.config:operator_group_with_console",
                 "spabench.operator.config:OperatorConfig", {"console": "spabench.console.config:ConsoleConfig"})
