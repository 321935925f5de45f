"""Issue 17: the documented Python API (spabench.api), and the multiprocessing guard it explains.

Measured on main before: a script calling the run entry point without `if __name__ == "__main__":`
lost every attempt after a 300 s wait with a message blaming the disk."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spabench import api
from spabench.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "tests" / "analysis" / "data" / "example_outcomes.csv"


@pytest.mark.slow
def test_plan_report_and_power_from_python(tmp_path):
    assert api.plan(campaign="smoke", out=tmp_path / "c") == 0
    assert (tmp_path / "c" / "plan.csv").is_file()
    assert api.report(outcomes=CSV, out=tmp_path / "r", bootstrap=200,
                      **{"display_names.policy_a": "Policy (A), the lab's"}) == 0
    assert "Policy (A), the lab's" in (tmp_path / "r" / "report.md").read_text()
    assert api.call("power", half_width=0.1) == 0
    with pytest.raises(ConfigError, match="spabench report: key 'crf' is not read"):
        api.report(outcomes=CSV, out=tmp_path / "r2", crf=10)


def _script(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    path = tmp_path / "lab_script.py"
    path.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    return subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def test_run_without_the_main_guard_is_one_clear_error(tmp_path):
    proc = _script(tmp_path, """
        from spabench import api
        api.plan(campaign="smoke", out="c")
        api.run(campaign="c", max_trials=1)
        """)
    assert proc.returncode != 0
    assert api.MAIN_GUARD_MESSAGE in proc.stderr
    assert "videos were not finished" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_run_under_the_main_guard_is_not_refused(tmp_path):
    proc = _script(tmp_path, """
        from spabench import api
        from spabench.errors import SpabenchError

        if __name__ == "__main__":
            api.plan(campaign="smoke", out="c")
            try:
                api.run(campaign="c", max_trials=1, bench="sim", ledger="sqlite", **{"cards.P1.port": 1})
            except SpabenchError as exc:
                print("refused:", exc)
        """)
    assert api.MAIN_GUARD_MESSAGE not in proc.stdout + proc.stderr, proc.stderr
    assert "refused:" not in proc.stdout, proc.stdout   # it ran (and could not reach port 1: an exit code)
