"""Bound to a non-loopback address the console refuses every request without its token."""

from __future__ import annotations

import httpx
import pytest

from spabench.console.app import ConsoleContext, build_app
from spabench.console.config import ConsoleConfig
from spabench.console.server import ConsoleServer
from spabench.errors import ConfigError
from spabench.ledger import Ledger
from spabench.network import is_loopback

from .conftest import free_port


@pytest.fixture
def campaign(tmp_path):
    rows = [{"trial_id": "E0000-P1", "evaluation_id": "E0000", "policy": "secret_policy", "card": "secret_card",
             "alias": "P1", "task": "counting", "condition": "id", "scene_id": "counting-id-000",
             "scene_condition": "id", "matched_group": None, "cell": "two|cube", "withheld": False,
             "instruction": "Put two cubes in the bowl.", "instruction_variant": "original", "order": 0, "timer_s": 5.0, "control_hz": 30.0}]
    Ledger.create(tmp_path / Ledger.FILENAME, rows, "h", {"campaign": "sec"}).close()
    return tmp_path


def _serve(campaign, host, token=""):
    cfg = ConsoleConfig(host=host, port=free_port(), token=token)
    return ConsoleServer(build_app(ConsoleContext(campaign_dir=campaign, cfg=cfg)), cfg).start()


def test_loopback_names():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.20")
    assert ConsoleConfig().host == "127.0.0.1" and not ConsoleConfig().needs_token
    with pytest.raises(ConfigError, match="workspace_roi"):
        ConsoleConfig(workspace_roi=[0.5, 0, 0.4, 1])
    with pytest.raises(ConfigError, match="unknown field"):
        ConsoleConfig.from_mapping({"prot": 1})


def test_non_loopback_bind_refuses_requests_without_the_token(campaign, browser):
    server = _serve(campaign, "0.0.0.0")
    try:
        assert server.token and len(server.token) >= 20  # generated: none was configured
        base = f"http://127.0.0.1:{server.port}"
        for path in ("/", "/bench", "/review", "/api/meta", "/api/attempts", "/static/bench.js",
                     "/api/bench/state", "/media/E0000-P1-a1/video/middle.mp4"):
            assert httpx.get(base + path).status_code == 401, path
        assert httpx.post(base + "/api/bench/stop/estop").status_code == 401
        assert httpx.post(base + "/api/attempts/E0000-P1-a1/score", json={}).status_code == 401
        assert httpx.get(base + "/api/meta", params={"token": "wrong"}).status_code == 401
        assert httpx.get(base + "/api/meta", headers={"Authorization": f"Bearer {server.token}"}).status_code == 200
        # the browser: refused without, admitted with the token (then by cookie)
        ctx = browser.new_context()
        pg = ctx.new_page()
        assert pg.goto(base + "/review").status == 401
        assert pg.goto(f"{base}/review?token={server.token}").status == 200
        assert pg.goto(base + "/api/meta").status == 200
        assert "secret_policy" not in pg.content() and "secret_card" not in pg.content()
        ctx.close()
    finally:
        server.stop()


def test_loopback_bind_needs_no_token_but_a_configured_one_is_enforced(campaign):
    server = _serve(campaign, "127.0.0.1")
    try:
        assert not server.token
        assert httpx.get(f"http://127.0.0.1:{server.port}/api/meta").status_code == 200
    finally:
        server.stop()
    server = _serve(campaign, "127.0.0.1", token="lab-secret")
    try:
        assert httpx.get(f"http://127.0.0.1:{server.port}/api/meta").status_code == 401
        assert httpx.get(f"http://127.0.0.1:{server.port}/api/meta?token=lab-secret").status_code == 200
    finally:
        server.stop()


@pytest.mark.slow
def test_console_command_serves_a_campaign_and_refuses_bad_settings(campaign):
    import subprocess
    import sys

    from .conftest import REPO, env, spabench, wait_http

    bad = spabench("console", f"campaign={campaign}", "operator.console.stream_hz=0", timeout=60)
    assert bad.returncode == 2 and "stream_hz" in bad.stderr and "allowed" in bad.stderr
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "spabench.cli.main", "console", f"campaign={campaign}",
                             f"operator.console.port={port}"], cwd=REPO, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/api/meta", 60, proc)
        listing = httpx.get(f"http://127.0.0.1:{port}/api/attempts").json()
        assert listing["attempts"] == [] and listing["options"]["alias"] == ["P1"]
        assert httpx.get(f"http://127.0.0.1:{port}/api/bench/state").json()["phase"] == "offline"
        assert "secret_policy" not in httpx.get(f"http://127.0.0.1:{port}/api/meta").text
    finally:
        proc.terminate()
        proc.wait(10)
