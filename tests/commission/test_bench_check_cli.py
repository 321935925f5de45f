"""`bench check` reads the policy group only when given (issue 37): a check of the arm alone names no
server, `policy=<card>` (as at `run`) names one; --help says so.

Failed before: the command table had no optional groups, so every check would have timed the
default card's server (scripted_compositional) or none could be named."""

from __future__ import annotations

from spabench.cli.commands import COMMANDS
from spabench.cli.main import command_help, compose


def test_the_policy_group_is_built_only_when_given():
    command = COMMANDS["bench check"]
    assert compose(command, ["bench=so101"]).policy is None
    cfg = compose(command, ["bench=so101", "policy=pi05", "policy.port=8001"])
    assert cfg.policy.name == "pi05" and cfg.policy.port == 8001
    assert compose(command, ["bench=so101", "policy.port=8002"]).policy.port == 8002   # the default card, moved
    assert "policy    default none (read only when given)" in command_help(command)
