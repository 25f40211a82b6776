"""Aggregates on the training side, raw runs + manifest on the held-out side (or discarded), manifest digests."""

import pytest

from bat.evaluate.manifest import build_manifest, checkpoint_digest, manifest_digest
from bat.evaluate.store import (
    aggregate_path,
    heldout_manifest_path,
    heldout_runs_path,
    load_aggregate,
    read_heldout_runs,
    write_aggregate,
    write_heldout,
)
from bat.schemas.evaluation import EvalAggregate, EvalManifest, EvalRun, RunEntry
from bat.state.atomic import read_json
from bat.state.layout import RunLayout


def _manifest(ckpt="c", digest="d"):
    return build_manifest(
        round_index=2,
        split="controller",
        checkpoint=ckpt,
        digest=digest,
        suite_version="s",
        harness_version="h",
        config_hash="x",
        run_seed=42,
        evaluator="builtin",
        sampling={"temperature": 0.7},
        runs=[
            RunEntry(run_id="b-1", track="b", repeat=1, seed=5, instance_id="i2"),
            RunEntry(run_id="a-0", track="a", repeat=0, seed=4, instance_id="i1"),
        ],
    )


def test_manifest_is_complete_and_digest_ignores_creation_time(tmp_path):
    m = _manifest()
    assert [r.run_id for r in m.runs] == ["a-0", "b-1"]  # sorted by track, repeat
    assert m.code_version and m.run_seed == 42 and m.suite_version == "s" and m.harness_version == "h"
    later = m.model_copy(update={"created_at": "2099-01-01T00:00:00+00:00"})
    assert manifest_digest(m) == manifest_digest(later)
    assert manifest_digest(m) != manifest_digest(_manifest(digest="other"))


def test_checkpoint_digest(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"w1")
    first = checkpoint_digest(ckpt)
    (ckpt / "model.safetensors").write_bytes(b"w2")
    assert checkpoint_digest(ckpt) != first and len(first) == 64
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoint_digest(tmp_path / "missing")


def test_sides_and_raw_retention(tmp_path):
    layout = RunLayout(tmp_path / "run").ensure()
    runs = [
        EvalRun(
            run_id="a-0",
            split="controller",
            track="a",
            repeat=0,
            seed=4,
            instance_id="HELDOUT-ID",
            stages={"S1": 1.0},
            task=1.0,
            agentic=1.0,
            overall=1.0,
        )
    ]
    written = write_heldout(layout, 2, "controller", runs, _manifest(), keep_raw=True)
    assert all(str(p).startswith(str(layout.heldout_dir)) for p in written)
    assert read_heldout_runs(layout, 2, "controller") == runs
    assert (
        EvalManifest.model_validate(read_json(heldout_manifest_path(layout, 2, "controller"))).runs[0].instance_id
        == "i1"
    )
    write_heldout(layout, 2, "controller", runs, _manifest(), keep_raw=False)
    assert not heldout_runs_path(layout, 2, "controller").exists()  # discarded by config
    assert heldout_manifest_path(layout, 2, "controller").exists()  # the manifest is always kept
    agg = EvalAggregate(
        round=2,
        split="controller",
        checkpoint="c",
        checkpoint_digest="d",
        suite_version="s",
        harness_version="h",
        manifest_digest="m",
        stage_keys=["S1"],
        stages={"S1": 1.0},
        task=1.0,
        agentic=1.0,
        overall=1.0,
        tracks={},
        n_runs=1,
        routable=True,
    )
    path = write_aggregate(layout, agg)
    assert path == layout.phase_dir(2, "evaluate") / "aggregate_controller.json"
    assert "HELDOUT-ID" not in path.read_text()
    assert load_aggregate(layout, 2) == agg and load_aggregate(layout, 3) is None
    with pytest.raises(ValueError, match="valid"):
        aggregate_path(layout, 2, "train")
