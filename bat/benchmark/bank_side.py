"""The built-in benchmark's side of the Stage Bank, the stage probe, the practice corpus and the rollout bench: the
environment they open on a built-in instance (the one place outside `bat.benchmark.env` and the plug-in adapter that
constructs a `StagedEnv`) and the built-in names their recovery checks read.

Reads: the instance (or none, for a restored workspace), the workspace and grader folders, the config and the prefix
records. Writes: what the environment's tools write in the workspace.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

PILOT_STAGE = "S3"
"""The built-in stage of pilots: a recovery run's state starts there, right after its first failed pilot check."""
PILOT_TOOL = "run_model"
"""The tool a pilot (and E2E validation pass, lambda_validate) runs."""
CHECK_TOOL = "check_outputs"
"""The tool whose unclean result reveals a failed pilot."""


def open_instance(
    instance: Any, workspace: str | Path, grader: str | Path, config: Any, prior_records: Sequence[Any] = ()
) -> Any:
    """A built-in `StagedEnv` on `instance` (None: the workspace is already there, e.g. a restored state package)
    with `prior_records` as the upstream records; call `reset()` next."""
    from bat.benchmark.env import StagedEnv

    return StagedEnv(instance, workspace, grader, config, prior_records=list(prior_records) or None)
