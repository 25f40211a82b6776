"""S5 tool: submit — copy every case's output into submission/ and write submission/manifest.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bat.benchmark import workspace_files as wf
from bat.benchmark.tools.common import ToolError, output_path, read_spec, scratch_write
from bat.benchmark.tools.infer import inspect_outputs


def submit(workspace: Path) -> dict[str, Any]:
    """Assemble the submission from outputs/ (ends the episode); reports missing and invalid cases."""
    spec = read_spec(workspace)
    present = [c for c in spec["cases"] if output_path(workspace, spec, c).exists()]
    if not present:
        raise ToolError("nothing to submit: outputs/ holds no outputs (run_model first)")
    dest = Path(workspace) / wf.SUBMISSION_DIR
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir()
    for case in present:
        shutil.copyfile(output_path(workspace, spec, case), output_path(workspace, spec, case, wf.SUBMISSION_DIR))
    issues, degenerate, _ = inspect_outputs(workspace, spec, present)
    missing = [c for c in spec["cases"] if c not in present]
    manifest = {
        "instance_id": spec["instance_id"],
        "cases": {c: output_path(workspace, spec, c, wf.SUBMISSION_DIR).name for c in present},
        "missing": missing,
    }
    scratch_write(dest / wf.MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
    text = f"submitted {len(present)}/{len(spec['cases'])} cases" + (
        f"; {len(issues)} with format problems" if issues else ""
    )
    return {
        "text": text,
        "meta": {"complete": not missing, "missing": missing, "invalid": sorted(issues), "degenerate": degenerate},
    }
