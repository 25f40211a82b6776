"""A 2-arm x 1-seed experiment on the smoke config (rounds=1) through `bat experiment`, end to end.

Real phases (tiny model, local executor): one shared bootstrap, arms seeded from it, final_test on the retained best.
"""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from bat.benchmark.secret import read_secret
from bat.cli.main import main
from bat.evaluate.manifest import checkpoint_digest
from bat.schemas.evaluation import EvalRun
from bat.state.atomic import read_json
from bat.state.jsonl import read_jsonl
from bat.state.layout import RunLayout

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_arm_experiment_matched_budget_shared_sft(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: t2\nbase_config: {REPO / 'configs' / 'smoke.yaml'}\n"
        "overrides: [run.rounds=1, bank.e2e_per_track=4]\nseeds: [3]\nwide_final_repeats: 3\n"
        f"state_dir: {tmp_path / 'state'}\nout_dir: {tmp_path / 'out'}\n"
        "arms:\n  - {name: grpo, overrides: [curriculum.arm=grpo]}\n  - {name: bicurl, overrides: [curriculum.arm=bicurl]}\n"
    )
    assert main(["experiment", "--config", str(exp)]) == 0

    out = tmp_path / "out"
    results = json.loads((out / "results.json").read_text())
    assert (out / "curves.png").read_bytes()[:8] == (out / "stages.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    readme = (out / "README.md").read_text()
    assert "bat experiment --config" in readme and results["commit"] in readme and "| grpo |" in readme

    # matched budget: same resolved budget, same rollouts and GRPO steps in both arms
    budget = results["budget"]
    assert budget["matched"] and budget["differing_fields"] == []
    runs = {name: arm["seeds"][0] for name, arm in results["arms"].items()}
    assert all(r["status"] == "done" for r in runs.values())
    assert runs["grpo"]["rollouts"] == runs["bicurl"]["rollouts"] > 0
    assert runs["grpo"]["grpo_steps"] == runs["bicurl"]["grpo_steps"] > 0
    assert runs["grpo"]["plan_rows"] == runs["grpo"]["plan_unique_rows"]
    for name, run in runs.items():  # round 1's training signal (reward mean, zero-advantage groups) and route
        assert [s["round"] for s in run["signal"]] == [1] and 0.0 <= run["signal"][0]["reward_mean"] <= 1.0
        assert 0 <= run["signal"][0]["groups_identical"] <= run["signal"][0]["groups"]
        decision = read_json(tmp_path / "state" / "t2" / "seed_3" / name / "round_01" / "route" / "decision.json")
        assert (run["signal"][0]["route"], run["signal"][0]["kl"]) == (decision["action"], decision["kl"])
    assert "train reward by round" in readme and "route by round (KL)" in readme
    assert results["held_out_profile"] is None  # no SFT arm here: no before-RL profile on the held-out splits
    assert results["comparisons_by_split"]["final"] == results["comparisons"]  # final is the report split
    assert "| grpo | 0 -> 1 |" in readme  # held-out stage profile before and after RL

    # one shared SFT checkpoint: evaluated in round 0 and used as round-1 start by both arms
    shared = tmp_path / "state" / "t2" / "seed_3" / "_shared"
    digest = checkpoint_digest(shared / "checkpoints" / "sft" / "export")
    assert results["shared"]["3"]["sft_digest"] == digest
    for run in runs.values():
        assert run["shared_sft_digest"] == run["round0_eval_digest"] == run["round1_start_digest"] == digest
    # the arm's bank is linked from the shared bootstrap, not re-synthesized
    arm_root = tmp_path / "state" / "t2" / "seed_3"
    manifest = shared / "bank" / "v0001" / "MANIFEST.json"
    assert os.stat(arm_root / "grpo" / "bank" / "v0001" / "MANIFEST.json").st_ino == os.stat(manifest).st_ino
    assert not (arm_root / "grpo" / "jobs" / "round_00" / "synthesize").exists()
    # one held-out secret for the whole experiment: every run is evaluated on the same held-out suite
    secret = (tmp_path / "state" / "t2" / "HELDOUT_SECRET").read_text()
    assert all(
        (root / "heldout" / "SECRET").read_text() == secret for root in (shared, arm_root / "grpo", arm_root / "bicurl")
    )
    suite = read_secret(tmp_path / "state" / "t2" / "HELDOUT_SECRET").fingerprint  # its public name
    assert all(run["heldout_suite"] == suite for run in runs.values()) and suite not in secret

    plans = {n: read_json(arm_root / n / "round_01" / "plan.json") for n in runs}
    assert plans["grpo"]["reward_mode"] == "final" and set(plans["grpo"]["mixture"]) == {"E2E"}
    assert plans["bicurl"]["reward_mode"] == "rubric" and len(plans["bicurl"]["mixture"]) == 3

    # end-of-run numbers: retained best on the final split, with half-widths across the two tracks
    for name, arm in results["arms"].items():
        agg = arm["seeds"][0]["aggregate"]
        assert agg["split"] == "final" and agg["n_runs"] == 2 and 0.0 <= agg["overall"] <= 1.0
        assert arm["summary"]["mean"]["overall"] == pytest.approx(agg["overall"])
        assert arm["summary"]["half_width"]["overall"] is not None
        assert runs[name]["curve"]["rounds"] == [0, 1]

    # rerun: everything finished is skipped (attempts stay 1), results rewritten
    assert main(["experiment", "--config", str(exp)]) == 0
    again = json.loads((out / "results.json").read_text())
    assert all(arm["seeds"][0]["attempts"] == 1 for arm in again["arms"].values())
    assert all(arm["seeds"][0]["interrupted_attempts"] == 0 for arm in again["arms"].values())
    assert not any((arm_root / name / "experiment_attempt.json").exists() for name in runs)  # closed when done

    # every finished piece was recorded beside the results, stamped with the commit and the CPU
    piece = read_json(out / "runs" / "grpo" / "seed_3.json")
    assert piece["status"] == "done" and piece["aggregate"] == runs["grpo"]["aggregate"]
    # (the piece's own commit, not compared with the results': a commit made while this test runs moves HEAD)
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", piece["commit"]) and piece["cpu"]["cores"] >= 1
    assert read_json(out / "runs" / "_shared" / "seed_3.json")["sft_digest"] == digest

    # the wide final evaluation (wide_final_repeats: each arm x seed widened as it finished): the retained
    # checkpoints on 3 final runs per track, the end-of-run run reused
    for name in runs:
        wide = read_json(out / "wide" / name / "seed_3_r03.json")
        assert (wide["n_runs"], wide["end_of_run_repeats"]) == (6, 1)
        # 2 runs reused from the end-of-run evaluation, or all 6 when both arms retained the same checkpoint
        assert wide["reused_runs"] == (6 if "reused_from" in wide else 2)
        layout = RunLayout(arm_root / name)
        end = {r.run_id: r.overall for r in read_jsonl(layout.heldout_run_records(1, "final"), EvalRun)}
        assert {rid: wide["runs"][rid]["overall"] for rid in end} == end and len(wide["runs"]) == 6
        assert wide["checkpoint_digest"] == read_json(layout.heldout_manifest(1, "final"))["checkpoint_digest"]
        assert wide["heldout_suite"] == suite
        if "reused_from" not in wide:  # played as an evaluation job of its own (on a cluster: a Slurm job)
            events = layout.events_log.read_text()
            [job_id] = re.findall(r"final_test: bat experiment: wide final wide_r03: job (\S+) on local", events)
            assert (layout.submitit_dir(wide["final_round"], "final_test") / job_id).is_dir()
    # this disk's suite is anchored: the shared SFT scored on the same wide split (or an arm's record of it)
    wide_digests = {read_json(out / "wide" / n / "seed_3_r03.json")["checkpoint_digest"] for n in runs}
    anchors = [read_json(p) for p in (out / "wide" / "_anchor").glob("suite_*_r03.json")]
    if digest in wide_digests:  # an arm retained the SFT itself: its record anchors the suite
        assert anchors == []
    else:
        [anchor] = anchors
        assert (anchor["checkpoint_digest"], anchor["heldout_suite"], anchor["n_runs"]) == (digest, suite, 6)
        assert [r["instance_id"] for r in anchor["runs"].values()] == [
            r["instance_id"] for r in read_json(out / "wide" / "grpo" / "seed_3_r03.json")["runs"].values()
        ]  # the same instances as the arms' wide runs
    widened = json.loads((out / "results.json").read_text())["wide"]
    assert [w["repeats"] for w in widened] == [3] and set(widened[0]["vs_reference"]) == {"grpo"}
    assert "## Wide final evaluation" in (out / "README.md").read_text()
    # every widened arm measured against the shared SFT on this suite, run by run (through the anchor)
    assert set(widened[0]["vs_anchor"]) == set(widened[0]["arms"])
    assert all(gain["n_runs"] == 6 for gain in widened[0]["vs_anchor"].values())
    recorded = read_json(out / "wide" / "grpo" / "seed_3_r03.json")["recorded_at"]
    assert main(["experiment", "--config", str(exp), "--wide-final", "3"]) == 0  # recorded: not redone
    assert read_json(out / "wide" / "grpo" / "seed_3_r03.json")["recorded_at"] == recorded

    # the null control: the shared SFT moved along a random direction to a KL from it, scored on the same wide runs
    assert main(["experiment", "--config", str(exp), "--null-control", "1", "--null-kl", "0.05"]) == 0
    null = read_json(out / "wide" / "_null-kl0.05" / "seed_1_r03.json")
    assert (null["n_runs"], null["heldout_suite"], null["null"]["start_digest"]) == (6, suite, digest)
    assert abs(null["null"]["kl"] - 0.05) <= 0.25 * 0.05 and null["checkpoint_digest"] != digest
    grpo_runs = read_json(out / "wide" / "grpo" / "seed_3_r03.json")["runs"]
    assert {rid: r["instance_id"] for rid, r in null["runs"].items()} == {
        rid: r["instance_id"] for rid, r in grpo_runs.items()
    }
    widened = json.loads((out / "results.json").read_text())["wide"]
    assert (
        widened[0]["vs_anchor"]["_null-kl0.05"]["n_runs"] == 6
        and "_null-kl0.05" not in json.loads((out / "results.json").read_text())["arms"]
    )
    assert "`_null-kl<KL>` is the null control" in (out / "README.md").read_text()
    assert main(["experiment", "--config", str(exp), "--null-control", "1", "--null-kl", "0.05"]) == 0  # not redone
    assert read_json(out / "wide" / "_null-kl0.05" / "seed_1_r03.json")["recorded_at"] == null["recorded_at"]

    # a later piece on a fresh disk: no state dirs, the committed records give the same table
    shutil.move(tmp_path / "state", tmp_path / "gone")
    assert main(["experiment", "--config", str(exp), "--collect-only"]) == 0
    merged = json.loads((out / "results.json").read_text())
    for name, arm in merged["arms"].items():
        assert arm["seeds"][0]["source"] == "committed"
        assert arm["summary"]["mean"]["overall"] == pytest.approx(results["arms"][name]["summary"]["mean"]["overall"])
    assert merged["budget"]["matched"] and merged["shared"]["3"]["sft_digest"] == digest
    assert "| grpo | 3 | done |" in (out / "README.md").read_text() and "piece `" in (out / "README.md").read_text()
    assert f"suite `{suite[:8]}`" in (out / "README.md").read_text()  # the committed piece names its suite
    assert merged["wide"] == widened  # the wide section is rebuilt from the committed wide records
    # running the experiment there does not redo committed arm x seeds, nor rebuild their bootstrap
    assert main(["experiment", "--config", str(exp)]) == 0
    assert not (tmp_path / "state" / "t2" / "seed_3").exists()
    rerun = json.loads((out / "results.json").read_text())
    assert all(arm["seeds"][0]["source"] == "committed" for arm in rerun["arms"].values())

    # a bootstrap rebuilt with another SFT digest than the committed one (another CPU kind) trains nothing: the arm
    # would start from another checkpoint than the committed arms did
    shared_record, bicurl_piece = out / "runs" / "_shared" / "seed_3.json", out / "runs" / "bicurl" / "seed_3.json"
    shared_record.write_text(json.dumps({**read_json(shared_record), "sft_digest": "0" * 64}))
    bicurl_piece.write_text(json.dumps({**read_json(bicurl_piece), "shared_sft_digest": "0" * 64}))
    redo = ["experiment", "--config", str(exp), "--only", "grpo", "--seeds", "3"]
    assert main([*redo, "--supersede", "t", "--reason", "digest check"]) == 1
    blocked = json.loads((out / "results.json").read_text())
    assert "not the committed 0000000000000000" in blocked["shared_failures"]["3"]
    assert "--allow-bootstrap-change" in blocked["shared_failures"]["3"]
    assert not (tmp_path / "state" / "t2" / "seed_3" / "grpo").exists()  # the arm never started
