"""Policy servers speaking the openpi websocket protocol (the twin's scripted policy, LeRobot checkpoints)."""
