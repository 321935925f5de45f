"""A lab's own folder (`config_dir=DIR`): `spabench init DIR` makes one from the installed package."""
