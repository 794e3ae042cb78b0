"""tooltap demo (in progress)."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def main(args: argparse.Namespace) -> int:
    raise SystemExit("tooltap demo: not built yet")
