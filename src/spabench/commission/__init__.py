"""`spabench bench check`: the bench commissioned in one command, kept as a dated record."""
