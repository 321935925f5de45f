"""The `spabench` command line: one Hydra-composed config per command, no logic of its own."""
