"""ActionBroker with the real OpenPiClient and OpenPiServer on loopback."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from spabench.policy.broker import ActionBroker
from spabench.policy.client import PolicyFault
from spabench.policy.openpi_client import OpenPiClient

from .openpi_helpers import make_card, make_obs, start_server, wait_until


@pytest.fixture
def rig():
    server, policy = start_server()
    card = make_card(server.port, horizon=10, execute_steps=8, request_threshold=3)
    client = OpenPiClient(card)
    client.connect()
    broker = ActionBroker(client, card)
    yield broker, policy, server, card
    policy.gate.set()
    broker.stop()
    client.close()
    server.stop()


def test_prefetches_while_actions_remain_and_honours_execute_steps(rig):
    broker, policy, server, card = rig
    broker.start_episode("gated: pick the cup")
    assert broker.next_action() is None          # nothing yet: the loop holds
    assert broker.submit_observation(make_obs(marker=1.0))
    assert not broker.submit_observation(make_obs(marker=1.0))  # one request at a time
    wait_until(lambda: broker.queued == 8, what="first chunk")
    policy.gate.clear()                          # the next request will be held by the server

    ids = []
    while broker.queued > card.request_threshold:
        assert not broker.submit_observation(make_obs(marker=2.0))  # queue not low yet
        action, chunk_id = broker.next_action()
        ids.append(chunk_id)
    assert broker.queued == 3
    assert broker.submit_observation(make_obs(marker=2.0))
    wait_until(lambda: policy.arrivals == 2, what="second request at the server")
    assert broker.in_flight and broker.queued == 3  # requested before the queue emptied

    policy.gate.set()
    wait_until(lambda: broker.queued == 3 + 8, what="second chunk appended")
    assert not broker.in_flight
    rest = []
    while (item := broker.next_action()) is not None:
        rest.append(item)
    first_id = ids[0]
    assert ids == [first_id] * 5
    assert [cid for _, cid in rest] == [first_id] * 3 + [first_id + 1] * 8
    # chunk 0 rows 5..7 then chunk 1 rows 0..7 (rows 8, 9 of each chunk are never executed)
    pans = [a[0] for a, _ in rest]
    assert pans == [105.0, 106.0, 107.0] + [200.0 + i for i in range(8)]
    assert all(a.shape == (6,) for a, _ in rest)
    assert broker.chunks[first_id + 1].server_ms is not None
    assert broker.requests == 2


def test_stale_reply_from_an_earlier_episode_is_dropped(rig):
    broker, policy, server, card = rig
    broker.start_episode("gated: episode A")
    policy.gate.clear()
    assert broker.submit_observation(make_obs(marker=1.0))
    wait_until(lambda: policy.arrivals == 1, what="episode A request at the server")
    threading.Timer(0.2, policy.gate.set).start()
    broker.start_episode("episode B")            # waits for A's reply, drops it, resets
    assert broker.stale_dropped == 1
    assert broker.queued == 0 and broker.next_action() is None
    assert server.resets == 2                   # one reset per episode, via the reset endpoint

    assert broker.submit_observation(make_obs(marker=2.0))
    wait_until(lambda: broker.queued == 8, what="episode B chunk")
    action, _ = broker.next_action()
    assert action[0] == 200.0
    assert policy.requests[-1]["prompt"] == "episode B"


def test_server_fault_surfaces_on_next_action_until_the_next_episode(rig):
    broker, policy, server, card = rig
    broker.start_episode("explode")
    broker.submit_observation(make_obs())

    def faulted():
        try:
            broker.next_action()
        except PolicyFault:
            return True
        return False

    wait_until(faulted, what="the fault")
    with pytest.raises(PolicyFault, match=r"(?s)ValueError: boom"):
        broker.next_action()                     # stays raised
    assert not broker.submit_observation(make_obs())
    broker.start_episode("fine")                 # a new episode clears it (and reconnects)
    broker.submit_observation(make_obs(marker=4.0))
    wait_until(lambda: broker.queued == 8, what="chunk after the fault")
    assert broker.next_action()[0][0] == 400.0


def test_protocol_error_in_the_thread_is_a_policy_fault(rig):
    broker, *_ = rig
    broker.start_episode("nan")
    broker.submit_observation(make_obs())
    wait_until(lambda: not broker.in_flight, what="the reply")
    with pytest.raises(PolicyFault, match=r"protocol error: .*field 'actions' holds non-finite"):
        broker.next_action()


def test_reset_failure_raises_from_start_episode():
    server, _ = start_server()
    port = server.port
    server.stop()
    card = make_card(port)
    broker = ActionBroker(OpenPiClient(card, connect_attempts=1), card)
    try:
        with pytest.raises(PolicyFault, match="cannot reach"):
            broker.start_episode("anything")
    finally:
        broker.stop()


def test_threshold_zero_requests_only_when_empty():
    server, policy = start_server()
    card = make_card(server.port, horizon=10, execute_steps=4, request_threshold=0)
    broker = ActionBroker(OpenPiClient(card), card)
    try:
        broker.start_episode("go")
        assert broker.submit_observation(make_obs(marker=1.0))
        wait_until(lambda: broker.queued == 4, what="chunk")
        for _ in range(4):
            assert not broker.submit_observation(make_obs(marker=1.0))
            assert broker.next_action() is not None
        assert broker.next_action() is None
        assert broker.submit_observation(make_obs(marker=1.0))
        wait_until(lambda: broker.queued == 4, what="second chunk")
        np.testing.assert_allclose([broker.next_action()[0][0] for _ in range(4)], [100, 101, 102, 103])
    finally:
        broker.stop()
        server.stop()
