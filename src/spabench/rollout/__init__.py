"""The rollout: control loop, the EMA action filter it applies, stop controls, observers and the
`spabench run` session and command.

Import from the submodules (`spabench.rollout.loop`, `.ema`, `.types`, `.observers`, `.session`,
`.commands`); this file stays light so that loading it never pulls in LeRobot or a network stack.
"""
