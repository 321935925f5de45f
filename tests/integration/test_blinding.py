"""Blinding: with aliases on, nothing the operator sees names the policy or its card.

A small campaign on the emulated arm with the terminal operator (stdin fed): checklist, ready gate,
score prompt, progress lines, a server fault and the session's stop message, plus every log line.
Measured on main: fault lines printed "policy 'act_local'" next to the alias."""

from __future__ import annotations

import dataclasses
import io
import logging
import shutil

from spabench.ledger import Ledger
from spabench.operator.blinding import Blinder
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_SERVER_DOWN
from tests.integration.harness import ROBOT_ID, WaveServer, make_cfg, trial_rows, when
from tests.support.feetech_bus import DEFAULT_CALIBRATION_FILE, EmulatedBus

CARD = "act_local"


def _blind_campaign(tmp_path):
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    rows = [dataclasses.replace(r, trial_id=f"{r.evaluation_id}-P2", alias="P2")
            for r in trial_rows(2, card=CARD)]
    Ledger.create(campaign / "ledger.sqlite", rows, "blind-hash", {"campaign": "blinding"}).close()
    (tmp_path / "calibration").mkdir()
    shutil.copy(DEFAULT_CALIBRATION_FILE, tmp_path / "calibration" / f"{ROBOT_ID}.json")
    return campaign


def test_nothing_the_operator_sees_names_the_policy(tmp_path, caplog):
    campaign = _blind_campaign(tmp_path)
    caplog.set_level(logging.INFO)
    # ready, success, no note (trial 1); ready (trial 2, whose server dies mid-rollout)
    stdin = io.StringIO("\ny\n\n\n")
    with EmulatedBus() as bus, WaveServer() as server:
        # the server dies once it answered a request of trial 2's rollout (after its reset), not 0.3 s
        # after the reset, which a loaded machine could stretch past trial 2's 1 s timer
        calls_at_reset: list[int] = []

        def answered_in_trial_2() -> bool:
            if server.server.resets < 2:
                return False
            if not calls_at_reset:
                calls_at_reset.append(server.calls)
            return server.calls > calls_at_reset[0]

        when(answered_in_trial_2, server.server.stop)
        cfg = make_cfg(campaign, bus.port, server.port, timer_s=1.0,
                       operator={"type": "terminal", "keys": False, "status_line": False, "rater": "Ada"},
                       policy={"name": CARD})
        out = io.StringIO()
        code = run(cfg, out=out, stdin=stdin)
    printed = out.getvalue() + caplog.text
    assert code == EXIT_SERVER_DOWN, printed
    # everything the operator was shown happened, under the alias only
    assert "(alias P2, order 0)" in printed and "Success? [y/n" in printed
    assert "INVALID (server_lost" in printed and "policy server of P2" in printed
    assert "policy 'P2'" in printed  # the client's fault text, redacted where it named the card
    assert Blinder({CARD: "P2"}, ["openpi", "act"]).redact(
        "openpi server of act_local; exact act") == "policy server of P2; exact policy"
    assert CARD not in printed
    assert "openpi" not in out.getvalue()  # the wire protocol tells the family: "policy server" instead
    ledger = Ledger.open(campaign / "ledger.sqlite")
    assert {t.policy for t in ledger.trials()} == {CARD}  # the analyst's records keep the name
    ledger.close()
