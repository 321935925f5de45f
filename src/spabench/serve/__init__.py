"""Policy servers speaking the openpi websocket protocol (LeRobot checkpoints here; the
scripted stand-in's `serve scripted` lives with it in spabench.standins)."""
