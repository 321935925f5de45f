"""The twin's home pose, in a module of its own so that what only needs the pose stays light.

SimRobotConfig (spabench.sim.config_sim_robot) defaults to it, and the rendered scene reference
(spabench.sim.reference) puts the arm there. The reference is drawn in a background process at low
priority (spabench.operator.render_ahead); importing the pose from the config module imported
LeRobot's robot classes and with them torch, about 2 s of CPU before that process drew anything,
more than the drawing itself, and on a loaded machine a low-priority process gets only a fraction
of a core.
"""

from __future__ import annotations

DEFAULT_SIM_HOME: dict[str, float] = {
    # upper arm leaning back, forearm up, gripper level above the base: every joint-space path
    # from here to a grasp stays high over the table, and no camera's view of the workspace is hidden
    "shoulder_pan": 0.0,
    "shoulder_lift": -45.0,
    "elbow_flex": -45.0,
    "wrist_flex": 90.0,
    "wrist_roll": 0.0,
    "gripper": 10.0,
}
