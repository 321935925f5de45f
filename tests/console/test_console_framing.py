"""No other page can frame the console and click through it (issue 34, clickjacking).

Measured on main at b9aa984: no console response carried X-Frame-Options or a CSP, so a page served
from another loopback port showed `/bench` in an invisible frame; two clicks there confirmed the
cameras and pressed "Scene ready" on a live `operator=web` session (the clicks land on the console's
own page, so its requests are same-origin and pass the request guard). Now every response carries
X-Frame-Options: DENY and CSP frame-ancestors 'none' (plus nosniff and no-referrer): Chromium
refuses to render the framed page, its scripts never run, and a click where a button would be
reaches nothing.
"""

from __future__ import annotations

import http.server
import threading
from functools import partial

import httpx
import pytest

from spabench.console.app import ConsoleContext, build_app
from spabench.console.config import ConsoleConfig
from spabench.console.headers import SECURITY_HEADERS
from spabench.console.server import ConsoleServer
from spabench.ledger import Ledger

from .conftest import _phase, free_port, plan_small, start_run, wait_http

EXPECTED = {k.decode(): v.decode() for k, v in SECURITY_HEADERS}
VIEWPORT = {"width": 1366, "height": 768}


def _assert_headers(response: httpx.Response, what: str) -> None:
    got = {k: response.headers.get(k) for k in EXPECTED}
    assert got == EXPECTED, f"{what} (HTTP {response.status_code}): {got}"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


@pytest.fixture
def campaign(tmp_path):
    rows = [{"trial_id": "E0000-P1", "evaluation_id": "E0000", "policy": "p", "card": "c", "alias": "P1",
             "task": "counting", "condition": "id", "scene_id": "counting-id-000", "scene_condition": "id",
             "matched_group": None, "cell": "two|cube", "withheld": False, "instruction": "Put two cubes in the bowl.",
             "instruction_variant": "original", "order": 0, "timer_s": 5.0, "control_hz": 30.0}]
    Ledger.create(tmp_path / Ledger.FILENAME, rows, "h", {"campaign": "frames"}).close()
    return tmp_path


def test_every_kind_of_console_response_forbids_framing(campaign):
    """Pages, static files, the bench and review API, media, refusals (guard, token), 404, 405, 500."""
    token_cfg = ConsoleConfig(port=free_port(), token="lab-secret")
    server = ConsoleServer(build_app(ConsoleContext(campaign_dir=campaign, cfg=token_cfg)), token_cfg).start()
    try:   # the token gate's 401
        refused = httpx.get(f"http://127.0.0.1:{server.port}/bench")
        assert refused.status_code == 401
        _assert_headers(refused, "token gate")
    finally:
        server.stop()
    cfg = ConsoleConfig(port=free_port())
    server = ConsoleServer(build_app(ConsoleContext(campaign_dir=campaign, cfg=cfg)), cfg).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        meta = httpx.get(base + "/api/meta").json()
        own = {"origin": base, "x-spabench-csrf": meta["csrf_token"]}
        answers = {
            "start page": httpx.get(base + "/"), "bench page": httpx.get(base + "/bench"),
            "review list": httpx.get(base + "/review"), "review page": httpx.get(base + "/review/E0000-P1-a1"),
            "static script": httpx.get(base + "/static/bench.js"), "static css": httpx.get(base + "/static/console.css"),
            "static missing": httpx.get(base + "/static/nothing.js"),
            "api meta": httpx.get(base + "/api/meta"), "bench state": httpx.get(base + "/api/bench/state"),
            "bench frame": httpx.get(base + "/api/bench/frame/middle.jpg"),
            "bench stop, no session": httpx.post(base + "/api/bench/stop/estop", json={}, headers=own),
            "attempts": httpx.get(base + "/api/attempts"),
            "unknown attempt": httpx.get(base + "/api/attempts/nope"),
            "media missing": httpx.get(base + "/media/E0000-P1-a1/video/middle.mp4"),
            "guard: other origin": httpx.post(base + "/api/bench/stop/estop", json={},
                                             headers={"origin": "http://127.0.0.1:1"}),
            "guard: other host": httpx.get(base + "/bench", headers={"host": "evil.example"}),
            "no route": httpx.get(base + "/nothing-here"), "wrong method": httpx.post(base + "/api/meta", json={}, headers=own),
            "HEAD page": httpx.head(base + "/bench"),
        }
        (campaign / Ledger.FILENAME).unlink()   # the ledger is gone: the review API fails inside the app
        answers["server error"] = httpx.get(base + "/api/attempts")
        statuses = {what: r.status_code for what, r in answers.items()}
        assert {statuses["bench page"], statuses["api meta"], statuses["static script"]} == {200}
        assert statuses["guard: other origin"] == 403 and statuses["guard: other host"] == 403
        assert statuses["no route"] == 404 and statuses["wrong method"] == 405
        assert statuses["server error"] >= 500, statuses
        for what, response in answers.items():
            _assert_headers(response, what)
    finally:
        server.stop()


FRAMING_PAGE = """<!doctype html><html><body style="margin:0"><p style="position:absolute;z-index:1">win a prize:
click twice</p><iframe id="victim" src="{url}" style="position:absolute;left:0;top:0;width:1366px;height:768px;
border:0;opacity:0.01"></iframe></body></html>"""


class FramingSite:
    """Pages served from another loopback port (another origin), each framing one console page."""

    def __init__(self, tmp_path, console: str):
        self.folder = tmp_path / "framing"
        self.folder.mkdir()
        for name, path in (("bench", "/bench"), ("review", "/review")):
            (self.folder / f"{name}.html").write_text(FRAMING_PAGE.format(url=console + path))
        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", free_port()), partial(http.server.SimpleHTTPRequestHandler, directory=str(self.folder)))
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()


def _framed(browser, site: FramingSite, console: str, name: str):
    """Open the framing page `name` at 1366x768; returns (page, its context, the console requests it made)."""
    ctx = browser.new_context(viewport=VIEWPORT)
    requests: list[str] = []
    ctx.on("request", lambda r: requests.append(r.url) if r.url.startswith(console) else None)
    pg = ctx.new_page()
    pg.goto(f"{site.base}/{name}.html")
    pg.wait_for_load_state("load")   # the frame's load (or its refusal) is part of the page's load
    return pg, ctx, requests


def _frame_shows_console(pg) -> bool:
    frame = pg.frame_locator("#victim")
    return frame.locator("#phase, #list, header h1").count() > 0


def _attempts(campaign) -> int:
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        return sum(len(ledger.attempts_for(t.trial_id)) for t in ledger.trials())


@pytest.mark.slow
@pytest.mark.sim   # a twin session (bench=sim_demo)
def test_a_page_of_another_origin_cannot_frame_and_click_the_bench_or_review(browser, policy_servers, tmp_path):
    campaign = plan_small(tmp_path / "campaign")
    port = free_port()
    console = f"http://127.0.0.1:{port}"
    proc = start_run(campaign, policy_servers, port, tmp_path / "run.log")
    site = None
    own_ctx = browser.new_context(viewport=VIEWPORT)
    contexts = [own_ctx]
    try:
        wait_http(console + "/api/meta", 120, proc)
        site = FramingSite(tmp_path, console)
        own = own_ctx.new_page()   # the operator's own tab: where the buttons are at this viewport
        csp_errors: list[str] = []
        own.on("console", lambda m: csp_errors.append(m.text) if "Content Security Policy" in m.text else None)
        own.goto(console + "/bench")
        _phase(own, "camera_check")
        own.wait_for_function("() => !document.querySelector('#confirm-cameras').disabled", timeout=30_000)
        box = own.locator("#confirm-cameras").bounding_box()
        assert box is not None
        # the framing page: its frame stays empty, a click where "Confirm cameras" is reaches nothing
        pg, ctx, requests = _framed(browser, site, console, "bench")
        contexts.append(ctx)
        assert not _frame_shows_console(pg), "the console's bench page rendered inside another origin's frame"
        pg.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        pg.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        assert [u for u in requests if u != console + "/bench"] == [], requests   # no script of it ever ran
        assert httpx.get(console + "/api/bench/state").json()["phase"] == "camera_check"
        # past the camera check (on the operator's own page), "Scene ready" cannot be clicked either
        own.click("#confirm-cameras")
        _phase(own, "reset")
        own.wait_for_function("() => !document.querySelector('#ready').disabled && "
                              "document.querySelector('#ready').offsetParent !== null", timeout=30_000)
        box = own.locator("#ready").bounding_box()
        assert box is not None
        pg.reload()
        pg.wait_for_load_state("load")
        assert not _frame_shows_console(pg)
        pg.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        pg.keyboard.press("Enter")
        assert [u for u in requests if u != console + "/bench"] == [], requests
        state = httpx.get(console + "/api/bench/state").json()
        assert state["phase"] == "reset", state["phase"]
        assert _attempts(campaign) == 0
        # the review pages cannot be framed either (their scripts would list and score attempts)
        pg, ctx, requests = _framed(browser, site, console, "review")
        contexts.append(ctx)
        assert not _frame_shows_console(pg), "the console's review page rendered inside another origin's frame"
        pg.mouse.click(VIEWPORT["width"] / 2, 200)
        assert [u for u in requests if u != console + "/review"] == [], requests
        # the operator's own pages work under the policy: no CSP refusals, the start page fills in
        own.goto(console + "/review")
        own.wait_for_load_state("networkidle")
        own.goto(console + "/")
        own.wait_for_function("() => document.querySelector('#campaign').textContent !== ''", timeout=10_000)
        assert csp_errors == [], csp_errors
        assert _attempts(campaign) == 0 and proc.poll() is None
    except BaseException:   # what the session said, for a failure on a loaded machine
        print((tmp_path / "run.log").read_text()[-6000:])
        raise
    finally:
        for c in contexts:
            c.close()
        if site is not None:
            site.close()
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
