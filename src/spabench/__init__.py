"""spabench: a real-robot evaluation harness for VLA policies on the SO-101 arm (Spa-Bench protocol)."""

__version__ = "0.1.0"   # the one place: pyproject.toml reads it (dynamic version)
