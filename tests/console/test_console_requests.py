"""Only the console's own pages change anything, and nothing a client sends can hold the server.

Measured on main before (issue 22): a `text/plain` POST from another origin rescored an attempt
(200, the report's 1/1 became 0/1); any Host header was answered; a 200 MB score note was stored;
an idle connection stayed open forever. A real console server on loopback, the real ledger, raw
sockets where a browser would not behave badly enough.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import time

import httpx
import pytest

from spabench.console.app import ConsoleContext, build_app
from spabench.console.config import ConsoleConfig
from spabench.console.server import ConsoleServer
from spabench.ledger import Ledger

from .conftest import free_port

ROW = {"trial_id": "E0000-P1", "evaluation_id": "E0000", "policy": "secret_policy", "card": "secret_card",
       "alias": "P1", "task": "counting", "condition": "id", "scene_id": "counting-id-000", "scene_condition": "id",
       "matched_group": None, "cell": "two|cube", "withheld": False, "instruction": "Put two cubes in the bowl.",
       "instruction_variant": "original", "order": 0, "timer_s": 5.0, "control_hz": 30.0}


@pytest.fixture
def campaign(tmp_path):
    """One complete attempt, scored a success by `operator`."""
    with Ledger.create(tmp_path / Ledger.FILENAME, [ROW], "h", {"campaign": "req"}) as ledger:
        a = ledger.begin_attempt("E0000-P1")
        ledger.finish_attempt(a, "complete", "timer")
        ledger.record_score(a, "Ada", True, None, "clean")
    return tmp_path


def _history(campaign) -> list:
    with Ledger.open(campaign / Ledger.FILENAME, readonly=True) as ledger:
        return [(s.rater, s.success, s.note, s.reason) for s in ledger.score_history("E0000-P1-a1")]


@pytest.fixture
def console(campaign):
    cfg = ConsoleConfig(port=free_port(), idle_timeout_s=1.0, request_timeout_s=2.0, max_connections=8,
                        max_body_bytes=64 * 1024, max_note_chars=500, max_stream_clients=2)
    server = ConsoleServer(build_app(ConsoleContext(campaign_dir=campaign, cfg=cfg)), cfg).start()
    yield server, f"http://127.0.0.1:{server.port}"
    server.stop()


RESCORE = ('{"rater": "Ada", "success": false, "failure_mode": null, "note": "forged", "reason": "forged", '
           '"version": 1}')  # the operator's one score so far


def test_only_the_consoles_own_origin_with_its_token_rescores(console, campaign):
    server, base = console
    before = _history(campaign)
    url = base + "/api/attempts/E0000-P1-a1/score"
    other = f"http://127.0.0.1:{free_port()}"
    csrf = httpx.get(base + "/api/meta").json()["csrf_token"]
    assert csrf and csrf in httpx.get(base + "/review").text  # the page carries it for its scripts
    refused = {
        "another port, text/plain": ({"origin": other, "content-type": "text/plain"}, 403),
        "another port, with the token": ({"origin": other, "content-type": "application/json",
                                          "x-spabench-csrf": csrf}, 403),
        "file:// page (Origin null)": ({"origin": "null", "content-type": "text/plain"}, 403),
        "no Origin, foreign Referer": ({"referer": other + "/x.html", "content-type": "application/json",
                                        "x-spabench-csrf": csrf}, 403),
        "same site, another port": ({"origin": base, "sec-fetch-site": "same-site", "x-spabench-csrf": csrf,
                                     "content-type": "application/json"}, 403),
        "own origin, no token": ({"origin": base, "content-type": "application/json"}, 403),
        "own origin, wrong token": ({"origin": base, "content-type": "application/json",
                                     "x-spabench-csrf": csrf[:-1] + "x"}, 403),
        "own origin and token, text/plain": ({"origin": base, "content-type": "text/plain",
                                              "x-spabench-csrf": csrf}, 415),
    }
    for what, (headers, status) in refused.items():
        reply = httpx.post(url, content=RESCORE, headers=headers)
        assert reply.status_code == status, (what, reply.text)
        assert "error" in reply.json(), what
    assert _history(campaign) == before  # nothing reached the ledger
    # the e-stop obeys the same rule (and says why it is refused)
    assert httpx.post(base + "/api/bench/stop/estop", headers={"origin": other}).status_code == 403
    ok = httpx.post(url, content=RESCORE, headers={"origin": base, "content-type": "application/json",
                                                   "x-spabench-csrf": csrf})
    assert ok.status_code == 200, ok.text
    assert _history(campaign)[-1][1:] == (False, "forged", "forged") and len(_history(campaign)) == len(before) + 1
    # a script (no Origin, no Referer) with the token from /api/meta is the operator's own tool
    assert httpx.post(base + "/api/bench/stop/estop", headers={"x-spabench-csrf": csrf}, json={}).status_code == 409


def test_host_names_other_than_the_consoles_are_refused(console):
    server, base = console
    assert httpx.get(base + "/api/meta", headers={"host": "attacker.example"}).status_code == 403
    assert httpx.get(base + "/", headers={"host": f"rebind.attacker.example:{server.port}"}).status_code == 403
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "127.0.0.1"):
        assert httpx.get(base + "/api/meta", headers={"host": host}).status_code == 200, host
    cfg = ConsoleConfig(port=0, allowed_hosts=["Bench1.lab"])
    from spabench.console.guard import RequestGuard

    guard = RequestGuard(None, cfg, "t")
    assert guard.host_allowed("bench1.lab:8765") and guard.host_allowed("[::1]:8765")
    assert not guard.host_allowed("bench2.lab") and not guard.host_allowed("")


def test_cross_site_gets_of_live_frames_and_media_are_refused(console):
    _, base = console
    assert httpx.get(base + "/api/bench/frame/middle.jpg", headers={"sec-fetch-site": "cross-site"}).status_code == 403
    assert httpx.get(base + "/api/meta", headers={"origin": "http://127.0.0.1:1"}).status_code == 403
    assert httpx.get(base + "/review", headers={"sec-fetch-site": "cross-site"}).status_code == 200  # a link


def _own(base: str, csrf: str) -> dict:
    return {"origin": base, "content-type": "application/json", "x-spabench-csrf": csrf}


def test_bodies_and_notes_are_capped_before_anything_is_stored(console, campaign):
    server, base = console
    before = _history(campaign)
    csrf = httpx.get(base + "/api/meta").json()["csrf_token"]
    url = "/api/attempts/E0000-P1-a1/score"
    # a declared length past the cap: refused from the head, the body is never read
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall((f"POST {url} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nOrigin: {base}\r\n"
                   f"Content-Type: application/json\r\nX-Spabench-CSRF: {csrf}\r\n"
                   f"Content-Length: {300 * 2**20}\r\n\r\n").encode())
        reply = b""
        while chunk := s.recv(4096):  # until the server closes the connection (it does not drain the body)
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 413") and b"max_body_bytes" in reply
    # a chunked body without a length: refused once it passes the cap
    big = b'{"note": "' + b"x" * (200 * 1024) + b'"}'
    reply = httpx.post(base + url, content=iter([big[i:i + 8192] for i in range(0, len(big), 8192)]),
                       headers=_own(base, csrf))
    assert reply.status_code == 413
    # a note (or reason) longer than max_note_chars: 400 naming the limit
    for field in ("note", "reason"):
        body = {"rater": "Ada", "success": False, "note": "n", "reason": "r", field: "y" * 501}
        reply = httpx.post(base + url, json=body, headers=_own(base, csrf))
        assert reply.status_code == 400 and f"{field} is 501 characters" in reply.json()["error"]
        assert "max_note_chars" in reply.json()["error"]
    assert _history(campaign) == before
    reply = httpx.post(base + url, json={"rater": "Ada", "success": False, "note": "y" * 500, "reason": "r",
                                         "version": 1}, headers=_own(base, csrf))
    assert reply.status_code == 200 and len(_history(campaign)) == len(before) + 1


def _closed_within(s: socket.socket, seconds: float) -> bool:
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.slow
def test_idle_and_slow_connections_are_closed(console):
    server, base = console
    idle = socket.create_connection(("127.0.0.1", server.port))
    slow = socket.create_connection(("127.0.0.1", server.port))
    t0 = time.monotonic()
    for byte in b"GET /api/meta HTTP/1.1\r\nHost: 127.0":  # a head trickled in, never finished
        try:
            slow.sendall(bytes([byte]))
        except OSError:
            break
        if time.monotonic() - t0 > 3:
            break
        time.sleep(0.1)
    assert _closed_within(idle, 10) and _closed_within(slow, 10)  # idle_timeout_s = 1
    csrf = httpx.get(base + "/api/meta").json()["csrf_token"]
    body = socket.create_connection(("127.0.0.1", server.port))
    body.sendall(f"POST /api/attempts/E0000-P1-a1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Spabench-CSRF: {csrf}\r\n"
                 "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode())  # the rest never comes
    assert _closed_within(body, 10)  # request_timeout_s = 2
    for s in (idle, slow, body):
        s.close()


@pytest.mark.slow
def test_a_flood_of_idle_connections_does_not_keep_a_request_out(console):
    server, base = console
    flood = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(60)]  # cap 8
    try:
        deadline = time.monotonic() + 20
        answered = None
        while answered is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                answered = httpx.get(base + "/api/meta", timeout=2).status_code
        assert answered == 200
        assert len(server._server.server_state.connections) <= server.cfg.max_connections
    finally:
        for s in flood:
            s.close()


def test_live_views_are_capped_per_page(console):
    _, base = console
    codes = [httpx.get(base + "/api/bench/frame/middle.jpg", params={"viewer": f"v{k}"}).status_code for k in range(3)]
    assert codes[:2] == [204, 204] and codes[2] == 503  # max_stream_clients = 2 (no session: no frame)
    assert httpx.get(base + "/api/bench/frame/wrist.jpg", params={"viewer": "v0"}).status_code == 204


def test_a_score_names_what_it_accepts_and_carries_its_version(console, campaign):
    server, base = console
    before = _history(campaign)
    csrf = httpx.get(base + "/api/meta").json()["csrf_token"]
    url = base + "/api/attempts/E0000-P1-a1/score"
    assert httpx.get(base + "/api/attempts/E0000-P1-a1?rater=Ada").json()["version"] == len(before)
    refused = {
        "an unknown field": ({"rater": "rita", "success": True, "version": 0, "verison": 1},
                             "unknown field(s) 'verison' (accepted: rater, success, failure_mode, note, reason, version)"),
        "no version": ({"rater": "rita", "success": True}, "version must be the count"),
        "a version that is not a count": ({"rater": "rita", "success": True, "version": "0"}, "got '0'"),
    }
    for what, (body, message) in refused.items():
        reply = httpx.post(url, json=body, headers=_own(base, csrf))
        assert reply.status_code == 400 and message in reply.json()["error"], (what, reply.text)
    stale = httpx.post(url, json={"rater": "Ada", "success": True, "reason": "r", "version": len(before) - 1},
                       headers=_own(base, csrf))
    assert stale.status_code == 409 and stale.json()["conflict"]["version"] == len(before), stale.text
    assert "not saved" in stale.json()["error"]
    assert _history(campaign) == before


@pytest.mark.slow
def test_a_pages_keep_alive_connection_outlasts_a_flood_of_bare_sockets(campaign):
    """The bench page's browser keeps its connection; under a flood of sockets that never send a
    request, the console evicts those first (before: the oldest idle, the page's, went first, and
    the page's next poll waited in the kernel's accept queue behind the flood)."""
    cfg = ConsoleConfig(port=free_port(), idle_timeout_s=30.0, max_connections=8)
    server = ConsoleServer(build_app(ConsoleContext(campaign_dir=campaign, cfg=cfg)), cfg).start()
    page = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    flood: list[socket.socket] = []

    def get_meta() -> int:
        page.request("GET", "/api/meta")
        reply = page.getresponse()
        reply.read()
        return reply.status

    try:
        assert get_meta() == 200
        kept = page.sock
        evicted_before = server.protocol.evicted
        flood = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(40)]   # cap 8
        deadline = time.monotonic() + 20
        while server.protocol.evicted - evicted_before < 40 - 8 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.protocol.evicted - evicted_before >= 40 - 8, server.protocol.evicted - evicted_before
        try:
            status = get_meta()
        except (http.client.HTTPException, OSError) as exc:
            raise AssertionError(f"the page's connection was evicted ({exc!r})") from None
        assert status == 200 and page.sock is kept, "the page's request went over another connection"
    finally:
        page.close()
        for s in flood:
            s.close()
        server.stop()
