"""Issue 35: the two documented `run` lines that failed, run through the command line itself.

`test_docs_commands.py` composes every `run` line without running it; these two run for real (only
the placeholders mapped, the host to loopback), so they stay checked whatever the config layer does
inside. Measured before: README's per-card example (`cards.pi05.host=... cards.vla0.port=...`) was refused
on a `spabench_full` campaign (blinded, no vla0); policies/lerobot.md's `cards.<card>.horizon=<chunk_size>`
with a chunk under 100 was refused (execute_steps 100 > horizon).
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from pathlib import Path

import pytest

from spabench.cli.main import main
from tests.support.campaigns import card_aliases, plan_smoke
from tests.support.cli_servers import cli_server, free_port
from tests.support.tiny_act import CHUNK_SIZE, tiny_act_checkpoint  # noqa: F401 (fixture)

REPO = Path(__file__).resolve().parents[2]


def documented_line(doc: Path, start: str) -> list[str]:
    """The words after `spabench` of the one inline `spabench run ...` span in `doc` that starts so."""
    spans = [s for s in re.findall(r"`(spabench run [^`]*)`", doc.read_text()) if s.startswith(start)]
    assert len(spans) == 1, spans
    return shlex.split(spans[0])[1:]


@pytest.mark.bench   # `run` on the robot's bench type (its config is LeRobot's)
def test_the_readme_per_card_example_runs_on_spabench_full(tmp_path, capsys):
    """The per-card example, on the campaign the README's protocol is: its cards are accepted (by alias)
    and the run gets as far as the first policy server, which is not there (a test machine has none)."""
    words = documented_line(REPO / "README.md", "spabench run campaign=DIR cards.")
    campaign = tmp_path / "full"
    assert main(["plan", "campaign=spabench_full", f"out={campaign}"]) == 0
    # hosts to loopback and the card ports to free ones: nothing listens, the server check fails quickly
    args = [re.sub(r"host=.*", "host=127.0.0.1", re.sub(r"port=\d+", f"port={free_port()}", w))
            for w in words]
    args = [f"campaign={campaign}" if w == "campaign=DIR" else w for w in args]
    assert any(w.startswith("cards.") for w in args), args
    capsys.readouterr()
    assert main(args) == 2
    said = capsys.readouterr().out
    assert "cannot reach the policy server of policy 'P" in said, said
    with sqlite3.connect(campaign / "ledger.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 0


@pytest.mark.slow
@pytest.mark.bench
def test_the_lerobot_page_run_line_runs_a_chunk_under_100(tmp_path, tiny_act_checkpoint, capsys):  # noqa: F811
    """policies/lerobot.md: `spabench serve lerobot` with a checkpoint whose chunk is 10, then its `run`
    line with `<chunk_size>` 10 on a blinded campaign with act_local (planned on the twin, 1 s): the
    trial runs and completes. Without the horizon the server check refuses it (the card says 100)."""
    pytest.importorskip("mujoco")
    words = documented_line(REPO / "policies" / "lerobot.md", "spabench run campaign=DIR cards.")
    campaign = plan_smoke(tmp_path, policies=[{"name": "act_local", "card": "act_local", "timer_s": 1.0}])
    alias = card_aliases(campaign)["act_local"]
    assert alias != "act_local"   # blinded: the line addresses it by alias
    mapping = {"DIR": str(campaign), "<alias>": alias, "<host>": "127.0.0.1", "<chunk_size>": str(CHUNK_SIZE)}
    args = [re.sub("|".join(map(re.escape, mapping)), lambda m: mapping[m.group(0)], w) for w in words]
    assert any(w.startswith("cards.") and w.endswith(f".horizon={CHUNK_SIZE}") for w in args), args
    small = ["bench.cameras.middle.width=64", "bench.cameras.middle.height=48",
             "bench.cameras.wrist.width=64", "bench.cameras.wrist.height=48"]
    with cli_server("lerobot", f"checkpoint={tiny_act_checkpoint}", log=tmp_path / "serve.log") as port:
        capsys.readouterr()
        without = [w for w in args if ".horizon=" not in w]
        assert main([*without, f"cards.{alias}.port={port}", *small]) == 2   # the card's horizon is 100
        said = capsys.readouterr().out
        assert f"card field 'horizon' is 100, the server's 'chunk_size' is {CHUNK_SIZE}" in said, said
        assert main([*args, f"cards.{alias}.port={port}", *small]) == 0, capsys.readouterr().out
    with sqlite3.connect(campaign / "ledger.sqlite") as conn:
        assert conn.execute("SELECT status, dry_run FROM attempts").fetchall() == [("complete", 0)]
