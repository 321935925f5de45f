"""Policy servers the harness vouches for: launched from their cards, supervised, their identity pinned.

Launching. A card with a `launch:` block (policy/launch.py) is started by spabench: its argv runs
in its own process group, output appended to `<campaign>/servers/<card>.log`; what runs is written
to `<campaign>/servers/servers.json` (pid, the process's start time, so a recycled pid is never
signalled, argv, log, the checkpoint digest). A server is up once its protocol's own health check
answers (the client's connect: openpi's metadata frame, GR00T's ping, the HTTP status routes).
When the card names a local checkpoint and the server runs on this machine, spabench computes the
checkpoint's digest itself before starting it. A launched server found dead is started again at
most `launch.max_restarts` times per campaign, each restart a `server_restarted` ledger event.
In argv, `{checkpoint}` and `{port}` stand for the card's checkpoint and port.

Pinning. Ledger events without an attempt: `server_identity_pinned` {card, identity} at a card's
first connection of the campaign; `server_identity_accepted` {card, previous, identity, reason} when
a session ran with `accept_new_identity=true reason=...`; from then on that identity is the pinned
one. Any other difference is `ServerIdentityChanged`: the session stops before its next attempt.
Within a session the identity is compared again around every attempt (`changed_in_session`): a
server that swapped its checkpoint without a restart gets a `server_identity_changed` event, the
attempt it touched is invalid (`server_changed`) and the session stops; no override applies there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from spabench.errors import ConfigError
from spabench.policy.identity import ServerIdentity, checkpoint_digest

log = logging.getLogger(__name__)

__all__ = ["PINNED", "ACCEPTED", "CHANGED", "changed_in_session", "STARTED", "RESTARTED", "STOPPED", "ServerIdentityChanged",
           "pinned_identities", "pin_or_compare", "Supervisor", "SERVERS_DIR"]

PINNED, ACCEPTED = "server_identity_pinned", "server_identity_accepted"
CHANGED = "server_identity_changed"   # the identity changed during a session (no restart seen)
STARTED, RESTARTED, STOPPED = "server_started", "server_restarted", "server_stopped"
SERVERS_DIR = "servers"
STATE_FILE = "servers.json"
STOP_WAIT_S = 10.0
POLL_S = 0.2


class ServerIdentityChanged(ConfigError):
    """The server answering a card is not the one the campaign pinned."""


# ---- pinning ------------------------------------------------------------------------------------
def pinned_identities(ledger: Any) -> dict[str, ServerIdentity]:
    """card -> the identity in force (the last pin or accepted override)."""
    out: dict[str, ServerIdentity] = {}
    for event in ledger.events():
        if event["kind"] in (PINNED, ACCEPTED) and event["attempt_id"] is None:
            out[event["payload"]["card"]] = ServerIdentity.from_dict(event["payload"]["identity"])
    return out


def pin_or_compare(ledger: Any, card: str, who: str, identity: ServerIdentity, *,
                   accept: bool = False, reason: str | None = None) -> str:
    """Pin `identity` for `card` (its first connection), or compare it with the pinned one.

    Returns "pinned", "same" or "accepted". `who` names the policy in messages (its alias in a blind
    campaign). A difference raises ServerIdentityChanged unless `accept` (with a reason), which logs
    the override and makes the new identity the pinned one."""
    pinned = pinned_identities(ledger).get(card)
    if pinned is None:
        ledger.log_event(None, PINNED, {"card": card, "identity": identity.as_dict()})
        return "pinned"
    if not identity.differs_from(pinned):
        return "same"
    if not accept:
        raise ServerIdentityChanged(
            f"the policy server of {who} is not the one this campaign pinned: pinned {pinned.describe()}; "
            f"now {identity.describe()}. The session stops before the next attempt; nothing has moved. "
            "Start the pinned checkpoint again or, if the change is intended, resume with "
            "accept_new_identity=true reason=\"...\" (logged in the ledger, listed in the report)")
    ledger.log_event(None, ACCEPTED, {"card": card, "previous": pinned.as_dict(),
                                      "identity": identity.as_dict(), "reason": reason})
    return "accepted"


def changed_in_session(ledger: Any, card: str, who: str, pinned: ServerIdentity,
                       identity: ServerIdentity, when: str) -> ServerIdentityChanged | None:
    """None while `identity` is the one the session started with; else the error to stop with, after
    a `server_identity_changed` ledger event. `when` says where in the session it was seen."""
    if not identity.differs_from(pinned):
        return None
    ledger.log_event(None, CHANGED, {"card": card, "pinned": pinned.as_dict(), "identity": identity.as_dict(),
                                     "when": when})
    return ServerIdentityChanged(
        f"the policy server of {who} changed its checkpoint during the session ({when}), without a restart: "
        f"pinned {pinned.describe()}; now {identity.describe()}. The session stops; nothing from the "
        "changed server is counted. Start the pinned checkpoint again and resume, or resume with "
        "accept_new_identity=true reason=\"...\" if the change is intended")


# ---- processes ----------------------------------------------------------------------------------
def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22); None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2:].split()
    if rest[0] in ("Z", "X"):   # exited, not yet reaped
        return None
    return int(rest[19])


def _alive(entry: Mapping[str, Any]) -> bool:
    return entry.get("pid") is not None and _start_ticks(int(entry["pid"])) == entry.get("start_ticks")


def _own_entry_point(program: str) -> str:
    """`spabench` launched on this machine is the harness's own entry point, the one beside the running
    interpreter: a virtual environment that is not activated (`.venv/bin/spabench run launch=true`,
    `make test`) has no `spabench` on PATH, and another one on PATH would be another install."""
    if program == "spabench":
        own = Path(sys.executable).with_name("spabench")
        if own.is_file():
            return str(own)
    return program


def command_line(card: Any) -> list[str]:
    """The argv spabench runs for a card: `{checkpoint}`/`{port}` filled; wrapped in ssh (command on
    the remote host, the card's port forwarded there) when the launch block names an ssh host."""
    launch = card.launch
    port = launch.remote_port or card.port if launch.ssh else card.port
    argv = [a.replace("{checkpoint}", str(card.checkpoint or "")).replace("{port}", str(port)) for a in launch.argv]
    if not launch.ssh:
        return argv
    remote = " ".join(f"{k}={shlex.quote(v)}" for k, v in launch.env.items())
    remote = (f"cd {shlex.quote(launch.cwd)} && " if launch.cwd else "") + (f"env {remote} " if remote else "") \
        + shlex.join(argv)
    # -tt: the remote command gets a terminal, so it is hung up when the ssh process is stopped
    return ["ssh", "-tt", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
            "-L", f"{card.port}:127.0.0.1:{port}", launch.ssh, remote]


class Supervisor:
    """The launched servers of one campaign folder: start, check, restart, stop.

    `ledger` (optional) receives the started/restarted/stopped events; `say` prints progress;
    `who` maps a card to its name in messages and log file names (its alias in a blind campaign)."""

    def __init__(self, campaign_dir: Path, ledger: Any = None, say: Callable[[str], None] = print,
                 who: Mapping[str, str] | None = None):
        self.folder = Path(campaign_dir) / SERVERS_DIR
        self.ledger = ledger
        self.say = say
        self.who = dict(who or {})
        self._children: dict[int, subprocess.Popen] = {}

    # -- state file --------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self.folder / STATE_FILE

    def state(self) -> dict[str, dict[str, Any]]:
        try:
            return json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ConfigError(f"{self.state_path}: not readable ({exc}); stop the servers it names by hand "
                              "and delete it") from None

    def _save(self, state: Mapping[str, Any]) -> None:
        self.folder.mkdir(exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
        os.replace(tmp, self.state_path)

    def launched_digest(self, card: str) -> str | None:
        """The checkpoint digest spabench computed when it launched this card's running server."""
        entry = self.state().get(card)
        return entry.get("checkpoint_digest") if entry and _alive(entry) else None

    def alive(self, card: str) -> bool:
        entry = self.state().get(card)
        return entry is not None and bool(entry) and _alive(entry)

    def status(self, cards: Mapping[str, Any]) -> list[dict[str, Any]]:
        state = self.state()
        rows = []
        for name, card in cards.items():
            entry = state.get(name) or {}
            rows.append({"card": name, "launch": card.launch is not None, "pid": entry.get("pid"),
                         "alive": bool(entry) and _alive(entry), "log": entry.get("log"),
                         "checkpoint_digest": entry.get("checkpoint_digest"),
                         "restarts": self.restarts(name)})
        return rows

    def restarts(self, card: str) -> int:
        if self.ledger is None:
            return 0
        return sum(1 for e in self.ledger.events(kind=RESTARTED) if e["payload"].get("card") == card)

    # -- start -------------------------------------------------------------------------------
    def up(self, cards: Mapping[str, Any], probe: Callable[[Any], None]) -> list[str]:
        """Start every card's launch block that is not running, lower `order` first; returns the
        cards this call started. `probe(card)` raises until the server answers its health check."""
        launched = {n: c for n, c in cards.items() if c.launch is not None}
        started: list[str] = []
        for order in sorted({c.launch.order for c in launched.values()}):
            group = {n: c for n, c in launched.items() if c.launch.order == order}
            waiting = []
            for name, card in group.items():
                if self.alive(name):
                    self.say(f"{self._who(name)}: already up (pid {self.state()[name]['pid']})")
                    continue
                self._start(name, card, restart=name in self.state())
                waiting.append(name)
                started.append(name)
            for name in waiting:
                self.wait_ready(name, group[name], probe)
        return started

    def _who(self, name: str) -> str:
        return self.who.get(name, name)

    def _start(self, name: str, card: Any, restart: bool) -> dict[str, Any]:
        launch = card.launch
        state = self.state()
        previous = state.get(name)
        if restart:
            done = self.restarts(name)
            if done >= launch.max_restarts:
                raise ConfigError(f"the launched server of {self._who(name)} died and was already restarted "
                                  f"{done} time(s), its card's launch.max_restarts; see its log "
                                  f"{(previous or {}).get('log')}. Fix it, then `spabench servers down` and up")
        digest = None
        local = card.local_checkpoint
        if local is not None and not launch.ssh:
            self.say(f"{self._who(name)}: computing the digest of {local} ...")
            digest = checkpoint_digest(local)
        argv = command_line(card)
        self.folder.mkdir(exist_ok=True)
        log_path = self.folder / f"{self._who(name)}.log"   # the alias in a blind campaign
        env = {**os.environ, **(launch.env if not launch.ssh else {})}
        cwd = launch.cwd if launch.cwd and not launch.ssh else None
        with open(log_path, "ab") as log_file:
            log_file.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} {shlex.join(argv)}\n".encode())
            log_file.flush()
            try:
                proc = subprocess.Popen([_own_entry_point(argv[0]), *argv[1:]], stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                        cwd=cwd, env=env, start_new_session=True)
            except OSError as exc:
                raise ConfigError(f"policy card '{name}': field 'launch.argv' cannot be run: {exc}") from None
        self._children[proc.pid] = proc
        entry = {"pid": proc.pid, "start_ticks": _start_ticks(proc.pid), "argv": argv, "log": str(log_path),
                 "checkpoint_digest": digest, "started_at": time.time(), "host": card.host, "port": card.port}
        state[name] = entry
        self._save(state)
        if self.ledger is not None:
            payload = {"card": name, "pid": proc.pid, "argv": argv, "log": str(log_path), "checkpoint_digest": digest}
            if restart:
                payload.update(previous_pid=(previous or {}).get("pid"), restart=self.restarts(name) + 1,
                               max_restarts=launch.max_restarts)
            self.ledger.log_event(None, RESTARTED if restart else STARTED, payload)
        self.say(f"{self._who(name)}: {'restarted' if restart else 'started'} (pid {proc.pid}), log {log_path}")
        return entry

    def wait_ready(self, name: str, card: Any, probe: Callable[[Any], None]) -> None:
        """Wait until `probe(card)` passes; ConfigError when the process exits or the start-up
        timeout passes first (the log's tail is quoted)."""
        deadline = time.monotonic() + card.launch.startup_timeout_s
        last: Exception | None = None
        while True:
            entry = self.state().get(name) or {}
            if not _alive(entry):
                self._reap(entry.get("pid"))
                raise ConfigError(f"the launched server of {self._who(name)} exited during start-up; "
                                  f"its log {entry.get('log')} ends:\n{_tail(entry.get('log'))}")
            try:
                probe(card)
                self.say(f"{self._who(name)}: up at {card.host}:{card.port}")
                return
            except Exception as exc:  # noqa: BLE001 - not up yet, whatever the protocol says
                last = exc
            if time.monotonic() >= deadline:
                raise ConfigError(f"the launched server of {self._who(name)} did not answer its health check "
                                  f"within launch.startup_timeout_s={card.launch.startup_timeout_s:g} s "
                                  f"(last: {last}); its log {entry.get('log')} ends:\n{_tail(entry.get('log'))}")
            time.sleep(POLL_S)

    def ensure_up(self, name: str, card: Any, probe: Callable[[Any], None]) -> bool:
        """Restart the card's launched server if it died (within max_restarts); True when it did."""
        if card.launch is None or name not in self.state() or self.alive(name):
            return False
        self.say(f"the launched server of {self._who(name)} is not running; restarting it")
        self._start(name, card, restart=True)
        self.wait_ready(name, card, probe)
        return True

    # -- stop --------------------------------------------------------------------------------
    def down(self, names: Iterable[str] | None = None) -> list[str]:
        """Stop the named launched servers (default: all): SIGTERM to the process group, SIGKILL
        after STOP_WAIT_S. Returns the cards that were running."""
        state = self.state()
        stopped = []
        for name in list(names if names is not None else state):
            entry = state.get(name)
            if entry is None:
                continue
            if _alive(entry):
                self._signal(entry, signal.SIGTERM)
                deadline = time.monotonic() + STOP_WAIT_S
                while _alive(entry) and time.monotonic() < deadline:
                    time.sleep(POLL_S)
                if _alive(entry):
                    self._signal(entry, signal.SIGKILL)
                stopped.append(name)
                if self.ledger is not None:
                    self.ledger.log_event(None, STOPPED, {"card": name, "pid": entry["pid"]})
                self.say(f"{self._who(name)}: stopped (pid {entry['pid']})")
            self._reap(entry.get("pid"))
            del state[name]
        self._save(state)
        return stopped

    @staticmethod
    def _signal(entry: Mapping[str, Any], sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(entry["pid"]), sig)   # its own session: the group is the server and its children

    def _reap(self, pid: int | None) -> None:
        proc = self._children.pop(int(pid), None) if pid is not None else None
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_WAIT_S)


def _tail(path: str | None, lines: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:]) if path else "(no log)"
    except OSError:
        return "(no log)"
