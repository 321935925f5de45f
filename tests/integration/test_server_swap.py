"""A policy server that changes its checkpoint without a restart is caught between trials (issue 34).

Real parts: spabench's openpi websocket server on loopback (the one `spabench serve lerobot` runs,
advertising its `checkpoint_digest`), which swaps the checkpoint it advertises in-process when the
second trial's episode starts; the LeRobot SO101Follower on the emulated Feetech bus; the SQLite
ledger; HDF5/MP4 episodes."""

from __future__ import annotations

import io

import pytest

from spabench.ledger import Ledger
from spabench.policy.servers import CHANGED, PINNED, pinned_identities
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_CONFIG
from spabench.serve.openpi_server import OpenPiServer
from tests.integration.harness import HORIZON, WaveServer, make_campaign, make_cfg
from tests.support.feetech_bus import EmulatedBus

pytestmark = pytest.mark.slow

DIGEST_A, DIGEST_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


class SwappingServer(WaveServer):
    """The wave policy, advertising checkpoint A; at its `swap_at`-th episode reset it reloads
    checkpoint B in the same process (same port, no restart): new connections get B's metadata."""

    def __init__(self, swap_at: int) -> None:
        super().__init__()
        self.swap_at = swap_at
        self.server = OpenPiServer(self.infer, {"policy": "wave", "horizon": HORIZON, "checkpoint_digest": DIGEST_A},
                                   port=0, reset_fn=self.reset)

    def reset(self) -> None:
        if self.server.resets + 1 == self.swap_at:   # counted after reset_fn returns
            self.server.metadata["checkpoint_digest"] = DIGEST_B


def _attempts(campaign) -> dict[str, list[tuple[str, str | None]]]:
    ledger = Ledger.open(campaign, readonly=True)
    try:
        return {t.trial_id: [(a.status, a.invalid_reason) for a in ledger.attempts_for(t.trial_id)]
                for t in ledger.trials()}
    finally:
        ledger.close()


def _events(campaign, kind: str) -> list[dict]:
    ledger = Ledger.open(campaign, readonly=True)
    try:
        return [e["payload"] for e in ledger.events(kind=kind)]
    finally:
        ledger.close()


def test_a_checkpoint_swapped_between_trials_stops_the_session_and_counts_nothing_from_it(tmp_path):
    campaign = make_campaign(tmp_path, n=3)
    with EmulatedBus() as bus, SwappingServer(swap_at=2) as server:
        out = io.StringIO()
        code = run(make_cfg(campaign, bus.port, server.port, timer_s=0.6), out=out)
        text = out.getvalue()
        assert server.server.resets == 2, text
    assert code == EXIT_CONFIG, text
    # the first trial ran on checkpoint A and counts; the one the swap touched does not; no third
    assert _attempts(campaign) == {"E0000-P1": [("complete", None)], "E0001-P1": [("invalid", "server_changed")],
                                   "E0002-P1": []}, text
    (changed,) = _events(campaign, CHANGED)
    assert changed["card"] == "itest" and "E0001-P1-a1" in changed["when"]
    assert changed["pinned"]["checkpoint_digest"] == DIGEST_A and changed["identity"]["checkpoint_digest"] == DIGEST_B
    (pinned,) = _events(campaign, PINNED)                  # the pin is not moved by the swap
    ledger = Ledger.open(campaign, readonly=True)
    try:
        assert pinned_identities(ledger)["itest"].checkpoint_digest == DIGEST_A
    finally:
        ledger.close()
    assert text.count("error:") == 1, text
    assert ("error: the policy server of policy P1 changed its checkpoint during the session (during attempt "
            "E0001-P1-a1), without a restart") in text, text
    assert DIGEST_A[:19] in text and DIGEST_B[:19] in text
    assert "itest" not in text                               # blind campaign: the alias only

    # resuming against the swapped server is refused at pre-flight, before anything moves
    with EmulatedBus() as bus, SwappingServer(swap_at=0) as server:
        server.server.metadata["checkpoint_digest"] = DIGEST_B
        out = io.StringIO()
        assert run(make_cfg(campaign, bus.port, server.port, timer_s=0.6), out=out) == EXIT_CONFIG
        assert bus.goal_writes() == [] and server.calls == 0
    assert "is not the one this campaign pinned" in out.getvalue()
    assert _attempts(campaign)["E0002-P1"] == []


def test_a_checkpoint_swapped_while_the_operator_places_the_next_scene_stops_before_that_attempt(tmp_path):
    """The swap comes while the terminal operator stands at trial 2's scene gate (stdin a pipe the test
    types into): the check after homing finds it, and trial 2 never begins."""
    import os
    import threading
    import time

    campaign = make_campaign(tmp_path, n=2)
    read_fd, write_fd = os.pipe()
    person = os.fdopen(write_fd, "w")
    out = io.StringIO()
    done: dict[str, int] = {}
    with EmulatedBus() as bus, SwappingServer(swap_at=0) as server, os.fdopen(read_fd) as stdin:
        cfg = make_cfg(campaign, bus.port, server.port, timer_s=0.6,
                       operator={"type": "terminal", "keys": False, "status_line": False, "rater": "Ada"})
        session = threading.Thread(target=lambda: done.update(code=run(cfg, out=out, stdin=stdin)), daemon=True)
        session.start()
        try:
            person.write("\ny\n\n")          # trial 1: ready, success, no note
            person.flush()
            deadline = time.monotonic() + 120
            while out.getvalue().count("Scene ready?") < 2:   # the session waits at trial 2's gate
                assert session.is_alive() and time.monotonic() < deadline, out.getvalue()
                time.sleep(0.05)
            server.server.metadata["checkpoint_digest"] = DIGEST_B   # reloaded in place, no restart
            person.write("\n")               # trial 2: ready
            person.flush()
            session.join(120)
        finally:
            person.close()
            session.join(60)
    text = out.getvalue()
    assert done.get("code") == EXIT_CONFIG, text
    assert _attempts(campaign) == {"E0000-P1": [("complete", None)], "E0001-P1": []}, text
    (changed,) = _events(campaign, CHANGED)
    assert changed["when"] == "before trial E0001-P1" and changed["identity"]["checkpoint_digest"] == DIGEST_B
    assert "error: the policy server of policy P1 changed its checkpoint during the session (before trial " \
           "E0001-P1)" in text, text
    assert server.server.resets == 1 and "itest" not in text
