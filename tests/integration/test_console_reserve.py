"""200 busy live-view pollers cannot keep the e-stop or the bench page's polls out (issue 34).

Measured on main at b9aa984: with 200 local clients polling the live views (more than
`operator.console.max_connections`, 64), a new connection was closed on arrival when no connection
was idle, so an e-stop from a new connection was reset; and the page's keep-alive connection, idle
0.2 s between its polls while the pollers' were idle for microseconds, was the "oldest idle" one and
was evicted first, so its next poll waited for a connection and the dead-man voided a good attempt
(`console_lost`). Now a connection's first request says what it is: the bench page's own requests
(state polls, commands, stops) are kept, live-view pollers are evicted first (console.connections).

The attacker runs in its own process (tests/support/console_attack.py, loopback, 200 pollers for a
bounded time). The page polls over its own kept-alive connections, as a browser does, and never
retries; the e-stop is one POST from a new connection, never retried. The bounds are hang bounds.
"""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import threading
import time

import httpx

from spabench.bench.config import DEFAULT_HOME_POSE
from spabench.ledger import Ledger
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_BENCH
from tests.console.conftest import free_port
from tests.integration.harness import WaveServer, make_campaign
from tests.integration.test_estop import Console, _cfg
from tests.support.campaigns import LOADED_DEADMAN_S
from tests.support.feetech_bus import EmulatedBus

ATTACK = os.path.join(os.path.dirname(__file__), "..", "support", "console_attack.py")
POLLERS = 200


def _established(port: int) -> int:
    """The console's established TCP connections (its side: local port `port`), from /proc/net/tcp."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    local, state = line.split()[1], line.split()[3]
                    n += state == "01" and int(local.rsplit(":", 1)[1], 16) == port
        except OSError:
            continue
    return n


class Page(Console):
    """The bench page: its requests over at most six kept-alive connections (Chromium's per-host
    limit), a state poll every 0.2 s; every request that failed is counted, none is retried."""

    def __init__(self, port: int):
        super().__init__(port)
        self.http = httpx.Client(limits=httpx.Limits(max_connections=6, max_keepalive_connections=6))
        self.polls = 0
        self.failed: list[str] = []
        self.polling = threading.Event()
        self.in_flight = threading.Lock()   # held by a poll under way

    def poll_forever(self, done: threading.Event) -> None:
        while not done.wait(0.2):
            with self.in_flight:
                if not self.polling.is_set():
                    continue
                try:
                    self.http.get(self.base + "/api/bench/state", params={"viewer": "page"}, timeout=10)
                    self.polls += 1
                except httpx.HTTPError as exc:
                    self.failed.append(repr(exc))

    def stop_polling(self) -> None:
        """No poll from now on (the session ends and closes its console: a later poll is refused)."""
        with self.in_flight:
            self.polling.clear()


def test_busy_live_view_pollers_keep_neither_the_estop_nor_the_pages_polls_out(tmp_path):
    campaign = make_campaign(tmp_path, n=2)
    port = free_port()
    facts: dict = {}
    page = Page(port)
    done = threading.Event()

    def script() -> None:
        attacker = None
        try:
            page.wait("camera_check", lambda s: s.get("all_live"))
            assert page.command("confirm_cameras").status_code == 200
            page.wait("reset")
            page.polling.set()
            attacker = subprocess.Popen([sys.executable, ATTACK, str(port), "--stream", str(POLLERS), "--seconds", "60"],
                                        stdout=subprocess.PIPE, text=True, preexec_fn=lambda: os.nice(10))
            ready, _, _ = select.select([attacker.stdout], [], [], 60)
            assert ready and json.loads(attacker.stdout.readline())["ready"]
            deadline, most = time.monotonic() + 60, 0
            while most < 64 and time.monotonic() < deadline:   # the console is full (once: it closes idle ones)
                most = max(most, _established(port))
                time.sleep(0.05)
            facts["established"] = most
            polls = page.polls
            assert page.command("ready").status_code == 200
            page.wait("rollout", lambda s: (s.get("live") or {}).get("steps", 0) > 30, timeout=90)
            facts["established_in_rollout"] = _established(port)
            facts["polls_before_estop"] = page.polls - polls
            try:   # one POST from a new connection, as a second tab or curl would send it; never retried
                facts["estop"] = httpx.post(f"{page.base}/api/bench/stop/estop", params={"source": "new connection"},
                                            json={}, headers=page.headers(), timeout=30).status_code
            except httpx.HTTPError as exc:
                facts["estop"] = repr(exc)
            page.wait("estop_cause", timeout=30)
            page.stop_polling()   # the flood and the rollout are over: polls were checked throughout them
            assert page.command("estop_cause", cause="operator").status_code == 200
            page.wait("ended", timeout=30)
        except BaseException as exc:
            page.errors.append(exc)
        finally:
            page.stop_polling()
            if attacker is not None:
                attacker.kill()
                attacker.wait(10)
            page.end_session()
            done.set()

    with EmulatedBus(initial_deg=DEFAULT_HOME_POSE) as bus, WaveServer() as server:
        threading.Thread(target=page.poll_forever, args=(done,), daemon=True).start()
        driver = threading.Thread(target=script, daemon=True)
        driver.start()
        out = io.StringIO()
        code = run(_cfg(campaign, bus, server, console_port=port, timer_s=30.0, deadman_s=LOADED_DEADMAN_S), out=out)
        driver.join(120)
        done.set()
        page.http.close()
    print(out.getvalue(), facts)   # in "Captured stdout" when an assertion fails
    # the flood was there: the console held its max_connections before the rollout started
    assert facts.get("established", 0) >= 64, facts
    # the e-stop from a new connection was answered and reached the loop
    assert facts.get("estop") == 200, (facts, page.errors, out.getvalue()[-3000:])
    assert not page.errors, (page.errors, facts, out.getvalue()[-3000:])
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (attempt,) = ledger.attempts_for("E0000-P1")
        estops = [e["payload"] for e in ledger.events(kind="estop")]
    assert attempt.stop_reason == "estop" and attempt.invalid_reason != "console_lost", attempt
    assert [e["source"] for e in estops] == ["console new connection"], estops
    assert code == EXIT_BENCH and "E-STOP" in out.getvalue(), out.getvalue()[-3000:]
    # the page's polls were served throughout: none failed, and they went on under the flood
    assert page.failed == [] and facts["polls_before_estop"] > 0, (page.failed[:5], facts)
