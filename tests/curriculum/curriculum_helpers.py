"""Builders of aggregate records for outer-loop tests (aggregate numbers only, as routing sees them)."""

from __future__ import annotations

import json

from bat.bank import store
from bat.bank.pools import build_index
from bat.schemas.bank import BankRow, ChatMessage, PracticeTask, Provenance, StateRef
from bat.schemas.evaluation import EvalAggregate, TrackAggregate
from bat.state.atomic import atomic_write_json
from bat.state.bank_layout import BankVersionLayout
from bat.state.jsonl import write_jsonl

STAGES = ("S1", "S2", "S3", "S4", "S5")
TRACKS = ("classification", "detection", "segmentation")


def build_agg(
    round_index: int,
    overall: float,
    *,
    task: float | None = None,
    stages: dict | None = None,
    tracks: dict | None = None,
    checkpoint: str | None = None,
    keys: tuple[str, ...] = STAGES,
    track_names: tuple[str, ...] = TRACKS,
) -> EvalAggregate:
    """A routable controller aggregate; `keys` and `track_names` are the benchmark's stage keys and tracks."""
    stages = stages or dict.fromkeys(keys, overall)
    task = overall if task is None else task
    tracks = tracks or dict.fromkeys(track_names, overall)
    return EvalAggregate(
        round=round_index,
        split="controller",
        checkpoint=checkpoint or f"ckpt/r{round_index}",
        checkpoint_digest=f"d{round_index}",
        suite_version="suite-1",
        harness_version="h-1",
        manifest_digest="m",
        stage_keys=list(keys),
        stages=dict(stages),
        task=task,
        agentic=2 * overall - task,
        overall=overall,
        half_widths={},
        tracks={t: TrackAggregate(track=t, n_runs=2, overall=v, task=v, agentic=v) for t, v in tracks.items()},
        n_runs=2 * len(tracks),
        routable=True,
    )


def bank_row(state_id, stage, track="classification"):
    """A complete RL row (no state package behind it: routing and planning never open one)."""
    task = PracticeTask(task_id=f"task-{state_id}", track=track, seed=1, variant="expert")
    return BankRow(
        state_id=state_id,
        stage=stage,
        track=track,
        outcome="success",
        reward_source="e2e_rubric_task" if stage == "E2E" else "stage_rubric",
        task=task,
        state=StateRef(path=f"states/{state_id}", digest="sha256:" + "0" * 64, files=0, bytes=0),
        prompt=[
            ChatMessage(role="system", content="You are a careful imaging agent."),
            ChatMessage(role="user", content=f"Stage {stage}: continue the fictional task {state_id}."),
        ],
        rubric=[],
        evidence=[],
        skill="skill",
        provenance=Provenance(
            source=f"practice:{track}",
            generator="test",
            generator_version="0",
            teacher="scripted:expert",
            seeds={"task": 1},
            trajectory_id="trj",
            prefix_turns=0,
        ),
    )


def make_bank(layout, per_stage=6, stages=STAGES, tracks=("classification",)):
    """An admitted bank v0001 with `per_stage` rows for each of `stages` (default: the built-in five) and E2E, the
    rows' tracks cycling through `tracks`."""
    rows = [
        bank_row(f"{s.lower()}-{i}", s, tracks[i % len(tracks)]) for s in (*stages, "E2E") for i in range(per_stage)
    ]

    def fill(build):
        write_jsonl(BankVersionLayout(build).rl_rows, rows)
        atomic_write_json(BankVersionLayout(build).rl_index, build_index(rows))
        return {"rl": len(rows)}

    bank = store.write_version(
        layout,
        fill,
        dict(
            fingerprint="fp",
            generator_versions={"bank": "1"},
            seeds={"bank": 1},
            reduction_grid="v1",
            stages=list(stages),
            tracks=list(tracks),
            config={},
        ),
    )
    (bank.path / "leakage.json").write_text(json.dumps({"verdict": "admitted", "rows_scanned": len(rows)}))
    (bank.files.admitted_marker).write_text("")
    return layout


def perturbed_copy(base, out, noise: float, seed: int = 0):
    """A copy of the HF model folder `base` at `out` with Gaussian noise of std `noise` added to every weight (same
    tokenizer, chat template and model card); returns `out`."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base)
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * noise)
    model.save_pretrained(out)
    for f in base.iterdir():
        if f.is_file() and not (out / f.name).exists():
            shutil.copy2(f, out / f.name)
    return out


def one_step_round(layout, start, lr: float) -> None:
    """Round 1 of `layout` as a finished one-step GRPO round records it: the plan names `start`, the grpo phase's
    metrics hold its one step with `lr`, and its DONE marker (the candidate export is the caller's)."""
    from bat.schemas.routing import RoundPlan
    from bat.state.markers import write_done

    plan = RoundPlan(
        round=1,
        arm="grpo",
        target_stage=None,
        mixture={},
        reward_mode="final",
        bank_version=None,
        start_checkpoint=str(start),
        seed=1,
        batches=[],
    )
    atomic_write_json(layout.plan(1), plan)
    write_jsonl(layout.training_metrics(1, "grpo"), [{"step": 1, "lr": lr, "grad_norm": 0.3}])
    write_done(layout.phase_dir(1, "grpo"), phase="grpo", config_hash="x", counts={"step": 1})
