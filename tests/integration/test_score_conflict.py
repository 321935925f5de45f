"""A review tab scores the attempt the live session is asking about (issue 18, optimistic scores).
Measured after the review page's 409: the session's own save carried no version and raised
"already scored", ending a web session with an error. Now the session's save is checked against the
version its prompt was asked under: the review tab's score is kept, the session says so, goes on, and
the ledger records the refused score as an event. Real stack: LeRobot on the emulated bus, an openpi
server, the console driven over HTTP as the pages do it."""

from __future__ import annotations

import io

import httpx

from spabench.ledger import Ledger
from spabench.rollout.commands import run
from spabench.rollout.exits import EXIT_OK
from tests.console.conftest import free_port
from tests.integration.harness import WaveServer, make_campaign
from tests.integration.test_estop import Console, _cfg
from tests.support.campaigns import LOADED_DEADMAN_S
from tests.support.feetech_bus import EmulatedBus


def test_a_review_tab_scoring_first_keeps_its_score_and_the_session_goes_on(tmp_path):
    campaign = make_campaign(tmp_path, n=1)
    port = free_port()
    seen: dict = {}

    def script(c: Console):
        c.wait("camera_check", lambda s: s.get("all_live"))
        assert c.command("confirm_cameras", rater="Ada").status_code == 200
        c.wait("reset")
        assert c.command("ready").status_code == 200
        seen["score"] = c.wait("score", timeout=60)
        # a second tab (the review page) scores the same attempt under the same name first
        attempt = httpx.get(c.base + "/api/attempts/E0000-P1-a1", params={"rater": "Ada"}, timeout=5).json()
        r = httpx.post(c.base + "/api/attempts/E0000-P1-a1/score", headers=c.headers(), timeout=5,
                       json={"rater": "Ada", "success": False, "failure_mode": "grasp_failure",
                             "note": "from the review tab", "version": attempt["version"]})
        seen["review"] = (r.status_code, r.text)
        assert c.command("score", success=True, failure_mode=None, note="from the bench page").status_code == 200

    out = io.StringIO()
    with EmulatedBus() as bus, WaveServer() as server:
        console = Console(port)
        driver = console.play(script)
        code = run(_cfg(campaign, bus, server, console_port=port, timer_s=1.0, deadman_s=LOADED_DEADMAN_S), out=out)
        driver.join(60)
    assert not console.errors, (console.errors, out.getvalue())
    assert seen["review"][0] == 200, seen["review"]
    assert code == EXIT_OK, out.getvalue()
    assert "scored meanwhile by Ada" in out.getvalue(), out.getvalue()
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (attempt,) = ledger.attempts_for("E0000-P1")
        (score,) = ledger.scores_for(attempt.attempt_id)
        assert (score.rater, score.success, score.note) == ("Ada", False, "from the review tab"), score
        (event,) = ledger.events(attempt.attempt_id, kind="score_conflict")
        assert event["payload"]["refused"]["note"] == "from the bench page", event
