"""Another page in the same browser cannot drive the bench or the ledger; the console's own page can.

Measured on main (issue 22): a page served from another loopback port, and a local `file://` page,
confirmed the camera check and pressed "scene ready" on a live `operator=web` session (the arm ran a
full rollout with nobody at the console) and forged the score; offline a cross-origin rescore turned
1/1 into 0/1. Here Debian's Chromium holds the console's bench page and, in other tabs, a page from
another loopback port and a `file://` page. Those send what a browser lets any page send without
asking the server first (`no-cors` fetches with `text/plain` bodies, `text/plain` form posts) at
every step of a real twin session: confirm, start, stop, abort, e-stop, score, rescore.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from functools import partial

import httpx
import pytest

from spabench.ledger import Ledger

from .conftest import (
    RATER,
    _phase,
    _steps_at_least,
    answer_estop_cause,
    free_port,
    plan_small,
    start_run,
    wait_http,
)

pytestmark = [pytest.mark.sim, pytest.mark.slow]

ATTACK_PAGE = """<!doctype html><html><body><p>cute cats</p><script>
// Everything here is a "simple" request: the browser sends it without a preflight.
window.attack = async (url, body) => {
  try { await fetch(url, {method: "POST", mode: "no-cors", credentials: "include",
                          headers: {"content-type": "text/plain"}, body: JSON.stringify(body)}); }
  catch (e) { return "failed: " + e; }
  return "sent";
};
window.formPost = (url, body) => {   // the classic: a text/plain form whose field spells out JSON
  const f = document.createElement("form");
  f.method = "POST"; f.action = url; f.enctype = "text/plain"; f.target = "sink";
  const json = JSON.stringify(body);
  const i = document.createElement("input");
  i.name = json.slice(0, -1) + ', "x": "'; i.value = '"}';
  f.append(i); document.body.append(f); f.submit();
};
</script><iframe name="sink"></iframe></body></html>"""


class Attacker:
    """The attacking pages: one served from another loopback port, one opened from a file."""

    def __init__(self, browser, tmp_path, console: str):
        folder = tmp_path / "attacker"
        folder.mkdir()
        (folder / "index.html").write_text(ATTACK_PAGE)
        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", free_port()), partial(http.server.SimpleHTTPRequestHandler, directory=str(folder)))
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.console = console
        self.ctx = browser.new_context()
        self.statuses: list[tuple[str, int]] = []   # what the console answered the attacking pages
        self.pages = []
        for url in (f"http://127.0.0.1:{self.httpd.server_address[1]}/index.html", (folder / "index.html").as_uri()):
            pg = self.ctx.new_page()
            pg.on("response", lambda r: self.statuses.append((r.url, r.status)) if r.url.startswith(console) else None)
            pg.goto(url)
            self.pages.append(pg)

    def send(self, path: str, body: dict) -> int:
        """Send `body` to `path` from both pages, both ways; returns how many requests were answered."""
        before = len(self.statuses)
        for pg in self.pages:
            assert pg.evaluate("([u, b]) => window.attack(u, b)", [self.console + path, body]) == "sent"
            pg.evaluate("([u, b]) => window.formPost(u, b)", [self.console + path, body])
        deadline = time.monotonic() + 10
        while len(self.statuses) < before + 4 and time.monotonic() < deadline:
            for pg in self.pages:
                pg.wait_for_timeout(50)
        return len(self.statuses) - before

    def close(self):
        self.ctx.close()
        self.httpd.shutdown()


def _state(base: str) -> dict:
    return httpx.get(base + "/api/bench/state", timeout=5).json()


def _stays(base: str, phase: str, seconds: float = 1.5) -> None:
    """The session is still in `phase` a while after the attack (nothing answered it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert _state(base)["phase"] == phase
        time.sleep(0.1)


def _scores(campaign) -> list:
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        return [(a.attempt_id, a.status, [(s.rater, s.success, s.reason) for s in ledger.score_history(a.attempt_id)])
                for t in ledger.trials() for a in ledger.attempts_for(t.trial_id)]


def test_other_pages_cannot_drive_the_session_or_the_ledger(browser, page, policy_servers, tmp_path):
    campaign = plan_small(tmp_path / "campaign")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_run(campaign, policy_servers, port, tmp_path / "run.log")
    attacker = None
    try:
        wait_http(base + "/api/meta", 120, proc)
        attacker = Attacker(browser, tmp_path, base)
        page.goto(base + "/bench")
        _phase(page, "camera_check")
        page.wait_for_function("() => !document.querySelector('#confirm-cameras').disabled", timeout=30_000)
        # confirm the camera check
        assert attacker.send("/api/bench/command", {"command": "confirm_cameras", "payload": {}}) == 4
        _stays(base, "camera_check")
        page.click("#confirm-cameras")
        _phase(page, "reset")
        # start the rollout ("scene ready")
        version = _state(base)["version"]
        assert attacker.send("/api/bench/command", {"command": "ready", "payload": {}, "version": version}) == 4
        _stays(base, "reset")
        page.click("#ready")
        _phase(page, "rollout")
        _steps_at_least(page, 5)  # the loop is running
        # stop, abort, e-stop the rollout
        for kind in ("operator_stop", "abort", "estop"):
            assert attacker.send(f"/api/bench/stop/{kind}?source=attacker", {}) == 4
        steps = _state(base)["live"]["steps"]
        deadline = time.monotonic() + 30
        while _state(base)["live"]["steps"] <= steps + 5 and time.monotonic() < deadline:  # the rollout goes on
            assert _state(base)["phase"] == "rollout"
            time.sleep(0.1)
        assert _state(base)["live"]["steps"] > steps + 5
        page.click("#stop")
        _phase(page, "score")
        # score the attempt on the bench page
        forged = {"success": True, "failure_mode": None, "note": "forged"}
        assert attacker.send("/api/bench/command", {"command": "score", "payload": forged}) == 4
        _stays(base, "score")
        page.check("input[name=success][value=no]")
        page.check("input[name=failure_mode][value=timeout_or_incomplete]")
        page.click("#submit-score")
        _phase(page, "reset")
        ledger_before = _scores(campaign)
        ((attempt_id, status, history), *_) = ledger_before
        assert status == "complete" and [h[:2] for h in history] == [(RATER, False)]
        # score (a new rater) and rescore (the operator, with a reason) from the review API
        for body in ({"rater": "mallory", "success": True, "note": "forged"},
                     {"rater": RATER, "success": True, "note": "forged", "reason": "forged"}):
            assert attacker.send(f"/api/attempts/{attempt_id}/score", body) == 4
        assert _scores(campaign) == ledger_before
        # every answer the console gave the attacking pages was a refusal
        assert attacker.statuses and {status for _, status in attacker.statuses} == {403}, attacker.statuses
        # the console's own page still works, and its e-stop ends the session
        page.click("#estop")
        answer_estop_cause(page, "operator")
        _phase(page, "ended", 30_000)
        proc.wait(60)
    finally:
        if attacker is not None:
            attacker.close()
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
    log = (tmp_path / "run.log").read_text()
    assert proc.returncode != 0 and "E-STOP" in log, log[-2000:]
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        (event,) = [e["payload"] for e in ledger.events(kind="estop")]
    assert event["source"] == "console button"
    assert json.dumps(_scores(campaign)) == json.dumps(ledger_before)  # nothing forged, nothing lost
