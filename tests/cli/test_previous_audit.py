"""Issue 35, still open from the previous audit.

Measured on main before: `console operator.console.port=0` printed port 0 (not the port it listens
on); `serve scripted policy=scripted_memorising` served the compositional stand-in; `make demo out=DIR`
ran `spabench demo` without out=; with blind aliases on, `cards.<real card name>.port=N` was accepted
and the bench screen then named that card by its alias (tying the policy to its alias).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tests.support.campaigns import card_aliases, ledger_count, plan_smoke
from tests.support.cli_servers import cli_server, free_port, server_metadata

from spabench.cli.main import main

REPO = Path(__file__).resolve().parents[2]
TWO = [{"name": "scripted_compositional", "card": "scripted_compositional", "timer_s": 1.0},
       {"name": "scripted_memorising", "card": "scripted_memorising", "timer_s": 1.0}]


@pytest.mark.slow
def test_console_on_port_0_prints_the_port_it_listens_on(tmp_path):
    import httpx

    campaign = plan_smoke(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "spabench.cli.main", "console", f"campaign={campaign}",
                             "operator.console.port=0"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    lines: list[str] = []
    printed = threading.Event()

    def read() -> None:
        for line in proc.stdout:   # type: ignore[union-attr]
            lines.append(line)
            if "console for" in line:
                printed.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert printed.wait(60), "".join(lines)
        said = next(line for line in lines if "console for" in line)
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", said).group(1))  # type: ignore[union-attr]
        assert port != 0, said
        assert httpx.get(f"http://127.0.0.1:{port}/api/meta", timeout=10).status_code == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, "".join(lines)   # Ctrl-C ends it as before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize("args,mode", [(["policy=scripted_memorising"], "memorising"),
                                       (["policy=scripted_state_blind"], "state_blind"),
                                       ([], "compositional"),
                                       (["mode=memorising"], "memorising"),
                                       (["policy=scripted_memorising", "mode=compositional"], "compositional")])
def test_serve_scripted_serves_the_stand_in_its_card_names_unless_mode_says(tmp_path, args, mode):
    """`spabench serve scripted ...` as a lab types it; the stand-in served is the one its metadata names."""
    with cli_server("scripted", *args, log=tmp_path / "serve.log") as port:
        assert server_metadata(port)["policy"] == f"scripted_{mode}", (tmp_path / "serve.log").read_text()


def test_make_demo_passes_out_on(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    out = tmp_path / "my demo"
    shown = subprocess.run(["make", "-n", "demo", f"out={out}"], cwd=REPO, capture_output=True, text=True,
                           timeout=60)
    demo = [line for line in shown.stdout.splitlines() if "spabench demo" in line]
    assert demo == [f".venv/bin/spabench demo 'out={out}'"], shown.stdout + shown.stderr


def test_a_real_card_name_is_refused_with_blind_aliases_without_saying_its_alias(tmp_path, capsys):
    """The refusal of a real card name reads exactly like that of a name not in the campaign, and names
    the aliases only: nothing ties a policy to its alias. Nothing is written."""
    campaign = plan_smoke(tmp_path, policies=TWO)
    events = ledger_count(campaign, "events")
    said = {}
    for name in ("scripted_memorising", "no_such_card"):
        capsys.readouterr()
        assert main(["run", f"campaign={campaign}", f"cards.{name}.port=10001"]) == 2
        captured = capsys.readouterr()
        said[name] = captured.out + captured.err
    assert said["scripted_memorising"] == said["no_such_card"], said   # the key is not even echoed
    assert "with blind aliases on, address cards by alias (P1, P2)" in said["no_such_card"]
    assert not any(w in said["no_such_card"] for w in ("scripted_", "no_such_card", "P2:", "P1:"))
    assert ledger_count(campaign, "attempts") == 0 and ledger_count(campaign, "events") == events
    # by alias both are accepted: the run goes on to the first card's server, at the port given (nothing
    # listens there), and stops before anything is written
    aliases = sorted(card_aliases(campaign).values())
    ports = {alias: free_port() for alias in aliases}
    capsys.readouterr()
    assert main(["run", f"campaign={campaign}", *(f"cards.{a}.port={p}" for a, p in ports.items())]) == 2
    said = capsys.readouterr().out
    assert f"cannot reach the policy server of policy '{aliases[0]}' at ws://127.0.0.1:{ports[aliases[0]]}" in said, said
    assert ledger_count(campaign, "attempts") == 0
