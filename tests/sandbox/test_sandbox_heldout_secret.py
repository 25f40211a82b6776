"""Agent code in a real bubblewrap sandbox, given a held-out workspace, can import `bat.benchmark` and knows the
config, yet cannot rebuild the instance's truth: the run's held-out secret is neither derivable nor mounted.

A control on the host shows the same search finds the instance once the secret is known, so the attack is real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bat.benchmark import heldout_suite, materialize, suite_instance
from bat.benchmark.secret import run_secret
from bat.config.root import BatConfig
from bat.config.sandbox import SandboxConfig
from bat.sandbox import Sandbox, bwrap_available
from bat.state.layout import RunLayout

TRACKS = ["vqa", "classification"]

ATTACK = r"""
import json
from pathlib import Path
from bat.benchmark import SPLITS, generate_instance, heldout_suite, suite_instance
from bat.benchmark.secret import HeldoutSecret, read_secret
from bat.config.root import BatConfig

spec = json.loads(Path("task/spec.json").read_text())
cfg = BatConfig.model_validate(json.loads({CONFIG!r}))
found = []
try:
    read_secret({SECRET_PATH!r})
    found.append("read the secret file")
except Exception as exc:
    print("NOSECRET", type(exc).__name__)
guesses = [HeldoutSecret("0" * 64), HeldoutSecret.from_text(""), HeldoutSecret.from_text(str(cfg.benchmark.heldout_seed))]
for guess in guesses:
    for split in SPLITS:
        for run in heldout_suite(cfg, split, secret=guess):
            inst = suite_instance(run, cfg)
            if inst.instance_id == spec["instance_id"] or inst.case_ids == spec["cases"]:
                found.append(f"suite under a guessed secret: {{inst.truths}}")
suffix = spec["instance_id"].rsplit("-", 1)[-1]
for seed in (int(suffix, 16), cfg.benchmark.heldout_seed):
    inst = generate_instance(spec["track"], "heldout", seed, config=cfg.benchmark)
    if inst.case_ids == spec["cases"]:
        found.append(f"seed from the id: {{inst.truths}}")
print("FOUND" if found else "NOTFOUND", found)
"""


@pytest.fixture()
def heldout_run(tmp_path: Path):
    """A run's test-split instance materialised as a sandbox workspace, its grader dir beside it."""
    cfg = BatConfig.model_validate({"benchmark": {"tracks": TRACKS, "repeats": 2}})
    layout = RunLayout(tmp_path / "state" / "run").ensure()
    secret = run_secret(layout)
    run = heldout_suite(cfg, "test", secret=secret)[1]
    instance = suite_instance(run, cfg)
    workspace, grader = materialize(instance, tmp_path / "ws", tmp_path / "grader")
    return cfg, layout, secret, instance, workspace, grader


def test_agent_code_in_bwrap_cannot_rebuild_heldout_truth(heldout_run) -> None:
    if not bwrap_available():
        pytest.skip("bubblewrap is not installed or cannot create namespaces here (apt-get install bubblewrap)")
    cfg, layout, secret, instance, workspace, grader = heldout_run
    code = ATTACK.format(CONFIG=json.dumps(cfg.model_dump(mode="json")), SECRET_PATH=str(layout.heldout_secret))
    sandbox = Sandbox(
        workspace, SandboxConfig(runtime="bwrap", timeout_s=120, memory_mb=4096), protected_paths=[grader]
    )
    record = sandbox.execute_code("python", code, stage="S3")
    assert record.ok, record.model_dump()
    assert "NOSECRET FileNotFoundError" in record.stdout, record.stdout  # the state directory is not mounted
    assert "NOTFOUND []" in record.stdout, record.stdout
    assert secret.key not in record.stdout + record.stderr
    answers = [str(v) for v in instance.truths.values()]
    assert instance.case_ids and all(f"'{case}': " not in record.stdout for case in instance.case_ids), answers


def test_the_same_search_finds_the_instance_with_the_secret(heldout_run) -> None:
    cfg, _, secret, instance, workspace, _ = heldout_run
    spec = json.loads((workspace / "task" / "spec.json").read_text())
    matches = [
        suite_instance(run, cfg)
        for split in ("controller", "final", "test")
        for run in heldout_suite(cfg, split, secret=secret)
    ]
    match = [inst for inst in matches if inst.instance_id == spec["instance_id"]]
    assert len(match) == 1 and match[0].case_ids == spec["cases"] and match[0].truths.keys() == instance.truths.keys()
    assert secret.key not in (workspace / "task" / "spec.json").read_text()
    assert str(instance.seed) not in "".join(
        p.read_text(errors="ignore")
        for p in workspace.rglob("*")
        if p.is_file() and p.suffix in (".json", ".md", ".txt")
    )
