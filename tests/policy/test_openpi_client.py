"""OpenPiClient against the real OpenPiServer on loopback: real websocket frames, real faults."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.request

import numpy as np
import pytest

from spabench.errors import ConfigError, ProtocolError
from spabench.policy.adapters import resize_with_pad
from spabench.policy.client import PolicyFault
from spabench.policy.factory import make_client
from spabench.policy.openpi_client import OpenPiClient

from .openpi_helpers import chunk_for, make_card, make_obs, start_server


@pytest.fixture
def served():
    server, policy = start_server()
    yield server, policy
    policy.gate.set()
    server.stop()


def test_round_trip_with_real_frames(served):
    server, policy = served
    client = make_client(make_card(server.port))
    assert isinstance(client, OpenPiClient)
    meta = client.connect()
    assert meta["policy"] == "recording" and meta["action_horizon"] == 10
    assert "reset" in meta["endpoints"]
    obs = make_obs(marker=1.0)
    first = client.infer(obs, "put the red block in the bowl")
    second = client.infer(make_obs(marker=2.0), "again")
    client.close()

    request = policy.requests[0]
    assert set(request) == {"observation/image", "observation/wrist_image", "observation/state", "prompt"}
    assert request["prompt"] == "put the red block in the bowl"
    assert request["observation/image"].dtype == np.uint8
    assert request["observation/image"].shape == (224, 224, 3)
    np.testing.assert_array_equal(request["observation/image"], resize_with_pad(obs.images["middle"], 224, 224))
    assert request["observation/state"].dtype == np.float32
    np.testing.assert_allclose(request["observation/state"], obs.state)

    assert first.actions.shape == (8, 6) and first.actions.dtype == np.float64
    np.testing.assert_allclose(first.actions, chunk_for(request)[:8])
    np.testing.assert_allclose(second.actions[:, 0], 200.0 + np.arange(8))
    assert second.chunk_id == first.chunk_id + 1
    assert first.server_ms is not None and first.server_ms >= 0
    assert first.rtt_s == pytest.approx(first.received_t - first.sent_t) and first.rtt_s > 0


def test_resize_with_pad_keeps_aspect_and_pads_black():
    image = np.full((480, 640, 3), 255, np.uint8)
    out = resize_with_pad(image, 224, 224)
    assert out.shape == (224, 224, 3)
    # 640x480 scaled by 224/640 is 224x168, centred: 28 black rows above and below.
    assert out[:28].max() == 0 and out[196:].max() == 0
    assert out[28:196].min() == 255


def test_healthz_answers_200(served):
    server, _ = served
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=3) as reply:
        assert reply.status == 200
    assert OpenPiClient(make_card(server.port)).healthy()
    server.stop()
    assert not OpenPiClient(make_card(server.port, timeout_s=0.5)).healthy()


def test_api_key_accepted_and_refused(monkeypatch):
    server, _ = start_server(api_key="s3cret")
    try:
        monkeypatch.setenv("SPABENCH_TEST_KEY", "s3cret")
        good = OpenPiClient(make_card(server.port, api_key_env="SPABENCH_TEST_KEY"))
        good.connect()
        assert good.infer(make_obs(), "go").actions.shape == (8, 6)
        good.close()

        with pytest.raises(PolicyFault, match="HTTP 401.*api_key_env"):
            OpenPiClient(make_card(server.port)).connect()
        monkeypatch.setenv("SPABENCH_TEST_KEY", "wrong")
        with pytest.raises(PolicyFault, match="HTTP 401.*refused"):
            OpenPiClient(make_card(server.port, api_key_env="SPABENCH_TEST_KEY")).connect()
        # the health check stays open without a key
        assert OpenPiClient(make_card(server.port)).healthy()
    finally:
        server.stop()


def test_missing_api_key_variable_is_a_config_error(monkeypatch):
    monkeypatch.delenv("SPABENCH_NOT_SET", raising=False)
    with pytest.raises(ConfigError, match="api_key_env.*SPABENCH_NOT_SET"):
        OpenPiClient(make_card(9, api_key_env="SPABENCH_NOT_SET"))


def test_server_exception_text_frame_is_a_policy_fault_then_reconnects(served):
    server, _ = served
    client = OpenPiClient(make_card(server.port))
    client.connect()
    with pytest.raises(PolicyFault, match=r"(?s)ValueError: boom: the policy exploded"):
        client.infer(make_obs(), "explode")
    assert not client.connected
    assert client.infer(make_obs(marker=3.0), "fine").actions[0, 0] == 300.0
    assert client.connects == 2
    client.close()


@pytest.mark.parametrize("prompt, pattern", [
    ("nan", r"field 'actions' holds non-finite values .*rows \[3\].*\(10, 6\)"),
    ("narrow", r"field 'actions' has shape \(10, 5\); expected \(10, 6\)"),
    ("text", r"field 'actions' has dtype <U1; expected a numeric"),
    ("no_actions", r"field 'actions' is missing; expected an array of shape \(10, 6\)"),
])
def test_bad_replies_are_protocol_errors_naming_the_field(served, prompt, pattern):
    server, _ = served
    client = OpenPiClient(make_card(server.port))
    with pytest.raises(ProtocolError, match=pattern):
        client.infer(make_obs(), prompt)
    client.close()


def test_wrong_horizon_is_a_protocol_error(served):
    server, _ = served
    client = OpenPiClient(make_card(server.port, horizon=50, execute_steps=50))
    with pytest.raises(ProtocolError, match=r"shape \(10, 6\); expected \(50, 6\)"):
        client.infer(make_obs(), "go")
    client.close()


def test_timeout_is_a_fault_and_the_next_call_reconnects_without_the_stale_reply(served):
    server, policy = served
    policy.gate.clear()
    # a 1 s budget: the reconnect and the next call must fit in it on a loaded machine too
    client = OpenPiClient(make_card(server.port, timeout_s=1.0))
    client.connect()
    with pytest.raises(PolicyFault, match="no inference reply within 1 s"):
        client.infer(make_obs(marker=1.0), "gated slow")
    assert not client.connected
    policy.gate.set()  # the slow reply now goes to the dropped connection
    chunk = client.infer(make_obs(marker=5.0), "fast")
    assert client.connects == 2
    np.testing.assert_allclose(chunk.actions[:, 0], 500.0 + np.arange(8))
    client.close()


_SERVER_SCRIPT = """
import sys, time, numpy as np
from spabench.serve.openpi_server import OpenPiServer
def infer(request):
    if request.get("prompt") == "hang":
        print("hanging", flush=True)   # the request arrived: the test kills the server from here on
        time.sleep(30)
    return {"actions": np.zeros((10, 6), np.float32)}
server = OpenPiServer(infer, {"kind": "subprocess"}, host="127.0.0.1", port=0).start()
print(server.port, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def server_process():
    proc = subprocess.Popen([sys.executable, "-c", _SERVER_SCRIPT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ})
    port = int(proc.stdout.readline())
    yield proc, port
    if proc.poll() is None:
        proc.kill()
    proc.wait(5)


def test_server_killed_between_requests(server_process):
    proc, port = server_process
    client = OpenPiClient(make_card(port), connect_attempts=2, backoff_s=0.05)
    assert client.connect()["kind"] == "subprocess"
    assert client.infer(make_obs(), "go").actions.shape == (8, 6)
    proc.kill()
    proc.wait(5)
    with pytest.raises(PolicyFault, match="connection lost|cannot reach|socket error"):
        client.infer(make_obs(), "go")
    with pytest.raises(PolicyFault, match="cannot reach .* after 2 attempts"):
        client.infer(make_obs(), "go")


def test_server_killed_mid_request(server_process):
    proc, port = server_process
    client = OpenPiClient(make_card(port, timeout_s=20.0))
    client.connect()

    def kill_once_the_request_arrived() -> None:
        # (measured before: a 0.3 s timer, which a loaded machine can fire before the request is sent)
        if proc.stdout.readline().strip() == "hanging":
            proc.kill()

    killer = threading.Thread(target=kill_once_the_request_arrived, daemon=True)
    killer.start()
    with pytest.raises(PolicyFault, match="connection lost during inference"):
        client.infer(make_obs(), "hang")
    killer.join(10)
    assert proc.wait(10) == -signal.SIGKILL and not client.connected   # killed mid-request, by the test


def test_reset_uses_the_endpoint_when_declared(served):
    server, _ = served
    client = OpenPiClient(make_card(server.port))
    client.connect()
    client.infer(make_obs(), "go")
    client.reset()
    client.reset()
    assert server.resets == 2 and client.connects == 1
    assert client.infer(make_obs(), "go").actions.shape == (8, 6)
    client.close()


def test_reset_reconnects_when_the_server_has_no_reset_endpoint():
    server, _ = start_server(supports_reset=False)
    try:
        client = OpenPiClient(make_card(server.port))
        assert "endpoints" not in client.connect()
        client.reset()                 # fresh session: nothing to do
        assert client.connects == 1
        client.infer(make_obs(), "go")
        client.reset()                 # used session: a new connection
        assert client.connects == 2 and server.resets == 0
        client.close()
    finally:
        server.stop()


def test_unreachable_server_is_a_fault_after_backoff():
    server, _ = start_server()
    port = server.port
    server.stop()
    client = OpenPiClient(make_card(port), connect_attempts=3, backoff_s=0.01)
    with pytest.raises(PolicyFault, match="after 3 attempts"):
        client.connect()


def test_ctrl_c_mid_request_drops_the_session_so_no_late_reply_is_misread(served):
    import signal

    server, policy = served
    policy.gate.clear()
    client = OpenPiClient(make_card(server.port, timeout_s=10.0))
    client.connect()

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            client.infer(make_obs(marker=1.0), "gated slow")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not client.connected
    policy.gate.set()
    chunk = client.infer(make_obs(marker=6.0), "fast")
    np.testing.assert_allclose(chunk.actions[:, 0], 600.0 + np.arange(8))
    client.close()
