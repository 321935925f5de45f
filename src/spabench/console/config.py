"""Typed settings of the browser console (`operator.console.*`, shared by `run operator=web` and
`spabench console`). No web imports here (the console package's __init__ imports nothing either):
the root config checks the operator group's `console` section against this class when it builds the
group (spabench.config.GROUP_SECTIONS), before anything starts, without loading the server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spabench.config import check_fields, field_error, group, opt, typed_node
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
    port: int = opt(8765, lo=0, hi=65535)   # 0: a free port
    token: str = ""
    stream_hz: float = opt(8.0, lo=0.5, hi=30)
    jpeg_quality: int = opt(70, lo=10, hi=95)
    stream_width: int = opt(320, lo=64, hi=1920)
    alignment_threshold: float = opt(DEFAULT_THRESHOLD, lo=0, hi=1)
    workspace_roi: list[float] = opt(list(DEFAULT_ROI), lo=0, hi=1)
    camera_check_s: float = opt(1.0, lo=0.1, hi=30)
    deadman_s: float = opt(1.0, lo=0.5, hi=30)
    allowed_hosts: list[str] = field(default_factory=list)
    max_body_bytes: int = opt(1_048_576, lo=1024, hi=64 * 2**20)
    max_note_chars: int = opt(4000, lo=100, hi=100_000)
    max_connections: int = opt(64, lo=8, hi=1024)
    idle_timeout_s: float = opt(10.0, lo=0.5, hi=600)
    request_timeout_s: float = opt(30.0, lo=1, hi=3600)
    max_stream_clients: int = opt(4, lo=1, hi=64)
    fd_reserve: int = opt(512, lo=64, hi=65536)

    def __post_init__(self) -> None:
        check_fields(self, "operator.console")
        if not self.host:
            raise field_error("operator.console", "host", f"{self.host!r} (allowed: an address to bind, e.g. 127.0.0.1)")
        self.token = "" if self.token is None else str(self.token)
        roi = self.workspace_roi = [float(v) for v in self.workspace_roi or []]
        if len(roi) != 4 or roi[0] >= roi[2] or roi[1] >= roi[3]:
            raise field_error("operator.console", "workspace_roi", f"{roi!r} (allowed: [x0, y0, x1, y1], fractions "
                              "0..1 with x0 < x1 and y0 < y1)")
        if not all(h.strip() for h in self.allowed_hosts):
            raise field_error("operator.console", "allowed_hosts", f"{self.allowed_hosts!r} (allowed: a list of host "
                              "names, e.g. [bench1.lab])")
        self.allowed_hosts = [h.strip().lower() for h in self.allowed_hosts]

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
