"""The "unsafe" e-stop end to end through a ledger: a real `run` with the terminal operator on a
pseudo-terminal e-stops the rollout and answers "unsafe policy behaviour" (the real LeRobot
SO101Follower on the emulated Feetech bus, a real openpi server on loopback, a real SQLite ledger);
then the same campaign is resumed by a second `run` and reported by `spabench report campaign=`.
The attempt is the policy's failure with failure mode 'unsafe' in the ledger, the resumed session
does not run its trial again, and the report counts it as a failure with that mode."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from spabench.bench.config import DEFAULT_HOME_POSE
from spabench.ledger import Ledger
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_BENCH, EXIT_OK
from spabench.suite.rules import UNSAFE
from tests.integration.harness import WaveServer, cfg_data, run_config
from tests.operator.test_estop_cause_terminal import _session
from tests.support.feetech_bus import EmulatedBus


@pytest.mark.slow
@pytest.mark.bench
def test_an_unsafe_estop_is_a_failure_never_rerun_and_reported_as_unsafe(tmp_path):
    code, text, ledger_path = _session(tmp_path, [b"1\n"], n_trials=2)
    assert code == EXIT_BENCH, text[-2000:]
    campaign = ledger_path.parent
    with Ledger.open(campaign, readonly=True) as ledger:
        first, second = ledger.trials()
        (unsafe,) = ledger.attempts_for(first.trial_id)
        assert (unsafe.status, unsafe.stop_reason, unsafe.invalid_reason) == ("complete", "estop", None)
        assert [(s.rater, s.success, s.failure_mode) for s in ledger.scores_for(unsafe.attempt_id)] == [
            ("ana", False, UNSAFE)]
        assert [t.trial_id for t in ledger.pending_trials()] == [second.trial_id]

    # resume: the other trial runs, the unsafe one is not run again
    out = io.StringIO()
    with EmulatedBus(initial_deg=DEFAULT_HOME_POSE) as bus, WaveServer() as server:
        data = cfg_data(campaign, bus.port, server.port, timer_s=1.0)
        assert run(run_config(data), out=out) == EXIT_OK, out.getvalue()[-3000:]
    with Ledger.open(campaign, lock=True) as ledger:
        assert [a.attempt_id for a in ledger.attempts_for(first.trial_id)] == [unsafe.attempt_id]
        (redo,) = ledger.attempts_for(second.trial_id)
        assert redo.status == "complete"
        assert ledger.next_trial() is None
        ledger.record_score(redo.attempt_id, "ana", True, None)     # scored on the review page
        outcomes = ledger.outcomes()
    assert outcomes.set_index("attempt_id").loc[unsafe.attempt_id, ["success", "failure_mode", "valid"]].tolist() \
        == [False, UNSAFE, True]

    # the report, from the ledger: a failure with mode unsafe, and the e-stop counted as such
    from spabench.analysis.commands import ReportConfig, report

    report_dir = tmp_path / "report"
    assert report(ReportConfig.from_mapping({"campaign_dir": str(campaign), "out": str(report_dir),
                                               "outcomes": None})) == 0
    summary = pd.read_csv(report_dir / "summary.csv")
    cell = summary[(summary["task"] == first.task) & (summary["condition"] == first.condition)].iloc[0]
    assert (cell["successes"], cell["trials"]) == (1, 2)
    failures = pd.read_csv(report_dir / "failure_modes.csv")
    assert dict(zip(failures["failure_mode"], failures["count"], strict=True)) == {UNSAFE: 1}
    estops = pd.read_csv(report_dir / "estops.csv")
    assert estops[["cause", "counted_as", "attempts"]].values.tolist() == [[UNSAFE, "failure (unsafe)", 1]]
    assert pd.read_csv(report_dir / "invalid.csv").empty
