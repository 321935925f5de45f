"""At an e-stop the terminal operator says why (issue 19): a real `run` with the terminal operator on
a pseudo-terminal (cbreak keys during the rollout, line prompts after it), the real LeRobot
SO101Follower on the emulated Feetech bus, a real openpi server on loopback, a real SQLite ledger.
The key 'e' e-stops the rollout; the answer to the cause prompt decides what the attempt is."""

from __future__ import annotations

import io
import os
import pty
import threading
import time

import pytest

from spabench.bench.config import DEFAULT_HOME_POSE
from spabench.ledger import Ledger
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_BENCH
from spabench.suite.rules import UNSAFE
from tests.integration.harness import WaveServer, cfg_data, make_campaign, run_config
from tests.support.feetech_bus import EmulatedBus


def _wait(condition, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _attempt_started(campaign) -> bool:
    with Ledger.open(campaign, readonly=True) as ledger:
        return bool(ledger.events(kind="attempt_started"))


def _prompts(text: str) -> int:
    return text.count("Cause [1-3] ") + text.count("What happened? ")


def _session(tmp_path, answers: list[bytes], n_trials: int = 1):
    """Run one trial with the terminal operator on a pty: Enter at the ready gate, 'e' once the policy
    moves the arm, then each of `answers` once the prompt before it is shown. Returns (exit code,
    terminal output, ledger path)."""
    campaign = make_campaign(tmp_path, n_trials)
    master, slave = pty.openpty()
    stdin = os.fdopen(slave, "r")
    out = io.StringIO()
    errors: list[BaseException] = []

    def operator(bus):
        try:
            _wait(lambda: "Scene ready?" in out.getvalue(), "the ready gate")
            os.write(master, b"\n")
            _wait(lambda: _attempt_started(campaign), "the attempt")
            moving = len(bus.goal_writes())
            _wait(lambda: len(bus.goal_writes()) > moving + 5, "the policy moving the arm")  # keys are read now
            os.write(master, b"e")
            for given, answer in enumerate(answers):   # each answer once a new prompt is shown
                _wait(lambda n=given: _prompts(out.getvalue()) > n, f"prompt {given + 1}")
                os.write(master, answer)
        except BaseException as exc:
            errors.append(exc)

    with EmulatedBus(initial_deg=DEFAULT_HOME_POSE) as bus, WaveServer() as server:
        data = cfg_data(campaign, bus.port, server.port, timer_s=20.0,
                        operator={"type": "terminal", "keys": True, "rater": "ana"})
        driver = threading.Thread(target=operator, args=(bus,), daemon=True)
        driver.start()
        try:
            code = run(run_config(data), out=out, stdin=stdin)
        finally:
            driver.join(5)
            stdin.close()
            os.close(master)
    assert not errors, (errors, out.getvalue()[-2000:])
    return code, out.getvalue(), campaign / "ledger.sqlite"


@pytest.mark.slow
@pytest.mark.bench
def test_unsafe_policy_behaviour_makes_the_estopped_attempt_a_failure(tmp_path):
    code, text, ledger_path = _session(tmp_path, [b"1\n"])
    assert code == EXIT_BENCH, text[-2000:]
    assert "1) unsafe policy behaviour - the policy's failure, not run again" in text
    assert "2) operator (a mistake, the scene disturbed) - invalid, run again" in text
    assert "FAILURE (unsafe: e-stopped for unsafe policy behaviour)" in text
    assert "scored as the policy's failure (failure mode unsafe); its trial is not run again" in text
    with Ledger.open(ledger_path, readonly=True) as ledger:
        (attempt,) = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
        assert (attempt.status, attempt.stop_reason, attempt.invalid_reason) == ("complete", "estop", None)
        (score,) = ledger.scores_for(attempt.attempt_id)
        assert (score.rater, score.success, score.failure_mode) == ("ana", False, UNSAFE)
        (event,) = ledger.events(kind="estop")
        assert (event["payload"]["cause"], event["payload"]["during"]) == (UNSAFE, "rollout")
        assert event["attempt_id"] == attempt.attempt_id
        assert ledger.next_trial() is None                  # not run again
        assert ledger.outcomes()["failure_mode"].tolist() == [UNSAFE]


@pytest.mark.slow
@pytest.mark.bench
def test_other_needs_words_and_leaves_the_attempt_invalid(tmp_path):
    code, text, ledger_path = _session(tmp_path, [b"4\n", b"3\n", b"\n", b"the lamp fell on the table\n"])
    assert code == EXIT_BENCH, text[-2000:]
    assert "Enter a number from 1 to 3." in text             # 4 is no cause
    assert text.count("What happened? ") == 2                # an empty answer is asked again
    assert "e-stop (other (say what): the lamp fell on the table): invalid, its trial is run again" in text
    with Ledger.open(ledger_path, readonly=True) as ledger:
        (attempt,) = [a for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]
        assert (attempt.status, attempt.invalid_reason) == ("invalid", "estop: other: the lamp fell on the table")
        assert ledger.scores_for(attempt.attempt_id) == []
        (event,) = ledger.events(kind="estop")
        assert (event["payload"]["cause"], event["payload"]["cause_text"]) == ("other", "the lamp fell on the table")
        assert ledger.next_trial() is not None              # run again
