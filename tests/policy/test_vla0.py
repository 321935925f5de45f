"""Vla0Client against a VLA-0-conforming HTTP server on loopback."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from spabench.errors import ProtocolError
from spabench.policy.client import PolicyFault
from spabench.policy.vla0_client import Vla0Client, npy_b64
from tests.policy.wire_helpers import expected_actions, interrupt_main_when, make_card, make_obs
from tests.support.servers.vla0_server import Vla0TestServer

# The evaluated deployment: wrist first, then middle; 4 of 8 steps executed per request.
CAMERAS = {"wrist": "wrist", "middle": "middle"}


def vla0_card(port: int, **overrides):
    fields = dict(cameras=CAMERAS, horizon=8, execute_steps=4, timer_s=90.0)
    fields.update(overrides)
    return make_card("vla0", port, **fields)


@pytest.fixture
def server():
    with Vla0TestServer() as srv:
        yield srv


@pytest.fixture
def client(server):
    c = Vla0Client(vla0_card(server.port, timeout_s=10.0))  # a budget a loaded machine cannot exceed
    c.connect()
    yield c
    c.close()


def test_images_are_base64_of_npy_bytes():
    frame = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    raw = base64.b64decode(npy_b64(frame))
    assert raw.startswith(b"\x93NUMPY")
    back = np.load(io.BytesIO(raw), allow_pickle=False)
    assert back.dtype == np.uint8 and np.array_equal(back, frame)


def test_round_trip_camera_order_state_and_first_four_of_eight(server, client):
    assert client.metadata["status"] == "ok"
    obs = make_obs(height=30, width=40)
    chunk = client.infer(obs, "move the apple to the left of the block")
    assert chunk.actions.shape == (4, 6)
    np.testing.assert_allclose(chunk.actions, expected_actions(obs.state, 8)[:4], rtol=1e-6)
    request = server.received[-1]
    assert [int(f[0, 0, 0]) for f in request["frames"]] == [11, 22]  # wrist, then middle
    assert request["frames"][0].shape == (30, 40, 3)  # native resolution
    assert request["state"] == pytest.approx(list(obs.state))
    assert request["instr"] == "move the apple to the left of the block"
    assert chunk.server_ms is None and chunk.chunk_id == 1


def test_card_camera_order_is_honoured():
    with Vla0TestServer() as srv:
        with Vla0Client(vla0_card(srv.port, cameras={"middle": "middle", "wrist": "wrist"})) as c:
            c.infer(make_obs(), "x")
        assert [int(f[0, 0, 0]) for f in srv.received[-1]["frames"]] == [22, 11]


def test_health_is_checked_at_connect_and_each_reset(server, client):
    assert server.health_requests == 1
    client.reset()
    assert server.health_requests == 2


def test_unhealthy_server_is_a_clear_error_at_connect(server):
    server.faults.unhealthy = True
    with pytest.raises(PolicyFault, match=r'GET /health must answer \{"status": "ok"\}.*starting'):
        Vla0Client(vla0_card(server.port)).connect()


def test_no_server_is_a_clear_error_at_connect():
    with Vla0TestServer() as srv:
        port = srv.port
    with pytest.raises(PolicyFault, match="health check failed"):
        Vla0Client(vla0_card(port, timeout_s=0.5)).connect()


def test_nan_reply_is_a_protocol_error(server, client):
    server.faults.nan = True
    with pytest.raises(ProtocolError, match="non-finite"):
        client.infer(make_obs(), "x")


def test_wrong_shape_reply_names_expected_shape(server, client):
    server.faults.wrong_shape = True
    with pytest.raises(ProtocolError, match=r"has shape \(8, 5\); expected \(8, 6\)"):
        client.infer(make_obs(), "x")


def test_error_reply_is_a_policy_fault(server, client):
    server.faults.error = "model not loaded"
    with pytest.raises(PolicyFault, match="HTTP 500.*model not loaded"):
        client.infer(make_obs(), "x")


def test_timeout_then_recovery(server):
    # a 1 s budget: the recovered call must fit in it on a loaded machine too
    client = Vla0Client(vla0_card(server.port, timeout_s=1.0))
    client.connect()
    server.faults.delay_s = 1.6
    with pytest.raises(PolicyFault, match="within 1 s"):
        client.infer(make_obs(state=[1, 1, 1, 1, 1, 1]), "x")
    server.faults.delay_s = 0.0
    second = make_obs(state=[2, 4, 6, 8, 10, 12])
    np.testing.assert_allclose(client.infer(second, "y").actions, expected_actions(second.state, 8)[:4], rtol=1e-6)
    client.close()


def test_ctrl_c_mid_request_then_clean_next_request(server):
    client = Vla0Client(vla0_card(server.port, timeout_s=30.0))
    client.connect()
    server.faults.delay_s = 2.0     # the reply is held while the Ctrl-C lands
    asked = server.action_requests
    # Ctrl-C once the server has the request (measured before: a 0.15 s timer)
    interrupt_main_when(lambda: server.action_requests > asked)
    with pytest.raises(KeyboardInterrupt):
        client.infer(make_obs(state=[1, 1, 1, 1, 1, 1]), "x")
    assert client.http._session is None
    server.faults.delay_s = 0.0
    second = make_obs(state=[5, 5, 5, 5, 5, 5])
    np.testing.assert_allclose(client.infer(second, "y").actions, expected_actions(second.state, 8)[:4], rtol=1e-6)
    client.close()


def test_server_dying_mid_episode(server, client):
    server.faults.die_after = 2
    client.infer(make_obs(), "x")
    client.infer(make_obs(), "x")
    with pytest.raises(PolicyFault):
        client.infer(make_obs(), "x")
    with pytest.raises(PolicyFault, match="health check failed"):
        client.reset()


def test_reconnect_backoff_grows_caps_and_resets():
    from spabench.policy.wire_common import Backoff

    backoff = Backoff(first_s=0.001, factor=2.0, cap_s=0.004)
    delays = []
    for _ in range(5):
        delays.append(backoff.delay())
        backoff.wait()
    assert delays == [0.0, 0.001, 0.002, 0.004, 0.004]
    backoff.reset()
    assert backoff.delay() == 0.0
