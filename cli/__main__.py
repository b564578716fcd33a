"""`python -m deepresearch.cli`: the `deepresearch` command."""

from deepresearch.cli import run_command

run_command()
