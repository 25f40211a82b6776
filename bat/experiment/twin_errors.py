"""The errors a twin study's units raise: each message names the file and what to do, and the CLI reports them with
exit 2 instead of a traceback."""

from __future__ import annotations


class TwinUnitError(ValueError):
    """A unit that cannot be recorded (not finished on this disk, or recorded otherwise): the message names the file
    and what to do."""


class TwinReplayError(TwinUnitError):
    """A candidate that cannot be rebuilt as asked; the message names the file and what to do (a unit error too, so
    recording a replayed e2e unit reports it as one instead of stopping)."""
