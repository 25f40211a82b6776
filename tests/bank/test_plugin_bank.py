"""The Stage Bank, the rollout opener and the verifier on a plug-in benchmark (`sqlqa`) through the interface:
stage states by prefix replay, restored workspaces equal to their packages, E2E surrogates, SFT rows in the
benchmark's own opening, and rewards of replayed continuations from the benchmark's own grader."""

import pytest

from bat.bank.plugin_states import load_state, open_row, task_of
from bat.bank.store import open_bank
from bat.bank.synthesize import synthesize
from bat.benchmark.secret import HeldoutSecret, install_secret
from bat.config import parse_config
from bat.rollout.envs import bank_opener
from bat.rollout.runner import StateJob
from bat.schemas.bank import E2E
from bat.schemas.rollout import RolloutRecord, TurnRecord
from bat.staged.interface import read_tree
from bat.staged.registry import load
from bat.state.layout import RunLayout
from bat.verify.phase import make_verifier
from bat.verify.plugin_verify import PluginVerifier

STAGES = ["inspect", "draft", "validate", "submit"]


def _cfg(**bank):
    return parse_config(
        {
            "benchmark": {"name": "sqlqa", "repeats": 1},
            "bank": {"tasks_per_track": 2, "e2e_per_track": 1, **bank},
            "run": {"rounds": 0},
        }
    )


def _layout(root):
    lay = RunLayout(root / "run").ensure()
    (root / "SECRET").write_text(HeldoutSecret.from_text("sqlqa-bank").key + "\n", encoding="ascii")
    install_secret(root / "SECRET", lay.heldout_secret)
    return lay


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("plugin-bank")
    layout = _layout(root)
    cfg = _cfg()
    bank, reused = synthesize(cfg, layout)
    assert not reused
    return cfg, layout, open_bank(layout, bank.version, admitted_only=False)


def test_the_bank_has_the_plugins_stages_outcomes_and_e2e_rows(built):
    _, _, bank = built
    manifest = bank.manifest()
    assert manifest.stages == STAGES and manifest.tracks == ["count", "total", "join"]
    rows = bank.rows()
    assert {r.stage for r in rows} == {*STAGES, E2E}
    assert {r.outcome for r in rows} == {"success", "recovery", "failure"}
    counts = manifest.counts
    assert counts["e2e"]["accepted"] == 3 and counts["sft"]["train"] > 0
    for row in rows:
        assert {c.stage for c in row.rubric} == (set(STAGES) if row.stage == E2E else {row.stage})
        assert row.prompt[0].content.startswith("You are a careful data analyst")
    recovery = [r for r in rows if r.outcome == "recovery"]
    assert recovery and {r.stage for r in recovery} == {"validate"}  # where the expert-variant turned back
    failure = [r for r in rows if r.outcome == "failure"]
    assert failure and "inspect" not in {r.stage for r in failure}  # the mistake is in inspect: later states only
    sft = bank.sft_rows("train") + bank.sft_rows("validation")
    assert all(r.messages[0].content.startswith("You are a careful data analyst") for r in sft)
    # a recovery run's naive draft and its run on the sample are context for later rows, never targets
    assert bank.sft_rejected()["skipped_flawed"] == 2 * len({r.provenance.trajectory_id for r in recovery})


def test_same_seed_same_bank_and_reuse(built, tmp_path):
    cfg, layout, bank = built
    again, reused = synthesize(cfg, layout)
    assert reused and again.version == bank.version
    other, _ = synthesize(cfg, _layout(tmp_path))
    assert other.manifest().digests == bank.manifest().digests
    refreshed, reused = synthesize(cfg, layout, refresh=1)
    assert not reused and refreshed.manifest().fingerprint != bank.manifest().fingerprint


def test_restored_states_equal_their_packages(built, tmp_path):
    cfg, _, bank = built
    bench_rows = bank.rows()
    opener = bank_opener(bank, cfg)
    for row in bench_rows[:6]:
        state = load_state(bank.state_dir(row.state_id), row.task.task_id, row.stage)
        opened = opener(StateJob(row.state_id, "S-target", row.stage, payload=row), 0, tmp_path / row.state_id)
        opened.env.reset()
        assert read_tree(opened.workspace) == dict(state.files)
        assert opened.messages[0]["content"] == row.prompt[0].content and opened.stage_exit is None
        opened.close()


def _record(row, turns, **extra):
    return RolloutRecord(
        rollout_id=f"r-{row.state_id}",
        state_id=row.state_id,
        round=1,
        shard=0,
        k=0,
        pool="E2E" if row.stage == E2E else "S-target",
        stage=row.stage,
        seed=0,
        engine="test",
        checkpoint="test",
        temperature=0.0,
        token_ids=[],
        loss_mask=[],
        behavior_logprobs=[],
        prompt_len=0,
        segments=[],
        turns=turns,
        tool_calls=len(turns),
        response_tokens=0,
        end_reason="done",
        **extra,
    )


def _continuation(bank, row, tmp_path):
    """The teacher's own turns after the row's prefix, as rollout turns played in the restored environment."""
    trajectory = bank.trajectory(row.provenance.trajectory_id)
    turns = []
    with open_row(load("sqlqa"), bank.path, row, tmp_path / "play") as env:
        env.reset()
        for i, teacher in enumerate(trajectory.turns[row.provenance.prefix_turns :]):
            step = env.step(teacher.call)
            turns.append(
                TurnRecord(
                    index=i,
                    response_text=teacher.response,
                    generated_tokens=1,
                    finish="stop",
                    call=teacher.call,
                    observation=step.observation,
                    record=dict(step.info),
                )
            )
    return turns


def test_the_verifier_replays_and_grades_with_the_benchmark(built, tmp_path):
    cfg, _, bank = built
    verifier = make_verifier(cfg, "rubric")
    assert isinstance(verifier, PluginVerifier)
    success = [r for r in bank.rows() if r.outcome == "success"]
    for stage in [*STAGES, E2E]:
        row = next(r for r in success if r.stage == stage)
        turns = _continuation(bank, row, tmp_path / stage)
        reward = verifier.verify(_record(row, turns), row, bank.path, tmp_path / "v")
        assert reward.valid and reward.reward == pytest.approx(1.0), (stage, reward)
        assert {i.item_id for i in reward.items} == {c.id for c in row.rubric}
        idle = verifier.verify(_record(row, []), row, bank.path, tmp_path / "v")
        assert idle.valid and idle.reward < 1.0
        if turns:
            forged = [turns[0].model_copy(update={"observation": "forged"}), *turns[1:]]
            bad = verifier.verify(_record(row, forged), row, bank.path, tmp_path / "v")
            assert not bad.valid and "diverged" in bad.invalid_reason
    final = make_verifier(cfg, "final").verify(_record(row, turns), row, bank.path, tmp_path / "v")
    assert final.reward == 1.0 and final.task_score == 1.0
    recovery = next(r for r in bank.rows() if r.outcome == "recovery")
    start = verifier.verify(_record(recovery, []), recovery, bank.path, tmp_path / "v")
    assert start.reward == 0.5  # the draft ran, its sample answer was 0: fixing it is the work
    assert task_of(load("sqlqa"), recovery.task).track == recovery.track


def test_a_benchmark_without_the_variant_agents_gets_expert_rows_only(tmp_path):
    from bat.benchmarks.sqlqa import SqlQA
    from bat.staged import registry

    class ExpertOnly(SqlQA):
        name = "sqlqa-expert"
        agents = ("expert",)

    registry.register("sqlqa-expert", ExpertOnly)
    try:
        cfg = parse_config(
            {
                "benchmark": {"name": "sqlqa-expert", "repeats": 1},
                "bank": {"tasks_per_track": 1, "e2e_per_track": 0, "tracks": ["join"]},
                "leakage": {"enabled": False},
            }
        )
        bank, _ = synthesize(cfg, RunLayout(tmp_path / "run").ensure())
        assert {r.outcome for r in bank.rows()} == {"success"} and {r.stage for r in bank.rows()} == set(STAGES)
    finally:
        registry.unregister("sqlqa-expert")
