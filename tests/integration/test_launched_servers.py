"""Policy servers spabench launches from the card and vouches for (issue 21), end to end.

Real parts: `spabench serve lerobot` started by `spabench servers up` as its own process (the CLI,
a tiny offline ACT checkpoint), the LeRobot SO101Follower on the emulated Feetech bus, the SQLite
ledger, HDF5/MP4 episodes, the report writer.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from spabench.ledger import Ledger
from spabench.policy.identity import checkpoint_digest
from spabench.policy.servers import ACCEPTED, PINNED, RESTARTED, STARTED, Supervisor
from spabench.record.reader import EpisodeReader
from spabench.rollout.commands import RunConfig, run
from spabench.rollout.exits import EXIT_CONFIG, EXIT_OK
from spabench.rollout.server_commands import servers_down, servers_status, servers_up
from tests.integration.harness import cfg_data, make_campaign, run_config
from tests.support.feetech_bus import EmulatedBus

pytest.importorskip("lerobot")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cfg(campaign: Path, bus_port: str, port: int, checkpoint: Path, **top) -> RunConfig:
    from tests.support.tiny_act import CHUNK_SIZE

    data = cfg_data(campaign, bus_port, port, timer_s=1.0, width=64, height=48, ema_alpha=None, **top)
    data["policy"].update(
        horizon=CHUNK_SIZE, execute_steps=CHUNK_SIZE, request_threshold=0, checkpoint=str(checkpoint),
        # the README's command line, verbatim, with the card's checkpoint and port filled in
        launch={"argv": ["spabench", "serve", "lerobot", "checkpoint={checkpoint}", "port={port}"],
                "startup_timeout_s": 240, "max_restarts": 1})
    return run_config(data)


def _events(campaign: Path, kind: str) -> list[dict]:
    ledger = Ledger.open(campaign, readonly=True)
    try:
        return [e["payload"] for e in ledger.events(kind=kind)]
    finally:
        ledger.close()


def _attempts(campaign: Path) -> list:
    ledger = Ledger.open(campaign, readonly=True)
    try:
        return ledger.attempts()
    finally:
        ledger.close()


def _wait_dead(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return
        if stat[stat.rfind(")") + 2] in "ZX":
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} still alive")


def test_launch_pin_refuse_a_swap_accept_it_and_restart(tmp_path, capsys):
    from tests.support.tiny_act import build_tiny_act

    checkpoint = build_tiny_act(tmp_path / "act", seed=0)
    digest0 = checkpoint_digest(checkpoint)
    campaign = make_campaign(tmp_path, n=4)
    port = _free_port()
    with EmulatedBus() as bus:
        cfg = _cfg(campaign, bus.port, port, checkpoint, max_trials=1)
        try:
            # servers up: the card's command runs as its own process, its health check answers
            assert servers_up(cfg) == 0
            (started,) = _events(campaign, STARTED)
            assert started["checkpoint_digest"] == digest0 and started["argv"][:3] == ["spabench", "serve", "lerobot"]
            assert f"checkpoint={checkpoint}" in started["argv"] and f"port={port}" in started["argv"]
            assert Path(started["log"]) == campaign / "servers" / "P1.log"   # blind campaign: the alias
            state = json.loads((campaign / "servers" / "servers.json").read_text())
            assert state["itest"]["pid"] == started["pid"]

            # run: the identity is pinned, the episode carries it
            out = io.StringIO()
            assert run(cfg, out=out) == EXIT_OK, out.getvalue()
            (pinned,) = _events(campaign, PINNED)
            assert pinned["identity"]["checkpoint_digest"] == digest0
            assert pinned["identity"]["protocol"] == "openpi"
            (first,) = _attempts(campaign)
            with EpisodeReader(campaign / first.episode_path) as ep:
                assert json.loads(ep.attrs["extra.server_identity"]) == pinned["identity"]

            # another checkpoint in the same folder, the server restarted: the next run stops before the arm moves
            build_tiny_act(checkpoint, seed=1)
            digest1 = checkpoint_digest(checkpoint)
            assert digest1 != digest0
            assert servers_down(cfg) == 0 and servers_up(cfg) == 0
            writes_before = len(bus.goal_writes())
            out = io.StringIO()
            assert run(cfg, out=out) == EXIT_CONFIG
            text = out.getvalue()
            assert "error: the policy server of policy P1 is not the one this campaign pinned" in text, text
            assert digest0[:19] in text and digest1[:19] in text and text.count("error:") == 1
            assert len(bus.goal_writes()) == writes_before      # no goal written
            assert len(_attempts(campaign)) == 1                 # no attempt begun

            # accepted with a reason: logged, the run goes on under the new identity
            out = io.StringIO()
            assert run(dataclasses.replace(cfg, accept_new_identity=True, reason="retrained on day 2 data"), out=out) == EXIT_OK, \
                out.getvalue()
            (accepted,) = _events(campaign, ACCEPTED)
            assert accepted["reason"] == "retrained on day 2 data"
            assert accepted["previous"]["checkpoint_digest"] == digest0
            assert accepted["identity"]["checkpoint_digest"] == digest1
            assert len(_attempts(campaign)) == 2

            # a launched server that dies is restarted before the next attempt; the restart is in the ledger
            pid = json.loads((campaign / "servers" / "servers.json").read_text())["itest"]["pid"]
            os.killpg(pid, signal.SIGKILL)
            _wait_dead(pid)
            out = io.StringIO()
            assert run(cfg, out=out) == EXIT_OK, out.getvalue()
            (restarted,) = _events(campaign, RESTARTED)
            assert restarted["previous_pid"] == pid and restarted["pid"] != pid and restarted["restart"] == 1
            assert restarted["checkpoint_digest"] == digest1
            assert len(_attempts(campaign)) == 3 and all(a.status == "complete" for a in _attempts(campaign))
            capsys.readouterr()
            assert servers_status(cfg) == 0
            status = capsys.readouterr().out
            assert "P1: up, pid" in status and "restarts 1" in status and digest1 in status
        finally:
            servers_down(cfg)
    assert not Supervisor(campaign).alive("itest")

    # the report lists the pinned identity, the restart and the override with its reason
    from spabench.analysis.commands import ReportConfig, report
    from spabench.analysis.servers import campaign_server_provenance, servers_section

    ledger = Ledger.open(campaign)
    for attempt in ledger.attempts():
        ledger.record_score(attempt.attempt_id, "tester", True)
    ledger.close()
    assert report(ReportConfig.from_mapping({"campaign_dir": str(campaign), "out": str(tmp_path / "report"),
                                               "bootstrap": 200})) == 0
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Policy servers" in markdown and "reason: retrained on day 2 data" in markdown
    assert digest0[:19] in markdown and "| 1 | 1 |" in markdown   # restarts, overrides

    rows = campaign_server_provenance(campaign)
    (row,) = rows
    assert row.restarts == 1 and len(row.overrides) == 1 and row.pinned["checkpoint_digest"] == digest0
    section = "\n".join(servers_section(rows))
    assert "## Policy servers" in section and digest0[:19] in section
    assert "reason: retrained on day 2 data" in section and digest1[:19] in section


def test_run_launch_true_brings_servers_up_and_down(tmp_path):
    from tests.support.tiny_act import build_tiny_act

    checkpoint = build_tiny_act(tmp_path / "act")
    campaign = make_campaign(tmp_path, n=1)
    with EmulatedBus() as bus:
        cfg = _cfg(campaign, bus.port, _free_port(), checkpoint, launch=True)
        out = io.StringIO()
        assert run(cfg, out=out) == EXIT_OK, out.getvalue()
    (started,) = _events(campaign, STARTED)
    (stopped,) = _events(campaign, "server_stopped")
    assert stopped["pid"] == started["pid"]
    _wait_dead(started["pid"])
    assert not Supervisor(campaign).alive("itest")
    (pinned,) = _events(campaign, PINNED)
    assert pinned["identity"]["checkpoint_digest"] == checkpoint_digest(checkpoint)


def _two_card_campaign(tmp_path: Path, port_a: int, port_b: int, protocol_b: str = "openpi") -> tuple[Path, Path]:
    """A blind campaign of two cards (aliases P1, P2) from a lab's config_dir."""
    import dataclasses

    import yaml

    from spabench.ledger import Ledger
    from tests.integration.harness import HORIZON, ROBOT_ID, trial_rows
    from tests.support.feetech_bus import DEFAULT_CALIBRATION_FILE

    lab = tmp_path / "lab" / "policy"
    lab.mkdir(parents=True)
    for name, port, protocol in (("card_a", port_a, "openpi"), ("card_b", port_b, protocol_b)):
        (lab / f"{name}.yaml").write_text(yaml.safe_dump({
            "name": name, "protocol": protocol, "port": port, "horizon": HORIZON, "timeout_s": 2.0,
            "cameras": {"observation/image": "middle"}}))
    (a,) = trial_rows(1, card="card_a")
    b = dataclasses.replace(a, trial_id="E0000-P2", policy="card_b", card="card_b", alias="P2", order=1)
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    Ledger.create(campaign / "ledger.sqlite", [a, b], "itest-hash", {"campaign": "itest"}).close()
    calib = tmp_path / "calibration"
    calib.mkdir()
    import shutil

    shutil.copy(DEFAULT_CALIBRATION_FILE, calib / f"{ROBOT_ID}.json")
    return campaign, tmp_path / "lab"


def _two_card_cfg(campaign: Path, lab: Path, bus_port: str) -> RunConfig:
    data = cfg_data(campaign, bus_port, 1, timer_s=1.0, config_dir=str(lab))
    del data["policy"]
    return run_config(data)


def test_two_cards_on_one_port_are_refused_at_preflight(tmp_path):
    from tests.integration.harness import WaveServer

    with EmulatedBus() as bus, WaveServer() as server:
        campaign, lab = _two_card_campaign(tmp_path, server.port, server.port)
        out = io.StringIO()
        assert run(_two_card_cfg(campaign, lab, bus.port), out=out) == EXIT_CONFIG
        assert bus.goal_writes() == [] and server.calls == 0
    text = out.getvalue()
    assert text.count("error:") == 1, text
    assert f"two policies of this campaign resolve to the same server (policy P1 and policy P2 both at " \
           f"127.0.0.1:{server.port})" in text, text
    assert "card_a" not in text and "card_b" not in text           # blind: aliases only
    assert _attempts(campaign) == []


def test_a_server_of_another_protocol_is_refused_at_preflight(tmp_path):
    from tests.integration.harness import WaveServer

    with EmulatedBus() as bus, WaveServer() as server, WaveServer() as other:
        # card_b says VLA-0 (HTTP), but an openpi websocket server holds its port
        campaign, lab = _two_card_campaign(tmp_path, server.port, other.port, protocol_b="vla0")
        out = io.StringIO()
        assert run(_two_card_cfg(campaign, lab, bus.port), out=out) == EXIT_CONFIG
        assert bus.goal_writes() == []
    text = out.getvalue()
    assert text.count("error:") == 1, text
    assert f"the server on policy P2's port (127.0.0.1:{other.port}) answers in a websocket" in text, text
    assert "card_b" not in text and _attempts(campaign) == []
