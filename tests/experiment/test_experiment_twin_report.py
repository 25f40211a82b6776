"""The arm-versus-twin study end to end on synthetic state folders: each unit recorded from its state dir as a
committed piece (never overwritten, refused while unfinished), and `--twin-report` deciding the criteria only when
every unit is in (results.json and curves.png)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bat.cli.main import main
from bat.evaluate.manifest import checkpoint_digest
from bat.experiment.spec import load_experiment
from bat.experiment.twin_design import twin_design
from bat.schemas.evaluation import EvalManifest, EvalRun, RunEntry
from bat.schemas.stage_probe import StageProbeCell, StageProbeScore
from bat.state.atomic import atomic_write_json
from bat.state.jsonl import write_jsonl
from bat.state.layout import RunLayout
from bat.state.markers import write_done

REPO = Path(__file__).resolve().parents[2]
STATES, REPEATS, TRACKS = 12, 25, ("classification", "detection")  # smoke's two tracks x 25 = 50 runs
SFT_DIGEST = "s" * 64


def _spec(tmp_path: Path) -> Path:
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: t\nbase_config: {REPO / 'configs' / 'smoke.yaml'}\nseeds: [1, 2]\nbootstrap_seed: 1\n"
        f"state_dir: {tmp_path / 'state'}\nout_dir: {tmp_path / 'harness'}\ntwin_dir: {tmp_path / 'study'}\n"
        "overrides: [grpo.rollouts=online, grpo.steps=40, 'grpo.export_steps=[10, 20]', "
        f"'benchmark.split_repeats={{final: {REPEATS}}}']\n"
        "arms:\n  - {name: rl, overrides: [curriculum.arm=bicurl]}\n"
        "  - {name: rl-twin, overrides: [curriculum.arm=bicurl, grpo.shuffle_rewards=true]}\n"
    )
    return exp


def _probe(layout: RunLayout, step: int, means: list[float], digest: str = "c" * 64) -> None:
    cell = StageProbeCell(mean=None, half_width=None, n_states=len(means), n_rollouts=4 * len(means))
    score = StageProbeScore(
        label=f"step_{step}",
        checkpoint=f"ckpt{step}",
        checkpoint_digest=digest,
        probe_digest="p" * 64,
        k=4,
        temperature=1.0,
        confidence=0.95,
        config_hash="x",
        stages={},
        overall=cell,
        state_means=means,
    )
    atomic_write_json(layout.stage_probe.score(f"step_{step}"), score)


def _final(layout: RunLayout, round_index: int, finish_rate: float, rng: random.Random, digest: str) -> None:
    entries = [
        RunEntry(run_id=f"final-{t}-r{r:02d}", track=t, repeat=r, seed=r, instance_id=f"{t}{r}")
        for t in TRACKS
        for r in range(REPEATS)
    ]
    manifest = EvalManifest(
        round=round_index,
        split="final",
        checkpoint="ckpt",
        checkpoint_digest=digest,
        suite_version="s",
        harness_version="h",
        code_version="c",
        config_hash="x",
        run_seed=1,
        evaluator="builtin",
        created_at="2026-12-06T00:00:00+00:00",
        runs=entries,
    )
    atomic_write_json(layout.heldout_manifest(round_index, "final"), manifest)
    runs = []
    for e in entries:
        done = rng.random() < finish_rate
        runs.append(
            EvalRun(
                run_id=e.run_id,
                split="final",
                track=e.track,
                repeat=e.repeat,
                seed=e.seed,
                instance_id=e.instance_id,
                overall=0.6 if done else 0.1,
                end_reason="done" if done else "max_turns",
            )
        )
    write_jsonl(layout.heldout_run_records(round_index, "final"), runs)


def _arm(tmp_path: Path, arm: str, seed: int, learns: bool, sft_digest: str = SFT_DIGEST) -> RunLayout:
    """A finished arm x seed started from `sft_digest`: 40 GRPO steps (true rewards rising when it `learns`), probe
    scores at 10/20/40, the end-of-run final runs (experiment_arm.json done, round 1)."""
    rng = random.Random(f"{arm}-{seed}")
    layout = RunLayout(tmp_path / "state" / "t" / f"seed_{seed}" / arm)
    marker = {"shared": "x", "seed": 1, "sft_digest": sft_digest, "models_only": False, "copied": []}
    atomic_write_json(layout.root / "experiment_seed.json", marker)
    rewards = [0.1 + (0.5 * s / 39 if learns else 0.0) + rng.uniform(-0.03, 0.03) for s in range(40)]
    write_jsonl(layout.training_metrics(1, "grpo"), [{"step": s + 1, "reward_mean": r} for s, r in enumerate(rewards)])
    write_done(layout.phase_dir(1, "grpo"), phase="grpo", config_hash="x", round_index=1)
    base = [random.Random(f"state{i}").uniform(0.1, 0.4) for i in range(STATES)]
    for step in (10, 20, 40):
        gain = 0.3 * step / 40 if learns else 0.0
        _probe(layout, step, [min(1.0, b + gain + rng.uniform(-0.05, 0.05)) for b in base])
    record = {"arm": arm, "kind": "trained", "seed": seed, "status": "done", "final_round": 1}
    atomic_write_json(layout.root / "experiment_arm.json", {**record, "shared_sft_digest": sft_digest})
    _final(layout, 1, 0.6 if learns else 0.2, rng, "c" * 64)
    return layout


def _shared(tmp_path: Path) -> RunLayout:
    """The shared bootstrap with its SFT export, the SFT's final runs (`--sft-final`) and its probe at step 0."""
    layout = RunLayout(tmp_path / "state" / "t" / "seed_1" / "_shared")
    export = layout.candidate_model(0)
    export.mkdir(parents=True)
    (export / "model.safetensors").write_bytes(b"sft weights")
    write_done(layout.phase_dir(0, "sft"), phase="sft", config_hash="x", round_index=0)
    digest = checkpoint_digest(export)
    record = {"seed": 1, "wall_s": 1.0, "sft_checkpoint": str(export), "sft_digest": digest}
    atomic_write_json(layout.root / "experiment_shared.json", record)
    _final(layout, 0, 0.1, random.Random("sft"), digest)
    _probe(layout, 0, [random.Random(f"state{i}").uniform(0.1, 0.4) for i in range(STATES)], digest)
    return layout


def _report(exp: Path, capsys) -> tuple[dict, str]:
    assert main(["experiment", "--config", str(exp), "--twin-report"]) == 0
    out = capsys.readouterr().out
    return json.loads((exp.parent / "study" / "results.json").read_text()), out


def test_the_design_is_read_from_the_experiment_file(tmp_path: Path) -> None:
    design = twin_design(load_experiment(_spec(tmp_path)))
    assert (design.arm, design.twin, design.seeds, design.reference_seeds) == ("rl", "rl-twin", (1, 2), (1,))
    assert design.steps == 40 and design.probe_steps == (10, 20, 40) and design.final_split_runs == 2 * REPEATS


def test_units_recorded_from_state_decide_the_criteria_only_when_all_are_in(tmp_path: Path, capsys) -> None:
    exp = _spec(tmp_path)
    study = tmp_path / "study"
    results, out = _report(exp, capsys)  # nothing recorded yet: every unit missing, nothing decided
    assert not results["complete"] and all(c["passed"] is None for c in results["criteria"])
    assert "rl seed 1" in results["missing"] and "sft seed 1: probe at step 0" in results["missing"]
    assert (study / "curves.png").stat().st_size > 0 and "undecided" in out
    sft = checkpoint_digest(_shared(tmp_path).candidate_model(0))
    for seed in (1, 2):
        _arm(tmp_path, "rl", seed, learns=True, sft_digest=sft)
        _arm(tmp_path, "rl-twin", seed, learns=False, sft_digest=sft)
    for part in ("train", "e2e"):
        assert main(["experiment", "--config", str(exp), "--twin-unit", part, "--only", "rl", "--only", "rl-twin"]) == 0
    results, _ = _report(exp, capsys)  # the SFT's unit is missing: measured, not decided
    assert results["missing"] == ["sft: E2E runs", "sft seed 1: probe at step 0"]
    assert all(c["passed"] is None for c in results["criteria"]) and results["criteria"][0]["value"] > 0.3
    assert main(["experiment", "--config", str(exp), "--twin-unit", "reference"]) == 0
    piece = json.loads((study / "units" / "sft" / "seed_1_reference.json").read_text())
    assert piece["part"] == "reference" and len(piece["e2e"]) == 2 * REPEATS and set(piece["probe"]) == {"0"}
    assert piece["commit"] and piece["cpu"]["model"] and piece["recorded_at"]
    results, out = _report(exp, capsys)
    assert results["complete"] and not results["missing"] and not results["problems"] and not results["notes"]
    c1, c2, c3 = results["criteria"]
    assert c1["passed"] and c2["passed"] and c3["passed"] and c3["detail"]["runs"] == 2 * REPEATS
    assert c2["detail"]["states"] == STATES and c2["p"] < 0.01 and c1["interval"][0] > 0.15
    assert results["descriptives"]["probe"]["sft seed 1"]["0"] < results["descriptives"]["probe"]["rl seed 1"]["40"]
    assert results["descriptives"]["end_reasons"]["rl-twin seed 2"]["max_turns"] > 0
    assert len(results["units"]) == 9 and {u["part"] for u in results["units"]} == {"train", "e2e", "reference"}
    assert "C1 training reward" in out and ": passed" in out
    # a piece taken away again (the twin's seed 2 E2E runs): the criteria fall back to undecided
    (study / "units" / "rl-twin" / "seed_2_e2e.json").unlink()
    results, _ = _report(exp, capsys)
    assert results["missing"] == ["rl-twin seed 2: E2E runs"] and all(c["passed"] is None for c in results["criteria"])


def test_a_recorded_unit_is_never_overwritten(tmp_path: Path, capsys) -> None:
    exp = _spec(tmp_path)
    layout = _arm(tmp_path, "rl", 1, learns=True)
    args = ["experiment", "--config", str(exp), "--twin-unit", "train", "--only", "rl", "--seeds", "1"]
    assert main(args) == 0
    piece = tmp_path / "study" / "units" / "rl" / "seed_1_train.json"
    before = piece.read_text()
    assert main(args) == 0 and "recorded already, identical" in capsys.readouterr().out
    write_jsonl(layout.training_metrics(1, "grpo"), [{"step": s + 1, "reward_mean": 0.5} for s in range(40)])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "never overwritten" in err and "rewards" in err and str(piece) in err
    assert piece.read_text() == before


def test_a_train_unit_keeps_its_candidates_lora_adapter_beside_the_piece(tmp_path: Path, capsys) -> None:
    from bat.state.checkpoints import adapter_dir
    from bat.state.digest import sha256_path

    exp = _spec(tmp_path)
    layout = _arm(tmp_path, "rl", 1, learns=True)
    candidate = layout.candidate_model(1)
    adapter = adapter_dir(candidate)
    adapter.mkdir(parents=True)
    (candidate / "model.safetensors").write_bytes(b"merged weights")
    (adapter / "adapter_model.safetensors").write_bytes(b"adapter weights")
    (adapter / "adapter_config.json").write_text('{"r": 4}')
    _probe(layout, 40, [0.5] * STATES, checkpoint_digest(candidate))  # the probe scored this candidate
    args = ["experiment", "--config", str(exp), "--twin-unit", "train", "--only", "rl", "--seeds", "1"]
    assert main(args) == 0
    piece = json.loads((tmp_path / "study" / "units" / "rl" / "seed_1_train.json").read_text())
    kept = tmp_path / "study" / "units" / "rl" / "seed_1_adapter"
    assert piece["adapter_digest"] == sha256_path(adapter) == sha256_path(kept)
    assert piece["checkpoint_digest"] == checkpoint_digest(candidate)
    assert (kept / "adapter_model.safetensors").read_bytes() == b"adapter weights"
    assert main(args) == 0 and "recorded already, identical" in capsys.readouterr().out
    (kept / "adapter_model.safetensors").write_bytes(b"another adapter")  # a kept adapter is never overwritten
    assert main(args) == 2 and "never overwritten" in capsys.readouterr().err
    assert (kept / "adapter_model.safetensors").read_bytes() == b"another adapter"


def test_unfinished_units_are_refused_naming_what_to_run(tmp_path: Path, capsys) -> None:
    exp = _spec(tmp_path)
    base = ["experiment", "--config", str(exp), "--twin-unit"]
    assert main([*base, "train", "--only", "rl", "--seeds", "1"]) == 2
    assert "--only rl --seeds 1 runs (or resumes) them" in capsys.readouterr().err
    layout = _arm(tmp_path, "rl", 1, learns=True)
    layout.stage_probe.score("step_20").unlink()
    assert main([*base, "train", "--only", "rl", "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "bat evaluate probe --state" in err and "exports/step_00020 --label step_20" in err
    # a probe score of another checkpoint than the step's export (on disk) is refused
    _probe(layout, 20, [0.2] * STATES)
    candidate = layout.candidate_model(1)
    candidate.mkdir(parents=True)
    (candidate / "model.safetensors").write_bytes(b"step 40")
    assert main([*base, "train", "--only", "rl", "--seeds", "1"]) == 2
    assert "not the step-40 checkpoint" in capsys.readouterr().err
    assert main([*base, "e2e", "--only", "rl", "--seeds", "1"]) == 2  # the end-of-run runs met another checkpoint
    assert "another checkpoint than the step-40 candidate" in capsys.readouterr().err
    assert main([*base, "reference"]) == 2
    assert "bat experiment --sft-final builds it" in capsys.readouterr().err
    assert main([*base, "e2e", "--only", "nope"]) == 2
    assert not (tmp_path / "study" / "units").exists()


def test_units_that_do_not_fit_together_decide_nothing(tmp_path: Path) -> None:
    """Pieces probed on other states, or scored on other E2E runs, are problems (nothing decided); a rebuilt
    bootstrap with another SFT digest is a note, as the pre-registration reports it."""
    from bat.experiment.twin_report import checks
    from bat.schemas.twin_study import E2eRun, TwinPiece

    design = twin_design(load_experiment(_spec(tmp_path)))
    run = E2eRun(finished=True, overall=1.0, end_reason="done")
    pieces = [
        TwinPiece(part="train", arm="rl", seed=1, sft_digest="a" * 64, probe={40: [0.1]}, probe_digest="p" * 64),
        TwinPiece(part="train", arm="rl-twin", seed=1, sft_digest="b" * 64, probe={40: [0.1]}, probe_digest="q" * 64),
        TwinPiece(part="e2e", arm="rl", seed=1, sft_digest="a" * 64, e2e={"final-x-r00": run}),
        TwinPiece(part="e2e", arm="rl-twin", seed=1, sft_digest="a" * 64, e2e={"final-x-r01": run}),
    ]
    problems, notes = checks(pieces, design)
    assert len(problems) == 2 and "probe states" in problems[0] and "E2E runs" in problems[1]
    assert len(notes) == 1 and "rl-twin seed 1 (train): bbbbbbbbbbbb" in notes[0]
    assert checks(pieces[:1] + pieces[2:3], design) == ([], [])


@pytest.mark.parametrize("extra", [["--twin-report", "--twin-unit", "train"], ["--twin-report", "--collect-only"]])
def test_study_modes_go_one_at_a_time(tmp_path: Path, capsys, extra: list[str]) -> None:
    assert main(["experiment", "--config", str(_spec(tmp_path)), *extra]) == 2
    assert "one mode at a time" in capsys.readouterr().err


def test_the_sft_meets_the_same_final_runs_as_every_arm_and_seed(tmp_path: Path, monkeypatch) -> None:
    """rl_teaches: the SFT is scored under the arms' evaluation config, and the final split's run ids, instances and
    sampling seeds depend on the suite alone: the SFT, both arms and both seeds meet the same 200 runs."""
    from bat.benchmark.secret import install_secret
    from bat.evaluate.runner import suite_runs
    from bat.experiment.spec import arm_config

    monkeypatch.chdir(REPO)
    spec = load_experiment("configs/experiments/rl_teaches.yaml")
    assert twin_design(spec).final_split_runs == 200 and spec.twin_dir == Path("docs/results/rl_teaches")
    layout = RunLayout(tmp_path / "run")
    install_secret(spec.secret_file, layout.heldout_secret)
    seen = set()
    for arm in ("stage-rl", "stage-rl-twin"):
        for seed in spec.seeds:
            runs = suite_runs(arm_config(spec, arm, seed), layout, "final")
            seen.add(tuple((r.run_id, r.instance_seed, r.sampling_seed) for r in runs))
    assert len(seen) == 1 and len(next(iter(seen))) == 200


def _played_spec(tmp_path: Path, tiny_model_builder) -> tuple[Path, RunLayout, dict]:
    """The study's experiment file with one final run per track on the debug executor, and a shared bootstrap as
    built (a tiny SFT export, its secret and record): (experiment file, bootstrap layout, its record)."""
    from bat.benchmark.secret import load_or_create_secret
    from bat.config import load_config

    exp = _spec(tmp_path)
    exp.write_text(
        exp.read_text()
        .replace(f"final: {REPEATS}", "final: 1")
        .replace("overrides: [", "overrides: [orchestrate.executor=debug, ", 1)
    )
    layout = RunLayout(tmp_path / "state" / "t" / "seed_1" / "_shared")
    sft = tiny_model_builder(load_config(REPO / "configs" / "smoke.yaml").model.tiny, 7)
    write_done(layout.phase_dir(0, "sft"), phase="sft", config_hash="x", round_index=0)
    load_or_create_secret(layout.heldout_secret)
    record = {"seed": 1, "wall_s": 1.0, "sft_checkpoint": str(sft), "sft_digest": checkpoint_digest(sft)}
    atomic_write_json(layout.root / "experiment_shared.json", record)
    return exp, layout, record


@pytest.mark.slow
def test_sft_final_scores_the_shared_sft_and_its_unit_records(tmp_path: Path, capsys, tiny_model_builder) -> None:
    """`--sft-final` plays the shared SFT export on the final split in the bootstrap's state dir (a job of the
    end-of-run evaluation's kind), records the bootstrap once, and `--twin-unit reference` takes its runs."""
    exp, layout, record = _played_spec(tmp_path, tiny_model_builder)
    assert main(["experiment", "--config", str(exp), "--sft-final"]) == 0
    assert "on the final split: Overall" in capsys.readouterr().out
    manifest = json.loads(layout.heldout_manifest(0, "final").read_text())
    assert manifest["checkpoint_digest"] == record["sft_digest"] and len(manifest["runs"]) == 2
    shared_piece = json.loads((tmp_path / "harness" / "runs" / "_shared" / "seed_1.json").read_text())
    assert shared_piece["sft_digest"] == record["sft_digest"]
    played = layout.heldout_run_records(0, "final").stat().st_mtime_ns
    assert main(["experiment", "--config", str(exp), "--sft-final"]) == 0  # finished: read back, not replayed
    assert layout.heldout_run_records(0, "final").stat().st_mtime_ns == played
    _probe(layout, 0, [0.1] * STATES, record["sft_digest"])
    assert main(["experiment", "--config", str(exp), "--twin-unit", "reference"]) == 0
    piece = json.loads((tmp_path / "study" / "units" / "sft" / "seed_1_reference.json").read_text())
    assert set(piece["e2e"]) == {r["run_id"] for r in manifest["runs"]}
    assert all(run["end_reason"] for run in piece["e2e"].values())


@pytest.mark.slow
def test_twin_replay_rebuilds_the_candidate_from_the_committed_adapter_and_plays_its_final_runs(
    tmp_path: Path, capsys, tiny_model_builder
) -> None:
    """On a disk without the arm's run: `--twin-replay` merges the committed adapter into the rebuilt SFT, checks the
    weights are the trained candidate's, plays the final split, and `--twin-unit e2e` records those runs."""
    import torch
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    from bat.policy.loader import load_model
    from bat.schemas.twin_study import TwinPiece
    from bat.state.digest import sha256_path
    from bat.train.lora import write_merged_export

    exp, _shared_layout, record = _played_spec(tmp_path, tiny_model_builder)
    sft, sft_digest = Path(record["sft_checkpoint"]), record["sft_digest"]
    # the train unit as committed: an adapter trained on the SFT (B moved off zero) and the candidate's digests
    study = tmp_path / "study" / "units" / "rl"
    torch.manual_seed(0)
    adapted = get_peft_model(load_model(sft), PeftLoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    adapted.save_pretrained(study / "seed_1_adapter")
    trained = write_merged_export(sft, study / "seed_1_adapter", tmp_path / "trained", dtype="float32", meta={})
    piece = TwinPiece(
        part="train",
        arm="rl",
        seed=1,
        sft_digest=sft_digest,
        rewards=[0.1] * 40,
        weights_digest=sha256_path(trained / "model.safetensors"),
        adapter_digest=sha256_path(study / "seed_1_adapter"),
    )
    atomic_write_json(study / "seed_1_train.json", piece)
    args = ["experiment", "--config", str(exp), "--only", "rl", "--seeds", "1"]
    assert main([*args, "--twin-unit", "e2e"]) == 2 and "--twin-replay --only rl --seeds 1" in capsys.readouterr().err
    assert main([*args, "--twin-replay"]) == 0
    assert "the trained weights, bit for bit" in capsys.readouterr().out
    replay = RunLayout(tmp_path / "state" / "t" / "seed_1" / "_replay" / "rl")
    manifest = json.loads(replay.heldout_manifest(1, "final").read_text())
    assert manifest["checkpoint_digest"] == checkpoint_digest(replay.candidate_model(1)) and len(manifest["runs"]) == 2
    assert main([*args, "--twin-unit", "e2e"]) == 0
    e2e = json.loads((study / "seed_1_e2e.json").read_text())
    assert set(e2e["e2e"]) == {r["run_id"] for r in manifest["runs"]} and e2e["weights_digest"] == piece.weights_digest
    # an adapter that is not the committed one is refused before anything is played
    (study / "seed_1_adapter" / "adapter_config.json").write_text("{}")
    assert main([*args, "--twin-replay"]) == 2 and "restore it from git" in capsys.readouterr().err
    (study / "seed_1_e2e.json").unlink()
    assert main([*args, "--twin-unit", "e2e"]) == 2 and "restore it from git" in capsys.readouterr().err


def test_the_probe_is_drawn_as_its_mean_and_interval_over_scored_states() -> None:
    from bat.experiment.twin_plot import probe_point

    mean, hw = probe_point([0.0, 0.5, None, 0.25])
    assert mean == pytest.approx(25.0) and 0 < hw < 100
    assert probe_point([0.4]) == (pytest.approx(40.0), 0.0) and probe_point([None]) is None


@pytest.mark.slow
def test_an_unfinished_sft_evaluation_keeps_its_runs_and_resumes_from_them_on_another_disk(
    tmp_path: Path, capsys, tiny_model_builder
) -> None:
    """`--twin-unit reference` on an unfinished final-split evaluation keeps the runs played so far beside the
    pieces (no instance ids); on another disk `--sft-final` restores them instead of playing them again, and plays
    only the rest. Kept runs of other weights are refused before anything is played."""
    import shutil

    from bat.evaluate.runner import suite_runs
    from bat.evaluate.store import aggregate_path
    from bat.experiment.spec import arm_config
    from bat.experiment.wide import WIDE_PHASE
    from bat.state.jsonl import append_jsonl, read_jsonl

    exp, layout, _record = _played_spec(tmp_path, tiny_model_builder)
    spec = load_experiment(exp)
    runs = suite_runs(arm_config(spec, "rl", 1), layout, "final")
    played = EvalRun(
        run_id=runs[0].run_id,
        split="final",
        track=runs[0].track,
        repeat=runs[0].repeat,
        seed=runs[0].sampling_seed,
        instance_id=runs[0].task.task_id,
        stages=dict.fromkeys(arm_config(spec, "rl", 1).stage_keys, 0.25),
        task=0.25,
        agentic=0.25,
        overall=0.25,
        end_reason="max_turns",
        duration_s=123.0,
    )
    append_jsonl(layout.heldout_partial(0, "final"), [played])
    assert main(["experiment", "--config", str(exp), "--twin-unit", "reference"]) == 0
    assert "kept 1 played runs (1 new)" in capsys.readouterr().out
    kept_path = tmp_path / "study" / "units" / "sft" / "seed_1_reference_partial.json"
    kept = json.loads(kept_path.read_text())
    assert [r["run_id"] for r in kept["runs"]] == [played.run_id] and kept["runs"][0]["instance_id"] == ""
    assert kept["commit"] and kept["cpu"]
    # another disk: the same committed study folder and held-out secret, none of the first one's played runs
    shutil.rmtree(layout.heldout_runs(0, "final"))
    assert main(["experiment", "--config", str(exp), "--sft-final"]) == 0
    assert "(1 of them kept from another disk)" in capsys.readouterr().out
    final = {r.run_id: r for r in read_jsonl(layout.heldout_run_records(0, "final"), EvalRun)}
    assert len(final) == len(runs) == 2 and final[played.run_id] == played  # restored, not played again
    assert final[runs[1].run_id].duration_s != 123.0
    # kept runs of another checkpoint are refused, naming the file
    kept["weights_digest"] = "f" * 64
    kept_path.write_text(json.dumps(kept))
    shutil.rmtree(layout.heldout_runs(0, "final"))
    aggregate_path(layout, 0, "final", WIDE_PHASE).unlink()
    assert main(["experiment", "--config", str(exp), "--sft-final"]) == 2
    err = capsys.readouterr().err
    assert str(kept_path) in err and "another checkpoint" in err
