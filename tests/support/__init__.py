"""Stand-ins for hardware and remote services used by tests (also importable by benchmarks/)."""
