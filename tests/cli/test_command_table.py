"""The command table names the functions it dispatches to (issue 35: "the CLI dispatches to command
functions it imports, not by strings, so a reader (and a tool) can follow argv to the command"), and
loading it stays cheap: no LeRobot, torch, MuJoCo, matplotlib, scipy, statsmodels or pandas until a command runs.

Failed before: every target was a "module:function" string resolved with importlib at dispatch."""

from __future__ import annotations

import inspect
import subprocess
import sys

from spabench.cli.commands import COMMANDS
from spabench.cli.main import main

HEAVY = ("torch", "lerobot", "mujoco", "matplotlib", "scipy", "statsmodels", "pandas", "h5py", "av", "uvicorn", "psycopg")


def test_every_command_is_a_function_of_spabench_taking_one_config():
    for name, command in COMMANDS.items():
        target = command.target
        assert inspect.isfunction(target), f"{name}: {target!r} is not a function"
        assert target.__module__.startswith("spabench."), (name, target.__module__)
        params = list(inspect.signature(target).parameters.values())
        assert params and params[0].name == "cfg", (name, params)
        assert all(p.default is not inspect.Parameter.empty for p in params[1:]), (name, params)


def test_loading_the_table_imports_no_heavy_library():
    code = ("import sys; import spabench.cli.commands; "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"importing the command table loaded {out.strip()}"


def test_argv_reaches_the_named_function(monkeypatch, tmp_path):
    """The dispatcher calls the table's function object: replacing it in the table is what runs."""
    import dataclasses

    seen = []
    command = COMMANDS["ledger status"]
    monkeypatch.setitem(COMMANDS, "ledger status",
                        dataclasses.replace(command, target=lambda cfg: seen.append(cfg.campaign_dir) or 0))
    (tmp_path / "ledger.sqlite").write_bytes(b"")
    assert main(["ledger", "status", f"campaign={tmp_path}"]) == 0
    assert seen == [tmp_path.resolve()]
