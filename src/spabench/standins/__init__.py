"""Scripted stand-in policies: NOT VLAs, hand-written controllers that let the harness run end to end
on the MuJoCo twin without a learned policy.

They read the twin's privileged scene state (`observation/privileged`, which only the sim bench sends
and only the scripted policy cards forward) and are served like any real policy, over the openpi
websocket protocol (`spabench serve scripted`, or the demo). Nothing in the twin (spabench.sim)
imports this package; the stand-in knows the twin only through that payload and the arm's MJCF.

  ScriptedPolicy   spabench.standins.scripted    the openpi infer/reset functions
  Grounder         spabench.standins.grounding   instruction -> what to move where (by its mode)
  Planner          spabench.standins.planner     closed-loop pick-and-place joint targets
  ArmKinematics    spabench.standins.kinematics  inverse kinematics on the arm's MJCF (MuJoCo)
  build_server     spabench.standins.serve       `spabench serve scripted`
"""

import os

# The stand-in renders nothing, but a process that also hosts the twin (the demo, the tests) may import
# MuJoCo here first, and MuJoCo picks its GL backend at that first import: the twin's headless choice.
os.environ.setdefault("MUJOCO_GL", "egl")
