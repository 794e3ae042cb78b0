"""The `tooltap` command: cli, run, the `-s` script, demo."""
