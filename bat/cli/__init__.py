"""The `bat` command line; see `bat.cli.main`."""

from bat.cli.main import main

__all__ = ["main"]
