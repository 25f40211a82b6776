"""The held-out stage probe on the smoke config: built once per run on the held-out side only, from instances that
are neither practice tasks nor controller/final/test runs; scored deterministically through the real rollout loop
and verifier; the expert's own continuation scores 100 on every stage, the tiny untrained model about 0."""

from __future__ import annotations

import json

import pytest

from bat.bank.practice import bank_tracks, plan_e2e_tasks, plan_tasks
from bat.bank.states import verify_package
from bat.bank.synthesize import bank_seed
from bat.benchmark import SPLITS, heldout_suite, run_secret, suite_instance
from bat.cli.main import main
from bat.config import load_config
from bat.evaluate.aggregate import half_width
from bat.evaluate.stage_probe import ProbeMismatchError, build_probe
from bat.evaluate.stage_probe_expert import score_checkpoint, score_expert
from bat.evaluate.stage_probe_score import aggregate_probe, load_probe, read_scores, state_means
from bat.phase.guard import HeldoutAccessError, heldout_guard
from bat.rollout.shards import finished_shards, read_shard
from bat.schemas.rollout import RewardRecord
from bat.schemas.stage_probe import StageProbeScore
from bat.state.layout import RunLayout

SMOKE = "configs/smoke.yaml"
PROBE = ["evaluate.stage_probe.tracks=[classification]", "evaluate.stage_probe.k=2"]
SHORT = ["rollout.budgets.max_new_tokens_per_turn=8", "rollout.budgets.max_response_tokens=24"]  # keeps CPU time low
ROOMY = [  # budgets the expert's longest stage (S1: brief, spec, every card, the plan) fits in
    "rollout.budgets.max_assistant_turns=40",
    "rollout.budgets.max_tool_calls=40",
    "rollout.budgets.max_new_tokens_per_turn=1024",
    "rollout.budgets.max_response_tokens=16384",
    "rollout.budgets.max_context_tokens=32768",
]


def finished_rollouts(phase_dir):
    return [r for shard in finished_shards(phase_dir) for r in read_shard(shard)]


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory):
    """A run directory with the smoke config's probe built (one classification instance, K=2)."""
    cfg = load_config(SMOKE, PROBE)
    layout = RunLayout(tmp_path_factory.mktemp("probe") / "run").ensure()
    manifest, built = build_probe(cfg, layout)
    assert built
    return cfg, layout, manifest


def test_probe_builds_one_state_per_stage_once(probe_run):
    cfg, layout, manifest = probe_run
    probe = load_probe(layout)
    assert manifest.states_by_stage == dict.fromkeys(cfg.stage_keys, 1) and not manifest.skipped
    assert [s.stage for s in probe.states] == list(cfg.stage_keys)
    assert [s.prefix_turns for s in probe.states] == sorted(s.prefix_turns for s in probe.states)
    for state in probe.states:
        assert f"sha256:{verify_package(probe.files.root / state.state.path).digest}" == state.state.digest
        assert {i.stage for i in state.rubric} == {state.stage} and state.prompt[0].role == "system"
    assert build_probe(cfg, layout) == (manifest, False)  # built once: the second call finds it
    other = load_config(SMOKE, [*PROBE, "evaluate.stage_probe.tasks_per_track=2"])
    with pytest.raises(ProbeMismatchError, match="tasks_per_track"):
        build_probe(other, layout)


def test_probe_stays_on_the_heldout_side_and_meets_no_training_or_eval_instance(probe_run):
    cfg, layout, _ = probe_run
    probe = load_probe(layout)
    heldout = layout.heldout_dir.resolve()
    for path in (probe.files.manifest, probe.files.states, probe.files.trajectories, probe.files.states_dir):
        assert path.resolve().is_relative_to(heldout)
    for state in probe.states:
        assert (probe.files.root / state.state.path).resolve().is_relative_to(heldout)
    assert probe.files.rollouts("x").resolve().is_relative_to(heldout)
    assert not probe.files.score("x").resolve().is_relative_to(heldout)  # only the aggregate is outside
    assert not any(layout.bank_root.iterdir())
    probe_ids = {s.instance_id for s in probe.states}
    secret = run_secret(layout)
    eval_ids = {
        suite_instance(r, cfg).instance_id for split in SPLITS for r in heldout_suite(cfg, split, secret=secret)
    }
    tasks = plan_tasks(cfg, bank_seed(cfg), bank_tracks(cfg)) + plan_e2e_tasks(cfg, bank_seed(cfg), bank_tracks(cfg))
    practice_ids = {t.task_id for t in tasks} | {t.task_id.rsplit(".", 1)[0] for t in tasks}
    assert probe_ids and not probe_ids & eval_ids and not probe_ids & practice_ids
    assert not {s.state_id for s in probe.states} & {t.task_id for t in tasks}
    with pytest.raises(HeldoutAccessError), heldout_guard(layout, "grpo"):  # training phases cannot read it
        probe.files.states.read_text()


def test_probe_scores_a_checkpoint_deterministically_and_the_expert_high(probe_run, tiny_model_builder):
    cfg, layout, manifest = probe_run
    tiny = tiny_model_builder(cfg.model.tiny, cfg.run.seed)
    short = load_config(SMOKE, [*PROBE, *SHORT])
    first = score_checkpoint(short, layout, tiny, "tiny_a")
    again = score_checkpoint(short, layout, tiny, "tiny_b")
    assert first.model_dump(exclude={"label"}) == again.model_dump(exclude={"label"})
    sampled = [[r.token_ids for r in finished_rollouts(layout.stage_probe.rollouts(x))] for x in ("tiny_a", "tiny_b")]
    assert sampled[0] == sampled[1] and len(sampled[0]) == 2 * len(cfg.stage_keys)  # same seeds, same tokens
    assert first.probe_digest == manifest.digest and first.overall.n_states == len(cfg.stage_keys)
    assert first.overall.n_rollouts + first.overall.n_invalid == 2 * len(cfg.stage_keys)
    assert first.overall.mean is not None and first.overall.mean <= 5.0  # the untrained tiny model
    written = layout.stage_probe.score("tiny_a")
    assert StageProbeScore.model_validate_json(written.read_text()) == first
    assert read_scores(layout) == {"tiny_a": first, "tiny_b": again}
    text = written.read_text()
    assert not any(s.instance_id in text or s.state_id in text for s in load_probe(layout).states)
    expert = score_expert(load_config(SMOKE, [*PROBE, *ROOMY, "evaluate.stage_probe.k=1"]), layout, "expert", tiny)
    assert {s: c.mean for s, c in expert.stages.items()} == dict.fromkeys(cfg.stage_keys, 100.0)
    with pytest.raises(FileExistsError, match="never overwritten"):
        score_checkpoint(short, layout, tiny, "tiny_a")
    clash = layout.stage_probe.request("clash")
    clash.parent.mkdir(parents=True)
    clash.write_text(json.dumps({"checkpoint_digest": "another", "k": 2, "temperature": 0.7}))
    with pytest.raises(FileExistsError, match="holds an interrupted probe score"):
        score_checkpoint(short, layout, tiny, "clash")


def test_probe_cli_refuses_bad_input(probe_run, tmp_path, capsys):
    _, layout, _ = probe_run
    common = [
        "evaluate",
        "probe",
        "--state",
        str(layout.root),
        "--config",
        SMOKE,
        *[arg for o in PROBE for arg in ("--set", o)],
    ]
    assert main([*common]) == 2
    assert "exactly one of --checkpoint DIR or --agent expert" in capsys.readouterr().out
    assert main([*common, "--checkpoint", str(tmp_path)]) == 2
    assert "lacks config.json" in capsys.readouterr().out
    layout.stage_probe.score("taken").parent.mkdir(parents=True, exist_ok=True)
    layout.stage_probe.score("taken").write_text(json.dumps({}))
    assert main([*common, "--agent", "expert", "--label", "taken"]) == 2
    assert "never overwritten" in capsys.readouterr().out
    assert main(["evaluate", "probe", "--state", str(tmp_path / "none"), "--agent", "expert"]) == 2
    assert "is not a directory" in capsys.readouterr().out


def test_probe_aggregate_takes_the_state_as_the_unit(probe_run):
    _, layout, _ = probe_run
    states = load_probe(layout).states[:2]  # S1 and S2 of the one instance

    def reward(state, value, valid=True):
        return RewardRecord(
            rollout_id=f"{state.state_id}-{value}-{valid}",
            state_id=state.state_id,
            round=0,
            pool=state.stage,
            stage=state.stage,
            items=[],
            reward_version="test",
            judge="none",
            reward=value if valid else None,
            valid=valid,
            invalid_reason=None if valid else "engine down",
        )

    s1, s2 = states
    rewards = [reward(s1, 1.0), reward(s1, 0.0), reward(s1, 0.5), reward(s2, 0.0, valid=False)]
    cells, overall, ends = aggregate_probe(states, rewards, [], ["S1", "S2"], 0.95)
    assert cells["S1"].mean == pytest.approx(50.0) and cells["S1"].n_rollouts == 3 and cells["S1"].n_states == 1
    assert cells["S2"].mean is None and cells["S2"].n_states == 0 and cells["S2"].n_invalid == 1
    assert overall.n_states == 1 and overall.half_width is None and ends == {}
    two = [reward(s1, 1.0), reward(s1, 0.0), reward(s2, 0.25), reward(s2, 0.25)]
    _, overall, _ = aggregate_probe(states, two, [], ["S1", "S2"], 0.95)
    assert overall.mean == pytest.approx(37.5) and overall.half_width == pytest.approx(100 * half_width([0.5, 0.25]))
    assert state_means(states, rewards) == [pytest.approx(0.5), None] and state_means(states, two) == [0.5, 0.25]
