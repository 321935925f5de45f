"""`spabench bench check`, the servers part (issue 37): real openpi servers on loopback (the harness's
WaveServer behind spabench's OpenPiServer), the card's own client, the emulated SO-101 and replay
cameras. A live server is timed at a real payload (its card's cameras at their configured size,
state, prompt); a dead port, a card that does not fit its server and a server too slow for its
card's control rate each fail naming the card.

Failed before: the check had no servers part (`policy=` was refused: no policy group read)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from spabench.cli.main import main
from tests.integration.harness import HORIZON, WaveServer
from tests.support.campaigns import by_alias, plan_smoke
from tests.support.feetech_bus import EmulatedBus

pytestmark = pytest.mark.slow   # policy servers and the emulated bus in one check


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]   # closed again: nothing listens there


def check(lab: Path, bus: EmulatedBus, out: str, capsys, *args: str, parts: str = "[servers]") -> tuple[int, str, dict]:
    """The servers part alone (a camera the loaded test machine starves is the cameras tests' business)."""
    code = main(["bench", "check", "bench=so101_emulated", f"bench.port={bus.port}",
                 f"bench.calibration_dir={lab / 'calibration'}", f"out={lab / out}", "camera_s=0.5", "requests=6",
                 f"parts={parts}", *args])
    text = capsys.readouterr().out
    return code, text, json.loads((lab / out / "report.json").read_text())


def test_one_card_is_timed_at_a_real_payload(lab, capsys):
    with EmulatedBus() as bus, WaveServer() as server:
        code, text, report = check(lab, bus, "one", capsys, "policy=pi05", f"policy.port={server.port}",
                                   f"policy.horizon={HORIZON}", f"policy.execute_steps={HORIZON}")
        calls = server.calls
    assert code == 0, text
    (row,) = report["parts"]["servers"]["rows"]
    assert row["card"] == "pi05" and row["protocol"] == "openpi" and row["requests"] == 6 and row["chunk"] == HORIZON
    assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["max_ms"] and row["control_hz_allowed"] > 0
    assert row["identity"] and calls >= 6
    assert {"observation/image", "observation/wrist_image", "observation/state", "prompt"} <= server.seen_keys
    assert report["parts"]["servers"]["payload"]["middle"] == [120, 160, 3]   # so101_emulated's configured size
    assert "servers: pi05 6/6 requests" in text
    assert "<td>pi05</td>" in (lab / "one" / "report.html").read_text()


def test_a_dead_port_and_a_card_that_does_not_fit_fail_by_name(lab, capsys):
    port = dead_port()
    with EmulatedBus() as bus, WaveServer() as server:
        code, text, _ = check(lab, bus, "several", capsys, f"cards.pi05.port={server.port}",
                              f"cards.pi05.horizon={HORIZON}", f"cards.pi05.execute_steps={HORIZON}",
                              f"cards.vla0.port={port}")
    fails = [line for line in text.splitlines() if line.startswith("FAIL ")]
    assert code != 0 and len(fails) == 1, text
    assert fails[0].startswith(f"FAIL servers: server: policy card 'vla0' at 127.0.0.1:{port}"), fails
    assert "servers: pi05 6/6 requests" in text   # the live one was timed all the same

    with EmulatedBus() as bus, WaveServer() as server:   # pi05's card says a chunk of 50; the server sends 10
        code, text, _ = check(lab, bus, "misfit", capsys, "policy=pi05", f"policy.port={server.port}")
    fails = [line for line in text.splitlines() if line.startswith("FAIL ")]
    assert code != 0 and len(fails) == 1 and "policy card 'pi05'" in fails[0] and "50" in fails[0], text


def test_a_server_too_slow_for_the_card_fails(lab, capsys):
    """200 ms per chunk of 2 executed steps can feed at most 10 Hz: the card's 30 Hz cannot be kept."""
    with EmulatedBus() as bus, WaveServer(delay_s=0.2) as server:
        code, text, report = check(lab, bus, "slow", capsys, "policy=pi05", f"policy.port={server.port}",
                                   f"policy.horizon={HORIZON}", "policy.execute_steps=2", "policy.request_threshold=1")
    (row,) = report["parts"]["servers"]["rows"]
    assert code != 0 and row["control_hz_allowed"] <= 10.0 and row["p50_ms"] >= 200
    assert "below the card's control_hz 30" in text


def test_a_campaigns_cards_are_checked(lab, capsys):
    campaign = plan_smoke(lab, "robot", bench="so101", policies=[{"name": "pi05", "card": "pi05"}])
    with EmulatedBus() as bus, WaveServer() as server:
        code, text, report = check(lab, bus, "campaign", capsys, f"campaign={campaign}",
                                   *by_alias(campaign, [f"cards.pi05.port={server.port}",
                                                        f"cards.pi05.horizon={HORIZON}",
                                                        f"cards.pi05.execute_steps={HORIZON}"]),
                                   parts="[servers,system]")
    assert code == 0, text
    assert len(report["parts"]["servers"]["rows"]) == 1 and server.calls >= 6
    system = report["parts"]["system"]   # the disk is judged against the campaign's remaining episodes
    assert system["remaining_episodes"] == len((campaign / "plan.csv").read_text().splitlines()) - 1
    assert 0 < system["disk_needed_gib"] < system["disk_free_gib"]
    assert system["version lerobot"] and system["clock_utc"]
    assert any(i["part"] == "system" and i["name"] == "disk" and "remaining episodes need about" in i["message"]
               for i in report["items"])


def test_parts_runs_only_the_named_parts_and_says_so(lab, capsys):
    """`parts=[servers]` after a policy server moved: the bus is not touched, no camera opens, the record
    and the next run's pre-flight say the check was partial; an unknown part is refused before anything."""
    from spabench.bench_record import CheckSummary

    with EmulatedBus() as bus, WaveServer() as server:
        code, text, report = check(lab, bus, "partial", capsys, "policy=pi05", f"policy.port={server.port}",
                                   f"policy.horizon={HORIZON}", f"policy.execute_steps={HORIZON}")
        assert bus.instruction_counts == {}, "the bus was touched by a servers-only check"
    assert code == 0, text
    assert report["only"] == ["servers"] and set(report["parts"]) == {"servers"} and report["pictures"] == {}
    assert "bench check: bus" not in text and "bench check: cameras" not in text
    assert "only these parts: servers" in (lab / "partial" / "report.html").read_text()
    assert CheckSummary.from_report(report, "partial").line().startswith("last bench check (only servers) ")
    with EmulatedBus() as bus:
        code = main(["bench", "check", "bench=so101_emulated", f"bench.port={bus.port}", "parts=[servers,arm]",
                     f"out={lab / 'refused'}"])
        assert bus.instruction_counts == {}
    assert code == 2 and not (lab / "refused").exists()
    assert "parts=['servers', 'arm']: unknown part 'arm' (allowed: a list of bus, cameras, servers, system" in \
        capsys.readouterr().err
