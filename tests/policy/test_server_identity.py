"""Server identity, the card's launch block, port collisions and the protocol a listener speaks.

The listeners are the upstream-exact test servers of tests/policy (GR00T's ZeroMQ REP socket,
the MolmoAct2 and VLA-0 FastAPI-like HTTP servers, gRPC, spabench's openpi websocket server)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from spabench.errors import ConfigError
from spabench.ledger import Ledger
from spabench.policy.card import card_from_mapping, load_card
from spabench.policy.endpoints import check_collisions, check_protocol, sniff
from spabench.policy.identity import checkpoint_digest, identity_of, metadata_digest
from spabench.policy.servers import ServerIdentityChanged, command_line, pin_or_compare, pinned_identities
from spabench.serve.openpi_server import OpenPiServer
from tests.integration.harness import trial_rows


def _card(**overrides):
    card = load_card("act_local")
    return card_from_mapping({**dataclasses.asdict(card), **overrides})


def test_checkpoint_digest_follows_the_files_not_the_folder(tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    (a / "config.json").write_text("{}")
    (a / "model.safetensors").write_bytes(b"\x00" * 1000)
    (a / ".cache").mkdir()
    (a / ".cache" / "x").write_text("ignored")
    first = checkpoint_digest(a)
    assert first.startswith("sha256:") and len(first) == 7 + 64
    moved = a.rename(tmp_path / "b")
    assert checkpoint_digest(moved) == first            # where it lives does not matter
    (moved / ".cache" / "x").write_text("changed")
    assert checkpoint_digest(moved) == first            # hidden entries are left out
    (moved / "model.safetensors").write_bytes(b"\x00" * 999 + b"\x01")
    assert checkpoint_digest(moved) != first            # one byte of the weights does
    with pytest.raises(ConfigError, match="no such file or folder"):
        checkpoint_digest(tmp_path / "absent")


def test_identity_compares_checkpoint_metadata_and_protocol():
    card = _card()
    meta = {"policy_type": "act", "chunk_size": 100, "checkpoint_digest": "sha256:" + "a" * 64,
            "inputs": {"observation/state": "observation.state"}, "arr": np.arange(3)}
    one = identity_of(card, meta)
    assert (one.checkpoint_digest, one.digest_source, one.protocol) == ("sha256:" + "a" * 64, "server", "openpi")
    assert not identity_of(card, {**meta, "url": "ws://elsewhere:1"}).differs_from(one)   # location only
    assert identity_of(card, {**meta, "chunk_size": 50}).differs_from(one)
    assert identity_of(card, {**meta, "checkpoint_digest": "sha256:" + "b" * 64}).differs_from(one)
    assert metadata_digest({"x": np.float32(1.5)}) == metadata_digest({"x": 1.5})
    # a launched server whose advertised digest is not the checkpoint spabench started it from
    with pytest.raises(ConfigError, match="launched it from checkpoint"):
        identity_of(card, meta, local_digest="sha256:" + "c" * 64)
    # the card's expected digest must agree with what is known
    with pytest.raises(ConfigError, match="field 'checkpoint_digest'"):
        identity_of(_card(checkpoint_digest="sha256:" + "d" * 64), meta)
    quiet = identity_of(card, {"policy": "x"}, local_digest="sha256:" + "e" * 64)
    assert quiet.digest_source == "launch" and quiet.checkpoint_digest == "sha256:" + "e" * 64
    assert identity_of(card, {"policy": "x"}).checkpoint_digest is None


def test_pin_then_compare_then_accept(tmp_path):
    ledger = Ledger.create(tmp_path / "ledger.sqlite", trial_rows(1), "h", {"campaign": "c"})
    card = _card()
    first = identity_of(card, {"checkpoint_digest": "sha256:" + "a" * 64})
    second = identity_of(card, {"checkpoint_digest": "sha256:" + "b" * 64})
    assert pin_or_compare(ledger, "act_local", "policy P1", first) == "pinned"
    assert pin_or_compare(ledger, "act_local", "policy P1", first) == "same"
    with pytest.raises(ServerIdentityChanged, match=r"policy P1 is not the one this campaign pinned: pinned "
                                                    r"checkpoint sha256:aaaaaaaaaaaa \(server\).*now checkpoint "
                                                    r"sha256:bbbbbbbbbbbb"):
        pin_or_compare(ledger, "act_local", "policy P1", second)
    assert pinned_identities(ledger)["act_local"] == first
    assert pin_or_compare(ledger, "act_local", "policy P1", second, accept=True, reason="new run") == "accepted"
    assert pinned_identities(ledger)["act_local"] == second
    assert pin_or_compare(ledger, "act_local", "policy P1", second) == "same"
    ledger.close()


def test_launch_block_is_typed_and_checked():
    card = _card(checkpoint="/ckpt", launch={"argv": ["spabench", "serve", "lerobot", "checkpoint={checkpoint}",
                                                      "port={port}"], "env": {"CUDA_VISIBLE_DEVICES": 1}})
    assert card.launch.env == {"CUDA_VISIBLE_DEVICES": "1"} and card.launch.max_restarts == 2
    assert command_line(card) == ["spabench", "serve", "lerobot", "checkpoint=/ckpt", "port=8000"]
    remote = _card(launch={"argv": ["uv", "run", "scripts/serve_policy.py", "--port", "{port}"], "ssh": "me@gpu",
                           "remote_port": 9000, "cwd": "~/openpi", "env": {"CUDA_VISIBLE_DEVICES": "0"}})
    argv = command_line(remote)
    assert argv[:2] == ["ssh", "-tt"] and "-L" in argv and argv[argv.index("-L") + 1] == "8000:127.0.0.1:9000"
    assert argv[-2] == "me@gpu"
    assert argv[-1] == "cd '~/openpi' && env CUDA_VISIBLE_DEVICES=0 uv run scripts/serve_policy.py --port 9000"
    for bad, match in (({"argv": []}, "launch.argv"), ({"argv": ["x"], "max_restarts": -1}, "launch.max_restarts"),
                       ({"argv": ["x"], "remote_port": 5}, "unless 'ssh'"), ({"argv": ["x"], "bogus": 1}, "bogus"),
                       ({"cwd": "/"}, "launch.argv' is required"), ({"argv": ["x"], "env": {"1A": "x"}}, "launch.env")):
        with pytest.raises(ConfigError, match=match):
            _card(launch=bad)
    with pytest.raises(ConfigError, match="checkpoint_digest"):
        _card(checkpoint_digest="md5:abc")


def test_two_cards_on_one_port_are_refused():
    a, b = _card(name="a", host="localhost", port=8000), _card(name="b", host="127.0.0.1", port=8000)
    with pytest.raises(ConfigError, match=r"P1 and P2 both at 127.0.0.1:8000"):
        check_collisions({"a": a, "b": b}, {"a": "P1", "b": "P2"})
    check_collisions({"a": a, "b": _card(name="b", port=8001)})


@pytest.mark.slow
def test_the_listener_tells_its_protocol():
    from concurrent import futures

    import grpc

    from tests.support.servers.groot_server import GrootTestServer
    from tests.support.servers.molmoact2_server import MolmoAct2TestServer
    from tests.support.servers.vla0_server import Vla0TestServer

    groot = GrootTestServer()
    groot.start()
    molmo, vla0 = MolmoAct2TestServer().start(), Vla0TestServer().start()
    openpi = OpenPiServer(lambda obs: {"actions": np.zeros((2, 6))}, port=0).start()
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    try:
        assert sniff("127.0.0.1", groot.port) == "zmq"
        assert sniff("127.0.0.1", molmo.port) == "http" and sniff("127.0.0.1", vla0.port) == "http"
        assert sniff("127.0.0.1", openpi.port) == "websocket"
        assert sniff("127.0.0.1", grpc_port) == "http2"
        check_protocol(_card(port=openpi.port), "P1")               # openpi card, openpi server: passes
        with pytest.raises(ConfigError, match=r"P1's port .* answers in ZeroMQ \(GR00T\), not the openpi"):
            check_protocol(_card(port=groot.port), "P1")
        with pytest.raises(ConfigError, match="answers in a websocket"):
            check_protocol(_card(protocol="vla0", port=openpi.port), "P2")
    finally:
        groot.stop()
        molmo.stop()
        vla0.stop()
        openpi.stop()
        grpc_server.stop(None)


def test_every_card_carries_a_launch_example_that_validates():
    """The commented `launch:` (and `checkpoint:`) lines of each conf/policy card, uncommented, make a valid card."""
    import yaml

    from spabench.paths import conf_dir

    for path in sorted((conf_dir() / "policy").glob("*.yaml")):
        lines = path.read_text().splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("# launch:")), None)
        assert start is not None, f"{path.name} has no commented launch: example"
        block = [line[2:] for line in lines[start:] if line.startswith("# ")]
        checkpoint = [line[2:] for line in lines if line.startswith("# checkpoint:")]
        data = yaml.safe_load(path.read_text())
        data.update(yaml.safe_load("\n".join(checkpoint + block)))
        card = card_from_mapping(data, source=path.name)
        argv = command_line(card)
        if card.launch.ssh:
            assert argv[0] == "ssh" and f"{card.port}:127.0.0.1:{card.launch.remote_port or card.port}" in argv
        else:
            assert argv[:2] == ["spabench", "serve"] and f"port={card.port}" in argv


@pytest.mark.slow
def test_one_unchanged_checkpoint_is_one_identity_whoever_started_its_server(tmp_path):
    """Issue 34: identity comes from the checkpoint's content and the protocol, not from who launched it.

    A VLA-0 server (the upstream-exact test server, as its own process; VLA-0 advertises nothing
    about its checkpoint) for a card naming a local checkpoint: started by this campaign's `servers up`
    (pinned), by hand, by another campaign's `servers up`: one identity. The checkpoint changed: a new one."""
    import socket
    import subprocess
    import sys
    from pathlib import Path

    from spabench.policy.servers import ServerIdentityChanged, Supervisor
    from spabench.rollout.commands import RunConfig
    from spabench.rollout.policies import PolicyServers, probe_server

    repo = Path(__file__).resolve().parents[2]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    checkpoint = tmp_path / "vla0-ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text('{"model": "vla0"}')
    (checkpoint / "model.safetensors").write_bytes(bytes(range(256)) * 8)
    argv = [sys.executable, "-m", "tests.support.servers.vla0_server", "{port}"]
    card = card_from_mapping({**dataclasses.asdict(load_card("vla0")), "port": port, "checkpoint": str(checkpoint),
                              "launch": {"argv": argv, "cwd": str(repo), "startup_timeout_s": 60}})
    cards = {"vla0": card}
    campaigns = {}
    for name in ("this", "other"):
        campaigns[name] = tmp_path / name
        campaigns[name].mkdir()
        Ledger.create(campaigns[name] / "ledger.sqlite", trial_rows(1, card="vla0"), "h", {"campaign": name}).close()

    def connect() -> dict:
        """This campaign's pre-flight against whatever server holds the port; the identity it pinned or compared."""
        ledger = Ledger.open(campaigns["this"])
        cfg = RunConfig.from_mapping({"campaign_dir": str(campaigns["this"])})
        servers = PolicyServers(cfg, cards, campaigns["this"], ledger, lambda _: None, None, None)
        try:
            servers.connect()
            return servers.identities["vla0"].as_dict()
        finally:
            servers.close()
            ledger.close()

    def by_hand() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.servers.vla0_server", str(port)], cwd=repo)
        _wait_answers(card)
        return proc

    mine = Supervisor(campaigns["this"], say=lambda _: None)
    mine.up(cards, probe_server)
    try:
        pinned = connect()
    finally:
        mine.down()
    assert pinned["checkpoint_digest"] == checkpoint_digest(checkpoint) and pinned["digest_source"] == "launch"

    proc = by_hand()
    try:
        assert connect()["checkpoint_digest"] == pinned["checkpoint_digest"]   # by hand: the same identity
    finally:
        proc.terminate()
        proc.wait(30)
    theirs = Supervisor(campaigns["other"], say=lambda _: None)
    theirs.up(cards, probe_server)
    try:
        assert connect()["checkpoint_digest"] == pinned["checkpoint_digest"]   # another campaign's servers up
    finally:
        theirs.down()

    (checkpoint / "model.safetensors").write_bytes(bytes(range(256)) * 7 + bytes(256))   # retrained
    proc = by_hand()
    try:
        with pytest.raises(ServerIdentityChanged, match="not the one this campaign pinned"):
            connect()
    finally:
        proc.terminate()
        proc.wait(30)
    ledger = Ledger.open(campaigns["this"], readonly=True)
    try:
        assert len(ledger.events(kind="server_identity_pinned")) == 1
    finally:
        ledger.close()


def _wait_answers(card, timeout_s: float = 60.0) -> None:
    """Until a fresh client connects to the card's server (its health check), or fail."""
    import time

    from spabench.rollout.policies import probe_server

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            probe_server(card)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
