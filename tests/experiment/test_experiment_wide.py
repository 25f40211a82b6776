"""The wide final evaluation: what it refuses before playing a run, and the report section built from its records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bat.benchmark.secret import install_secret
from bat.cli.main import main
from bat.evaluate.runner import suite_runs
from bat.experiment.spec import load_experiment
from bat.experiment.wide import WideError, evaluate_wide, wide_config, write_wide_piece
from bat.experiment.wide_report import wide_section
from bat.experiment.wide_summary import wide_summary
from bat.schemas.evaluation import EvalManifest, EvalRun, RunEntry
from bat.schemas.experiment import WideRecord
from bat.schemas.experiment_results import ExperimentResults
from bat.state.atomic import atomic_write_json
from bat.state.experiment_layout import wide_piece
from bat.state.jsonl import write_jsonl
from bat.state.layout import RunLayout

REPO = Path(__file__).resolve().parents[2]


def _write(out: Path, record: dict) -> Path | None:
    """Commit a wide record given as its JSON content."""
    return write_wide_piece(out, WideRecord.model_validate(record))


def _summaries(out: Path, reference: str, **kwargs) -> list[dict]:
    """`wide_summary` as results.json holds it."""
    return [summary.to_json() for summary in wide_summary(out, reference, **kwargs)]


def _section(summaries: list[dict]) -> list[str]:
    """The report's wide section of these summaries (reference bicurl, 95%)."""
    results = {"wide": summaries, "reference_arm": "bicurl", "confidence": 0.95}
    return wide_section(ExperimentResults.model_validate(results))


def _spec(tmp_path: Path):
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"name: t\nbase_config: {REPO / 'configs' / 'smoke.yaml'}\nseeds: [1, 2]\n"
        f"state_dir: {tmp_path / 'state'}\nout_dir: {tmp_path / 'out'}\n"
        "arms:\n  - {name: grpo, overrides: [curriculum.arm=grpo]}\n  - {name: bicurl, overrides: [curriculum.arm=bicurl]}\n"
    )
    return exp, load_experiment(exp)


def _finished_arm(spec, arm: str, seed: int, repeats: int, overall: list[float] | None = None) -> Path:
    """A done arm x seed whose end-of-run final evaluation had `repeats` runs per track of track `t` (manifest, and
    the runs when `overall` gives their scores)."""
    root = spec.root / f"seed_{seed}" / arm
    root.mkdir(parents=True)
    record = {"arm": arm, "kind": "trained", "seed": seed, "status": "done", "final_round": 1}
    (root / "experiment_arm.json").write_text(json.dumps(record))
    manifest = EvalManifest(
        round=1,
        split="final",
        checkpoint=str(root / "checkpoints" / "best"),
        checkpoint_digest="d" * 64,
        suite_version="s",
        harness_version="h",
        code_version="c",
        config_hash="x",
        run_seed=seed,
        evaluator="builtin",
        sampling={"temperature": 0.0},
        created_at="2026-12-05T00:00:00+00:00",
        runs=[
            RunEntry(run_id=f"final-t-r{r:02d}", track="t", repeat=r, seed=r, instance_id=f"i{r}")
            for r in range(repeats)
        ],
    )
    atomic_write_json(RunLayout(root).heldout_manifest(1, "final"), manifest)
    if overall is not None:
        runs = [
            EvalRun(
                run_id=e.run_id,
                split="final",
                track="t",
                repeat=e.repeat,
                seed=e.seed,
                instance_id=e.instance_id,
                overall=v,
            )
            for e, v in zip(manifest.runs, overall)
        ]
        write_jsonl(RunLayout(root).heldout_run_records(1, "final"), runs)
    return root


def test_the_wide_config_changes_only_the_final_splits_runs_per_track(tmp_path: Path) -> None:
    _, spec = _spec(tmp_path)
    from bat.experiment.spec import arm_config

    plain, wide = arm_config(spec, "grpo", 1), wide_config(spec, "grpo", 1, 7)
    assert wide.benchmark.repeats_for("final") == 7
    assert wide.benchmark.repeats_for("controller") == plain.benchmark.repeats_for("controller")
    assert wide.model_copy(update={"benchmark": plain.benchmark}) == plain
    # held-out run r of a track is keyed by (split, track, r): the end-of-run runs are the wide split's first runs
    layout = RunLayout(tmp_path / "run")
    narrow, widened = suite_runs(plain, layout, "final"), suite_runs(wide, layout, "final")
    first = {
        (r.run_id, r.instance_seed, r.sampling_seed) for r in widened if r.repeat < plain.benchmark.repeats_for("final")
    }
    assert {(r.run_id, r.instance_seed, r.sampling_seed) for r in narrow} == first and len(widened) == 7 * len(
        plain.benchmark.tracks
    )


def test_unfinished_or_already_wide_arm_seeds_are_refused_before_any_run(tmp_path: Path, capsys) -> None:
    exp, spec = _spec(tmp_path)
    # through the command: every selected arm x seed is reported, none is recorded, exit 1 (not finished)
    assert main(["experiment", "--config", str(exp), "--only", "grpo", "--seeds", "1,2", "--wide-final", "6"]) == 1
    out = capsys.readouterr().out
    assert "grpo seed 1: skipped" in out and "grpo seed 2: skipped" in out and "not run on this disk" in out
    assert not (tmp_path / "out" / "wide").exists()
    assert main(["experiment", "--config", str(exp), "--collect-only", "--wide-final", "6"]) == 2
    assert "--wide-final" in capsys.readouterr().err
    root = _finished_arm(spec, "grpo", 1, repeats=5)
    with pytest.raises(WideError, match="already has 5 runs per track"):
        evaluate_wide(spec, "grpo", 1, 5)
    with pytest.raises(WideError, match="retained checkpoint .* is gone"):
        evaluate_wide(spec, "grpo", 1, 6)
    assert not RunLayout(root).heldout_partial(1, "final", "wide_r06").exists()  # nothing started


def _record(arm: str, seed: int, overall: list[float]) -> dict:
    return {
        "arm": arm,
        "seed": seed,
        "repeats": 2,
        "checkpoint_digest": "c" * 64,
        "wall_s": 0.0,
        "overall": sum(overall) / len(overall),
        "n_runs": len(overall),
        "runs": {f"final-t-r{i:02d}": {"instance_id": f"i{i}", "overall": v} for i, v in enumerate(overall)},
    }


def _on_suite(arm: str, seed: int, overall: list[float], suite: str, digest: str, fingerprint: bool = False) -> dict:
    """A wide record whose runs face suite `suite`'s instances (instance ids prefixed), of checkpoint `digest`;
    with `fingerprint`, the record names its suite as records do since `heldout_suite` exists."""
    record = {**_record(arm, seed, overall), "checkpoint_digest": digest}
    record["runs"] = {rid: {**run, "instance_id": suite + run["instance_id"]} for rid, run in record["runs"].items()}
    return {**record, "heldout_suite": suite * 16} if fingerprint else record


def test_the_section_pairs_each_arm_with_the_reference_run_by_run(tmp_path: Path) -> None:
    _write(tmp_path, _record("bicurl", 1, [1.0, 1.0, 0.0, 1.0]))
    _write(tmp_path, _record("bicurl", 2, [1.0, 0.0, 0.0, 1.0]))
    _write(tmp_path, _record("grpo", 1, [0.0, 1.0, 0.0, 0.0]))
    assert _write(tmp_path, _record("grpo", 1, [1.0, 1.0, 1.0, 1.0])) is None  # never overwritten
    assert wide_piece(tmp_path, "grpo", 1, 2).name == "seed_1_r02.json"
    [summary] = _summaries(tmp_path, "bicurl")
    assert summary["arms"]["bicurl"] == {
        "seeds": [1, 2],
        "suites": {"A": [1, 2]},
        "n_runs": 4,
        "mean": pytest.approx(0.625),
        "components": {},  # these records carry Overall only
        "by_track": {"t": pytest.approx(0.625)},
    }
    row = summary["vs_reference"]["grpo"]  # per run: bicurl 1, .5, 0, 1 vs grpo 0, 1, 0, 0
    assert row["mean_delta"] == pytest.approx(0.375) and row["runs_differing"] == 3 and row["n_runs"] == 4
    lines = _section([summary])
    assert "## Wide final evaluation" in lines and "**2 runs per track (4 runs)**" in lines
    assert any(line.startswith("| grpo | 1 | 25.0 | +37.5 +- ") and "| 3/4 |" in line for line in lines)
    assert _section([]) == []
    # a seed facing other instances cannot be paired: named in the row, not raised
    _write(
        tmp_path,
        {**_record("no-e2e", 1, [1.0, 0.0, 1.0, 0.0]), "runs": {"final-x-r00": {"instance_id": "z", "overall": 1.0}}},
    )
    assert "at least 2 on each side" in _summaries(tmp_path, "bicurl")[0]["vs_reference"]["no-e2e"]["error"]


def test_seeds_on_another_held_out_suite_are_compared_unpaired(tmp_path: Path) -> None:
    """A piece run on another disk met another experiment secret: same run ids, other instances. Its arm is
    compared with the reference unpaired (Welch), each suite's seeds averaged run by run within it."""
    _write(tmp_path, _record("bicurl", 1, [1.0, 1.0, 0.0, 1.0]))
    _write(tmp_path, _record("bicurl", 2, [1.0, 0.0, 0.0, 1.0]))
    _write(tmp_path, _record("grpo", 1, [0.0, 1.0, 0.0, 0.0]))
    other = _record("no-e2e", 1, [0.0, 0.5, 0.0, 0.5])
    other["runs"] = {rid: {**run, "instance_id": run["instance_id"] + "b"} for rid, run in other["runs"].items()}
    _write(tmp_path, other)
    mixed = _record("no-smix", 2, [0.0, 0.0, 1.0, 0.0])  # seed 2 on the reference's suite, seed 3 on another
    _write(tmp_path, mixed)
    _write(tmp_path, {**other, "arm": "no-smix", "seed": 3})
    [summary] = _summaries(tmp_path, "bicurl")
    arms, rows = summary["arms"], summary["vs_reference"]
    assert arms["bicurl"]["suites"] == {"A": [1, 2]} and arms["no-e2e"]["suites"] == {"B": [1]}
    assert arms["no-smix"]["suites"] == {"A": [2], "B": [3]} and arms["no-smix"]["n_runs"] == 8
    assert "design" not in rows["grpo"] and rows["grpo"]["runs_differing"] == 3  # one suite: still paired
    row = rows["no-e2e"]  # bicurl per run 1, .5, 0, 1 (mean .625) vs .0, .5, .0, .5 (mean .25)
    assert row["design"] == "unpaired" and row["n_runs"] == [4, 4]
    assert row["mean_delta"] == pytest.approx(0.375)
    assert row["sd"] == [pytest.approx(0.478714, abs=1e-5), pytest.approx(0.288675, abs=1e-5)]
    assert 0.23 < row["p_value"] < 0.25 and row["half_width"] > row["mean_delta"]  # Welch t = 1.342, df 4.93
    assert rows["no-smix"]["design"] == "unpaired" and rows["no-smix"]["n_runs"] == [4, 8]
    lines = _section([summary])
    assert any(
        line.startswith("| no-e2e | 1 (B) | 25.0 | +37.5 +- ") and "| unpaired: 4 vs 4 |" in line for line in lines
    )
    assert any(line.startswith("| no-smix | 2 (A); 3 (B) | 25.0 | ") for line in lines)
    assert any(line.startswith("| bicurl | 1, 2 (A) | 62.5 |") for line in lines)


def test_the_section_shows_where_each_arms_score_comes_from(tmp_path: Path) -> None:
    def record(arm: str, seed: int, runs: dict[str, tuple[float, float]]) -> dict:
        return {
            **_record(arm, seed, [0.0] * len(runs)),
            "runs": {
                run_id: {"instance_id": run_id, "overall": (task + agentic) / 2, "task": task, "agentic": agentic}
                for run_id, (task, agentic) in runs.items()
            },
        }

    _write(tmp_path, record("bicurl", 1, {"final-vqa-r00": (1.0, 0.5), "final-det-r00": (0.0, 0.5)}))
    _write(tmp_path, record("bicurl", 2, {"final-vqa-r00": (0.0, 0.5), "final-det-r00": (0.0, 0.1)}))
    _write(tmp_path, record("grpo", 1, {"final-vqa-r00": (1.0, 1.0), "final-det-r00": (0.0, 0.0)}))
    [summary] = _summaries(tmp_path, "bicurl")
    bicurl = summary["arms"]["bicurl"]
    assert bicurl["components"] == {"task": pytest.approx(0.25), "agentic": pytest.approx(0.4)}
    assert bicurl["by_track"] == {"det": pytest.approx(0.15), "vqa": pytest.approx(0.5)}
    lines = _section([summary])
    assert "| arm | Task | Agentic | det | vqa |" in lines
    assert "| bicurl | 25.0 | 40.0 | 15.0 | 50.0 |" in lines and "| grpo | 50.0 | 50.0 | 0.0 | 100.0 |" in lines
    # a run that records its track is grouped by it (an external benchmark's id also names its task)
    runs = {"final-vqa-task7-r00": {"instance_id": "i", "track": "vqa", "overall": 0.5}}
    _write(tmp_path, {**_record("no-e2e", 1, [0.5]), "runs": runs})
    assert _summaries(tmp_path, "bicurl")[0]["arms"]["no-e2e"]["by_track"] == {"vqa": 0.5}


def test_an_arm_seed_sharing_a_scored_checkpoint_takes_its_runs(tmp_path: Path) -> None:
    _, spec = _spec(tmp_path)
    root = _finished_arm(spec, "grpo", 1, repeats=2, overall=[1.0, 0.0])  # digest "d" * 64, checkpoint not on disk
    secret = install_secret(tmp_path / "HELDOUT_SECRET", RunLayout(root).heldout_secret)
    twin = {
        "arm": "bicurl",
        "seed": 2,
        "repeats": 3,
        "checkpoint_digest": "d" * 64,
        "wall_s": 12.0,
        "overall": 1 / 3,
        "n_runs": 3,
        "runs": {f"final-t-r{r:02d}": {"instance_id": f"i{r}", "overall": v} for r, v in enumerate([1.0, 0.0, 0.0])},
    }
    record = evaluate_wide(spec, "grpo", 1, 3, {"d" * 64: [WideRecord.model_validate(twin)]})
    assert record.reused_from == "bicurl seed 2" and record.to_json()["runs"] == twin["runs"]
    assert record.heldout_suite == secret.fingerprint  # the suite's public name, never the key
    assert (record.arm, record.seed, record.end_of_run_repeats, record.reused_runs) == ("grpo", 1, 2, 3)
    assert record.wall_s == 0.0  # nothing was played
    # a record whose runs disagree with this arm x seed's end-of-run runs is not taken
    twin["runs"]["final-t-r01"]["overall"] = 1.0
    with pytest.raises(WideError, match="final-t-r01"):
        evaluate_wide(spec, "grpo", 1, 3, {"d" * 64: [WideRecord.model_validate(twin)]})
    # the same checkpoint scored on another held-out suite (another disk's secret: other instances) is no twin:
    # this arm x seed plays its own runs (here its checkpoint is not on disk, so it stops there)
    other_suite = {
        **twin,
        "runs": {rid: {**run, "instance_id": "x" + run["instance_id"]} for rid, run in twin["runs"].items()},
    }
    with pytest.raises(WideError, match="retained checkpoint .* is gone"):
        evaluate_wide(spec, "grpo", 1, 3, {"d" * 64: [WideRecord.model_validate(other_suite)]})


def test_a_wider_evaluation_starts_from_the_widest_one_on_disk(tmp_path: Path) -> None:
    from bat.evaluate.store import partial_runs_path
    from bat.experiment.wide import _seed_partial
    from bat.state.jsonl import read_jsonl

    layout = RunLayout(tmp_path / "arm")

    def runs(n: int, variant: str | None) -> None:
        records = [
            EvalRun(run_id=f"final-t-r{r:02d}", split="final", track="t", repeat=r, seed=r, instance_id=f"i{r}")
            for r in range(n)
        ]
        write_jsonl(layout.heldout_run_records(1, "final", variant), records)

    runs(2, None)  # the end-of-run evaluation
    assert _seed_partial(layout, 1, 3, 2) == 2
    runs(3, "wide_r03")
    assert _seed_partial(layout, 1, 5, 2) == 3  # from wide_r03, not the end-of-run runs
    assert len(read_jsonl(partial_runs_path(layout, 1, "final", "wide_r05"), EvalRun)) == 3
    assert _seed_partial(layout, 1, 5, 2) == 0  # a partial exists: the evaluation resumes from it


def test_across_suites_each_arm_is_measured_by_its_gain_over_the_sft_on_its_own_suite(tmp_path: Path) -> None:
    """Suite B is harder: the shared SFT checkpoint (the same digest on both disks) scores lower there. The anchored
    row compares gains over the SFT within each suite, so the suite's difficulty cancels."""

    sft = "s" * 64
    _write(tmp_path, _on_suite("bicurl", 1, [1.0, 0.5, 0.5, 0.5], "a", "b" * 64))
    _write(tmp_path, _on_suite("sft", 1, [0.5, 0.5, 0.0, 0.5], "a", sft))
    _write(tmp_path, _on_suite("no-smix", 1, [0.0, 0.0, 0.0, 0.5], "b", sft))  # retained the SFT itself
    _write(tmp_path, _on_suite("no-e2e", 1, [0.5, 0.0, 0.5, 0.5], "b", "e" * 64))
    [plain] = _summaries(tmp_path, "bicurl")
    assert plain["vs_reference"]["no-smix"]["design"] == "unpaired"  # without an anchor digest: the plain difference
    [summary] = _summaries(tmp_path, "bicurl", anchor_digests=(sft,))
    rows = summary["vs_reference"]
    # bicurl gains .5, 0, .5, 0 over the SFT on A (mean .25); no-smix gains 0 on B: .25; no-e2e gains .5, 0, .5, 0
    assert rows["no-smix"]["design"] == "anchored" and rows["no-smix"]["mean_delta"] == pytest.approx(0.25)
    assert rows["no-smix"]["unpaired"]["mean_delta"] == pytest.approx(0.5)  # suite B's difficulty included
    assert rows["no-e2e"]["mean_delta"] == pytest.approx(0.0) and rows["no-e2e"]["n_runs"] == [4, 4]
    assert "design" not in rows["sft"]  # one suite: paired as before
    gains = summary["vs_anchor"]  # each arm against the SFT on its own suite, run by run
    assert gains["bicurl"]["mean_delta"] == pytest.approx(0.25) and gains["bicurl"]["n_runs"] == 4
    assert gains["no-e2e"]["mean_delta"] == pytest.approx(0.25) and gains["no-e2e"]["runs_differing"] == 2
    assert gains["no-smix"]["mean_delta"] == 0.0 and gains["sft"]["runs_differing"] == 0
    assert "vs_anchor" in plain and plain["vs_anchor"] == {}  # no anchor digest: no gains
    lines = _section([summary])
    assert any(
        line.startswith("| no-smix | 1 (B) | 12.5 | +25.0 +- ")
        and "anchored on the SFT: 4 vs 4 (unpaired: +50.0)" in line
        for line in lines
    )
    assert any(
        line.startswith("| no-e2e | 1 (B) |") and line.endswith("| +25.0 +- 45.9 (p 0.182, 4 runs) |") for line in lines
    )


def test_an_arm_with_seeds_on_two_suites_is_anchored_on_each(tmp_path: Path) -> None:
    """no-starget seed 1 on suite A, seed 2 on suite B: each seed's runs are paired with the SFT on its own suite and
    the gains of both suites pooled, against the reference's gains on its suite."""

    sft = "s" * 64
    _write(tmp_path, _on_suite("bicurl", 1, [1.0, 0.5, 0.5, 0.5], "a", "b" * 64))
    _write(tmp_path, _on_suite("sft", 1, [0.5, 0.5, 0.0, 0.5], "a", sft))
    _write(tmp_path, _on_suite("no-smix", 1, [0.0, 0.0, 0.0, 0.5], "b", sft))  # the SFT on suite B
    _write(tmp_path, _on_suite("no-starget", 1, [0.5, 0.5, 0.5, 0.5], "a", "n" * 64))  # gains 0 0 .5 0
    _write(tmp_path, _on_suite("no-starget", 2, [1.0, 0.0, 0.0, 1.0], "b", "m" * 64))  # gains 1 0 0 .5
    [summary] = _summaries(tmp_path, "bicurl", anchor_digests=(sft,))
    assert summary["arms"]["no-starget"]["suites"] == {"A": [1], "B": [2]}
    row = summary["vs_reference"]["no-starget"]  # bicurl's gains .5 0 .5 0 (mean .25); no-starget's mean .25
    assert row["design"] == "anchored" and row["n_runs"] == [4, 8] and row["mean_delta"] == pytest.approx(0.0)
    assert row["unpaired"]["mean_delta"] == pytest.approx(0.625 - 0.5)
    gain = summary["vs_anchor"]["no-starget"]
    assert gain["n_runs"] == 8 and gain["mean_delta"] == pytest.approx(0.25) and gain["runs_differing"] == 3


def test_a_suite_anchor_record_anchors_the_arms_on_its_suite(tmp_path: Path) -> None:
    """The shared SFT scored on a disk's suite (`bat.experiment.anchor`, under wide/_anchor/) anchors that suite's
    arms though no arm there retained the SFT; it is not an arm of the table."""
    from bat.state.experiment_layout import wide_anchor_piece

    sft = "s" * 64
    _write(tmp_path, _on_suite("bicurl", 1, [1.0, 0.5, 0.5, 0.5], "a", "b" * 64, fingerprint=True))
    _write(tmp_path, _on_suite("sft", 1, [0.5, 0.5, 0.0, 0.5], "a", sft, fingerprint=True))
    _write(tmp_path, _on_suite("no-e2e", 1, [0.5, 0.0, 0.5, 0.5], "b", "e" * 64, fingerprint=True))
    atomic_write_json(
        wide_anchor_piece(tmp_path, "b" * 16, 2),
        {**_on_suite("_anchor", 1, [0.0, 0.0, 0.5, 0.0], "b", sft, fingerprint=True)},
    )  # as `bat.experiment.anchor` writes it
    [summary] = _summaries(tmp_path, "bicurl", anchor_digests=(sft,))
    assert "_anchor" not in summary["arms"]
    row = summary["vs_reference"]["no-e2e"]  # gains: bicurl .5, 0, .5, 0 (A); no-e2e .5, 0, 0, .5 (B)
    assert row["design"] == "anchored" and row["mean_delta"] == pytest.approx(0.0)
    assert row["unpaired"]["mean_delta"] == pytest.approx(0.25)


def test_each_arm_is_measured_beyond_each_null_controls_gain(tmp_path: Path) -> None:
    """A null control (arm `_null-kl<KL>`: the SFT moved at random, here on suite B) gains over the SFT by chance;
    every arm's gain is set against each null level's, whichever suite the arm ran on."""
    sft = "s" * 64
    _write(tmp_path, _on_suite("bicurl", 1, [1.0, 0.5, 0.5, 0.5], "a", "b" * 64))  # gains .5 0 .5 0
    _write(tmp_path, _on_suite("sft", 1, [0.5, 0.5, 0.0, 0.5], "a", sft))
    _write(tmp_path, _on_suite("no-smix", 1, [0.0, 0.0, 0.0, 0.5], "b", sft))  # the SFT on suite B
    _write(tmp_path, _on_suite("no-e2e", 1, [1.0, 0.5, 0.0, 1.0], "b", "e" * 64))  # gains 1 .5 0 .5
    _write(tmp_path, _on_suite("_null-kl0.03", 1, [0.5, 0.0, 0.0, 0.5], "b", "n" * 64))  # gains .5 0 0 0
    _write(tmp_path, _on_suite("_null-kl0.03", 2, [0.0, 0.0, 0.5, 0.5], "b", "m" * 64))  # gains 0 0 .5 0
    _write(tmp_path, _on_suite("_null-kl0.01", 3, [0.0, 0.0, 0.0, 0.5], "b", "o" * 64))  # gains 0 0 0 0
    [summary] = _summaries(tmp_path, "bicurl", anchor_digests=(sft,))
    null = summary["vs_anchor"]["_null-kl0.03"]  # seeds averaged per run: gains .25 0 .25 0
    assert null["mean_delta"] == pytest.approx(0.125) and null["n_runs"] == 4
    assert set(summary["vs_null"]) == {"_null-kl0.03", "_null-kl0.01"}
    beyond = summary["vs_null"]["_null-kl0.03"]
    assert set(beyond) == {"bicurl", "sft", "no-smix", "no-e2e"}
    assert beyond["bicurl"]["mean_delta"] == pytest.approx(0.25 - 0.125) and beyond["bicurl"]["design"] == "unpaired"
    assert beyond["no-e2e"]["mean_delta"] == pytest.approx(0.5 - 0.125)
    assert beyond["sft"]["mean_delta"] == pytest.approx(-0.125)
    assert summary["vs_null"]["_null-kl0.01"]["no-e2e"]["mean_delta"] == pytest.approx(0.5)
    lines = _section([summary])
    assert any(line.startswith("Gain over the SFT beyond `_null-kl0.03`'s (+12.5 +- ") for line in lines)
    assert any(line.startswith("Gain over the SFT beyond `_null-kl0.01`'s (+0.0 +- ") for line in lines)
    assert any(line.startswith("| no-e2e | +50.0 +- ") and "| +37.5 +- " in line for line in lines)
    assert any("`_null-kl<KL>` is the null control" in line for line in lines)
    _write(tmp_path / "plain", _on_suite("bicurl", 1, [1.0, 0.5, 0.5, 0.5], "a", "b" * 64))
    [plain] = _summaries(tmp_path / "plain", "bicurl", anchor_digests=(sft,))
    assert plain["vs_null"] == {}


def test_the_final_play_job_checkpoints_itself_for_requeue_when_its_time_runs_out(tmp_path):
    """On USR2 submitit calls the callable's `checkpoint` and pickles what it returns as the requeued job; the
    job must hand back itself with the same arguments (an attribute named `checkpoint` would shadow the method)."""
    from submitit.core.job_environment import _checkpoint
    from submitit.core.utils import DelayedSubmission

    from bat.experiment.wide import FinalPlayJob

    job = FinalPlayJob({"run": {"name": "x"}}, str(tmp_path / "state"), 1, str(tmp_path / "weights"), "wide")
    delayed = DelayedSubmission(job)
    delayed.set_timeout(60, 3)
    pickle = tmp_path / "submitted.pkl"
    assert _checkpoint(delayed, pickle, 2) == ""  # "" = requeue
    again = DelayedSubmission.load(pickle).function
    assert isinstance(again, FinalPlayJob)
    assert (again.state_root, again.round_index, again.weights, again.variant) == (
        str(tmp_path / "state"),
        1,
        str(tmp_path / "weights"),
        "wide",
    )
