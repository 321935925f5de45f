"""Issue 17: every `spabench ...` line in README.md, CONTRIBUTING.md, policies/*.md, hardware/*.md, the
README `spabench init` puts into a lab folder, and the conf comments runs as written.

Each line is extracted (fenced code blocks, and inline code spans that give arguments), its
placeholders mapped (DIR and episodes/... to one campaign planned and run once on the twin with the
scripted stand-in, OUT to new folders, ID to its attempt, FILE.csv to an outcomes CSV, hosts to
loopback), and then run through the real CLI (`spabench.cli.main.main`) from a temporary working
directory, which holds the lab folder `spabench init lab` makes (`config_dir=lab`). Lines that would not return (a server, the console), need a lab's machine (a PostgreSQL
server, a GPU checkpoint) or the robot are composed and validated exactly as the command would
(every key accepted by that command and typed), without starting; `run` lines are composed and their
card overrides loaded against the campaign. A line fails when the CLI refuses it or returns non-zero.
"""

from __future__ import annotations

import io
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from spabench.cli.commands import CAMPAIGN_FOLDER
from spabench.cli.main import compose, fill_positionals, main, split_command
from spabench.errors import SpabenchError
from tests.support.campaigns import by_alias, card_aliases, plan_smoke
from tests.support.cli_servers import cli_server

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CSV = REPO / "tests" / "analysis" / "data" / "example_outcomes.csv"
# commands that serve until stopped, or need what no test machine has: composed and validated only
COMPOSE_ONLY = ("serve lerobot", "serve scripted", "console", "demo", "run", "bench check")   # bench check: the robot


@dataclass(frozen=True)
class DocLine:
    where: str     # file:line
    text: str      # the command line as written


def doc_files(root: Path = REPO) -> list[Path]:
    return [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "policies").glob("*.md")),
            *sorted((root / "hardware").glob("*.md")), root / "src" / "spabench" / "lab" / "template" / "README.md"]


def _spans(text: str) -> list[str]:
    return [m for m in re.findall(r"`(spabench [^`]*)`", text)]


def _is_line(text: str) -> bool:
    """A command line (arguments given), not a mention of a command or the usage template."""
    words = text.split()
    return "<command>" not in text and any("=" in w or w == "..." for w in words[1:])


def extract(files: list[Path], conf: Path | None = REPO / "conf") -> list[DocLine]:
    out: list[DocLine] = []
    for path in files:
        block, pending, start = False, "", 0
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip().startswith("```"):
                block = not block
                continue
            if block:
                text = line.strip().removeprefix("$ ")
                if pending:
                    pending += " " + text
                elif text.startswith("spabench "):
                    pending, start = text, n
                else:
                    continue
                if pending.endswith("\\"):
                    pending = pending[:-1].rstrip()
                    continue
                out.append(DocLine(f"{path.name}:{start}", pending))
                pending = ""
            else:
                out += [DocLine(f"{path.name}:{n}", s) for s in _spans(line) if _is_line(s)]
    if conf is not None:
        for path in sorted(conf.rglob("*.yaml")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if "#" in line:
                    comment = line[line.index("#"):]
                    out += [DocLine(f"{path.relative_to(conf.parent)}:{n}", s) for s in _spans(comment) if _is_line(s)]
    return out


# ---------------------------------------------------------------------------- the stand-ins
class Stage:
    """One twin campaign with a complete, scored attempt, shared by every line."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        assert main(["init", str(tmp / "lab")]) == 0   # the lab folder the lines name as config_dir=lab
        self.campaign = plan_smoke(tmp, "twin", bench="sim", policies=[   # 1 s rollouts, planned
            {"name": "scripted_compositional", "card": "scripted_compositional", "timer_s": 1.0}])
        # `run` lines are composed against a blinded robot campaign of two cards, one of them the
        # LeRobot checkpoint's (act_local): its cards are P1 and P2, as a lab's campaign names them
        self.run_campaign = plan_smoke(tmp, "robot", bench="so101", policies=[
            {"name": "scripted_compositional", "card": "scripted_compositional"},
            {"name": "act_local", "card": "act_local"}])
        # the stand-in as a lab serves it: `spabench serve scripted` (tests/support/cli_servers)
        with cli_server("scripted", "policy=scripted_compositional", log=tmp / "serve.log") as port:
            code = main(["run", f"campaign={self.campaign}", "max_trials=1",
                         *by_alias(self.campaign, [f"cards.scripted_compositional.port={port}"])])
        assert code == 0
        from spabench.ledger import Ledger

        with Ledger.open(self.campaign, readonly=True) as ledger:
            self.attempt = ledger.attempts()[0].attempt_id
            self.bench_id = ledger.attempts()[0].bench_id   # the bench a `bench_dirs.B=PATH` line names
        self.n = 0

    def campaign_for(self, line: DocLine) -> Path:
        """The shared campaign (the robot one for a `run` line), or a copy of it for a line that changes
        it for good (invalidate=true)."""
        if line.text.startswith("spabench run "):
            return self.run_campaign
        if "invalidate=" not in line.text:
            return self.campaign
        copy = Path(self.fresh("campaign"))
        shutil.copytree(self.campaign, copy)
        return copy

    def dataset(self) -> str:
        """A tiny LeRobotDataset v3 written with LeRobot's own API (`import lerobot dataset=` lines)."""
        root = self.tmp / "lerobot_dataset"
        if not root.exists():
            from tests.support.lerobot_datasets import make_dataset

            make_dataset(root, cameras=("front", "wrist"))
        return str(root)

    def cells(self) -> str:
        """A cells file for that dataset (`cells=` lines): its three episodes in Object State ID cells."""
        path = self.tmp / "cells.csv"
        path.write_text("episode_index,task,condition,evaluation_id\n0,object_state,id,E1\n"
                        "1,object_state,id,E2\n2,object_state,id,E3\n")
        return str(path)

    def fresh(self, stem: str = "out") -> str:
        self.n += 1
        return str(self.tmp / f"{stem}{self.n}")


# <chunk_size>: a chunk under act_local's default of 100 (tests/support/tiny_act.py's is 10)
VALUE_MAP = {"<host>": "127.0.0.1", "<gpu-host>": "127.0.0.1", "<chunk_size>": "10", "URL": "sqlite",
             "...": "re-watched", '"..."': "re-watched"}


def arguments(line: DocLine, stage: Stage) -> list[str]:
    """The line's words with placeholders mapped (`[...]` optional parts are kept: they are documented too)."""
    words = [w for w in shlex.split(line.text.split(" #")[0])[1:] if w != "..."]
    words = [w[1:-1] if w.startswith("[") and w.endswith("]") and "=" in w and not w.startswith("['") else w
             for w in words]
    if words[:1] in (["--help"], ["--version"]):
        return words
    command, _ = split_command([w for w in words if w not in ("--help", "-h")] or ["?"])
    campaign = stage.campaign_for(line)
    out: list[str] = []
    for word in words:
        key, sep, value = word.partition("=")
        if "<alias>" in key:   # `cards.<alias>.field`: the LeRobot checkpoint's card, by its alias
            key = key.replace("<alias>", card_aliases(campaign).get("act_local", "<alias>"))
        bare = key.lstrip("+~")
        if not sep:   # a positional (ledger copy SRC DST)
            out.append(str(stage.campaign) if word == "SRC" else stage.fresh("copy") if word == "DST" else word)
            continue
        value = VALUE_MAP.get(value, value)
        if bare == "campaign" and command.campaign == CAMPAIGN_FOLDER:
            value = str(campaign)
        elif bare == "out":
            value = stage.fresh(Path(value).name or "out")
        elif bare == "attempt":
            value = stage.attempt
        elif bare == "outcomes":   # a file the checkout holds runs as written (Combining labs), else the example
            value = str(REPO / value) if (REPO / value).is_file() else str(EXAMPLE_CSV)
        elif bare.startswith("bench_dirs."):
            key, value = f"{key[: len(key) - len(bare)]}bench_dirs.{stage.bench_id}", str(stage.campaign)
        elif bare == "dataset":
            value = stage.dataset()
        elif bare == "cells":
            value = stage.cells()
        elif bare == "checkpoint":
            value = str(stage.tmp)
        elif bare == "ledger" and value.startswith("postgresql://"):
            pass   # composed only (a lab's server)
        out.append(f"{key}={value}")
    if " ... " in f" {line.text} ":   # `spabench score ... invalidate=true`: the words left out
        given = {w.partition("=")[0] for w in out}
        out += [f"campaign={campaign}"] if "campaign" not in given else []
        if command.name == "score":
            out += [f"{k}={v}" for k, v in (("attempt", stage.attempt), ("reason", "re-watched")) if k not in given]
    return out


def check_line(line: DocLine, stage: Stage) -> str | None:
    """None when the line runs as written (its placeholders mapped), else why not."""
    args = arguments(line, stage)
    if args[:1] in (["--help"], ["--version"]):
        return None if main(args) == 0 else "exit non-zero"
    try:
        command, overrides = split_command(args)
    except SpabenchError as exc:
        return str(exc)
    overrides = fill_positionals(command, overrides)
    needs_lab = any(w.startswith("ledger=postgresql") for w in overrides)
    if command.name in COMPOSE_ONLY or needs_lab:
        try:
            cfg = compose(command, overrides)
            if command.name == "run":
                from spabench.ledger import Ledger
                from spabench.rollout.policies import load_cards

                with Ledger.open(stage.run_campaign, readonly=True) as ledger:
                    trials = ledger.trials()
                load_cards(list(dict.fromkeys(t.card for t in trials)), cfg.cards, cfg.group_dirs("policy"),
                           aliases={t.alias: t.card for t in trials},
                           blind=any(t.alias != t.policy for t in trials))   # as `run` loads them
        except SpabenchError as exc:
            return str(exc)
        return None
    err, out = io.StringIO(), io.StringIO()
    old = sys.stderr, sys.stdout, sys.stdin
    # a rescore prompts: the rater answers "y" and a note
    sys.stderr, sys.stdout, sys.stdin = err, out, io.StringIO("y\nre-watched\n")
    try:
        code = main(args)
    finally:
        sys.stderr, sys.stdout, sys.stdin = old
    return None if code == 0 else f"exit {code}: {err.getvalue().strip()} {out.getvalue().strip()[-500:]}"


@pytest.fixture(scope="module")
def stage(tmp_path_factory):
    pytest.importorskip("mujoco")
    return Stage(tmp_path_factory.mktemp("docs"))


LINES = extract(doc_files())


def test_the_docs_have_command_lines():
    wheres = {line.where.split(":")[0] for line in LINES}
    assert len(LINES) >= 30 and {"README.md", "lerobot.md"} <= wheres and any(w.startswith("conf/") for w in wheres)
    lab_way = {"spabench init lab", "spabench plan campaign=pilot config_dir=lab out=pilot"}
    assert lab_way <= {line.text for line in extract([REPO / "README.md"], conf=None)}   # into a LeRobot environment
    assert lab_way - {"spabench init lab"} <= {line.text for line in extract([doc_files()[-1]], conf=None)}  # the lab's README


@pytest.mark.parametrize("line", LINES, ids=[f"{line.where} {line.text[:60]}" for line in LINES])
def test_every_documented_line_runs(line, stage, monkeypatch, capsys):
    monkeypatch.chdir(stage.tmp)
    problem = check_line(line, stage)
    assert problem is None, f"{line.where}: `{line.text}`: {problem}"


def test_a_broken_line_fails(stage, tmp_path, monkeypatch):
    """A deliberately broken copy of the README (a key misspelt, a key the command does not read, a
    flag that is not a boolean): the check fails on exactly those lines. Only the lines the copy changed
    are run again: every unchanged line is one `test_every_documented_line_runs` already runs."""
    monkeypatch.chdir(stage.tmp)
    copy = tmp_path / "README.md"
    text = (REPO / "README.md").read_text()
    broken = (text.replace("`spabench power half_width=0.1`", "`spabench power halfwidth=0.1`")
                  .replace("`spabench ledger status campaign=DIR`", "`spabench ledger status campaign=DIR crf=10`")
                  .replace("[invalidate=true]", "[invalidate=maybe]"))
    assert broken != text
    copy.write_text(broken)
    unchanged = {line.text for line in extract([REPO / "README.md"], conf=None)}
    results = {line.text: check_line(line, stage) for line in extract([copy], conf=None)
               if line.text not in unchanged}
    failing = {t for t, why in results.items() if why is not None}
    assert failing == {"spabench power halfwidth=0.1", "spabench ledger status campaign=DIR crf=10",
                       'spabench score campaign=DIR attempt=ID reason="..." [invalidate=maybe]'}, results
    shutil.rmtree(tmp_path, ignore_errors=True)
