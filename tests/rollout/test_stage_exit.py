"""Stage exit (`rollout.stage_exit`): a stage row's rollout ends once every rubric item and evidence id of its row is
settled (`bat.benchmark.settled`), and ending it there never changes the row's reward.

Proof on recorded rollouts: every scripted agent (the expert and the faulty ones) on several tracks and practice
seeds, a stage row at every stage it reaches (and the recovery row after the failed pilot check), under the default
call budget and a tight one. For each row the reward of the full continuation equals the reward of the transcript
cut at the stage exit, and so does the reward of hostile continuations from the cut (a rewritten plan, failed setup
calls, other models, new pilots, re-runs with broken settings, invalid calls, a finished submission) within the calls
the budget leaves. The one documented exception, a sandbox breach after the cut, is pinned down as well. Then the
loop: it ends at the cut with `stage_exit` and the real verifier gives the same reward; E2E rows and evaluation runs
are never cut; the shard runner, the breakdown and the phase settings wire it as documented.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rollout_doubles import ScriptedEngine, ToyEnv, make_messages

from bat.benchmark import StagedEnv, evidence_requirements, grade, rubric
from bat.benchmark.agents import AGENTS, DEFAULTS, _good_settings, _pilot_cases, run_agent
from bat.benchmark.settled import RULES, rule_for, settlement
from bat.benchmark.suite import practice_instance, practice_seed
from bat.config.contract import BUILTIN_CONTRACT
from bat.config.rollout import RolloutBudgets, RolloutConfig
from bat.config.root import BatConfig
from bat.policy.codec import render_tool_call
from bat.rollout.breakdown import analyse_run, summarise
from bat.rollout.chat import TurnTokens
from bat.rollout.envs import judged_ids, stage_exit_check
from bat.rollout.loop import run_rollouts
from bat.rollout.phase import loop_settings
from bat.rollout.runner import OpenedEnv, StateJob, run_shards
from bat.rollout.shards import read_rollouts, shard_dir
from bat.rollout.spec import LoopSettings, RolloutSpec
from bat.schemas.breakdown import STAGE_DONE
from bat.verify.phase import execution_records, make_verifier
from bat.verify.reward import eta_from, stage_reward
from bat.verify.verifier import StateTruth

CFG = BatConfig.model_validate({"benchmark": {"runtime": "inprocess"}})
TRACKS = ("classification", "detection", "segmentation", "vqa")
SEEDS = (0, 1)
FIRST_SEEDS = {practice_seed(track, 0, CFG) for track in TRACKS}
"""The practice seed of index 0 of each track: the per-id proof follows every id of these runs."""
STAGES = ("S1", "S2", "S3", "S4", "S5")
DEFAULT_CALLS = RolloutBudgets().max_tool_calls
TIGHT_CALLS = 6
"""A call budget tight enough that S2 rows settle too (s2d: failures + calls left <= the fail limit)."""
CLEAN = "all checked outputs match the contract"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@dataclass(frozen=True)
class Row:
    """A stage row cut from a recorded run: the instance, the prefix the state is built from and what followed."""

    label: str
    inst: Any
    stage: str
    prefix: tuple[dict[str, Any], ...]
    continuation: tuple[dict[str, Any], ...]

    @property
    def ids(self) -> tuple[list[str], list[str]]:
        """(rubric item ids, evidence ids) of the row, as the bank writes them (`bat.bank.rows.contract_refs`)."""
        items = [i.id for i in rubric(self.stage, self.inst.track, CFG.benchmark.contract)]
        evidence = [e.id for e in evidence_requirements(self.stage, CFG.benchmark.contract)]
        return items, evidence


def _rows_of(agent: str, inst: Any, workdir: Path) -> list[Row]:
    """Record `agent` on `inst` and cut a row at the first turn of every stage it reaches (the bank's boundaries),
    plus, after a failed pilot check, the recovery row the bank starts there."""
    with StagedEnv(inst, workdir / "ws", workdir / "g", CFG) as env:
        env.reset()
        traj = run_agent(env, inst, agent)
    calls = [t.call for t in traj.turns]
    starts: dict[str, int] = {}
    for t, turn in enumerate(traj.turns):
        if turn.stage in STAGES:
            starts.setdefault(turn.stage, t)
    failed = [
        t
        for t, turn in enumerate(traj.turns)
        if turn.call["name"] == "check_outputs" and turn.stage == "S3" and CLEAN not in turn.observation
    ]
    if failed:
        starts["S3-recovery"] = failed[0] + 1
    label = f"{agent}/{inst.track}/{inst.seed}"
    return [
        Row(f"{label}/{key}", inst, key.split("-")[0], tuple(calls[:b]), tuple(calls[b:])) for key, b in starts.items()
    ]


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> list[Row]:
    workdir = tmp_path_factory.mktemp("recorded")
    out = []
    for track in TRACKS:
        for index in SEEDS:
            inst = practice_instance(track, practice_seed(track, index, CFG), CFG)
            for agent in AGENTS:
                out += _rows_of(agent, inst, workdir / f"{agent}-{track}-{index}")
    return out


def open_row(row: Row, workdir: Path) -> StagedEnv:
    """An environment at the row's start, as `bat.bank.rows.open_row_env` opens one: the prefix's workspace and its
    records as prior records (not reset yet)."""
    with StagedEnv(row.inst, workdir / "ws", workdir / "g", CFG) as base:
        base.reset()
        for c in row.prefix:
            base.step(c)
        prior = list(base.records)
    return StagedEnv(None, workdir / "ws", workdir / "g", CFG, prior_records=prior)


def row_reward(env: StagedEnv, row: Row) -> float | None:
    """The verifier's stage-row reward (`Verifier.verify`): 0 after a breach, else eta * mean of the row's items,
    the verdicts from the whole trajectory and eta from the rollout's own records once the row has a prefix
    (`verify.stage_evidence: rollout`, the default)."""
    items, evidence = row.ids
    score = grade(env.workspace, env.grader_dir, env.all_records, CFG)
    if score.breach:
        return 0.0
    verdicts = {i: v for i, v in score.items[row.stage].items() if i in items}
    own = grade(env.workspace, env.grader_dir, env.records, CFG) if env.prior_records else score
    return stage_reward(verdicts, eta_from(own.evidence[row.stage], evidence))


def all_ids(track: str) -> list[str]:
    """Every item and evidence id of every stage (what the per-id proof follows)."""
    items = [i.id for stage in STAGES for i in rubric(stage, track, CFG.benchmark.contract)]
    return items + [e.id for stage in STAGES for e in evidence_requirements(stage, CFG.benchmark.contract)]


def verdicts(env: StagedEnv) -> dict[str, Any]:
    """Every item verdict (`absent` where the item does not apply) and evidence value the grader gives now."""
    score = grade(env.workspace, env.grader_dir, env.all_records, CFG)
    out: dict[str, Any] = {}
    for stage in STAGES:
        out.update({i.id: score.items[stage].get(i.id, "absent") for i in rubric(stage, score.track)})
        out.update(score.evidence[stage])
    return out


@dataclass
class Played:
    """One replay of a row: its reward, where every followed id was first settled, and (traced) what was settled
    and every verdict after each call."""

    reward: float | None
    cut: int | None
    settled: list[frozenset[str]]
    """After each call: the ids settled (all of them where the loop does not ask: nothing can follow)."""
    asked: list[bool]
    """After each call: whether the loop would ask (the episode goes on and a call is left)."""
    verdicts: list[dict[str, Any]]


def play(
    row: Row,
    calls: tuple[dict[str, Any], ...],
    budget: int,
    workdir: Path,
    *,
    stop: bool = False,
    ids: list[str] | None = None,
    trace: bool = False,
) -> Played:
    """Run the row with `calls` (at most `budget` of them, as the rollout budget allows), asking the settled check
    of `ids` (default: the row's) after every call the way the loop does: not after the call that ended the episode
    and not once no call is left (a budget ends the run there anyway). `stop` ends at the first point where every id
    is settled (the stage exit); `trace` keeps the settled ids and every verdict after each call."""
    env = open_row(row, workdir)
    env.reset()
    items, evidence = row.ids
    exit_check = stage_exit_check(env, _bank_row(row), CFG) if ids is None else None
    ids = ids if ids is not None else items + evidence
    cut, settled, asks, seen = None, [], [], []
    for k, c in enumerate(calls[:budget], start=1):
        env.step(c)
        asked = not env.done and k < budget
        if exit_check is not None:  # the row's own ids, asked the way the loop asks (`stage_exit_check`)
            pending = {} if not asked or exit_check(budget - k) else dict.fromkeys(ids, "the row is not settled")
        else:
            pending = env.settlement(ids, budget - k).pending if asked else {}
        settled.append(frozenset(i for i in ids if i not in pending))
        asks.append(asked)
        if trace:
            seen.append(verdicts(env))
        if asked and cut is None and not pending:
            cut = k
            if stop:
                break
        if env.done:
            break
    reward = row_reward(env, row)
    env.close()
    return Played(reward, cut, settled, asks, seen)


def hostile_tails(inst: Any) -> dict[str, tuple[dict[str, Any], ...]]:
    """Continuations that try to change a settled verdict after it settled: a rewritten plan, failed setup calls,
    another model loaded and run, new (failing, fixed and unfixed) pilots, re-runs with broken settings, invalid
    calls, a full submission."""
    fit = inst.fitting_model
    other = next(c for c in inst.candidates if c != fit)
    one, two, good = [inst.case_ids[0]], inst.case_ids[:2], _good_settings(inst)
    replan = (call("write_plan", text=f"# Plan\nUse {other} and skip checks."), call("write_plan", text="short"))
    break_setup = (
        *[call("install", package="no-such-package")] * 6,
        call("load_model", model=other),
        call("check_compatibility", model=other),
        call("load_model", model=fit),
    )
    new_pilots = (
        call("run_model", cases=one, **DEFAULTS),
        call("check_outputs", cases=one),
        call("run_model", cases=two, **good),
        call("check_outputs", cases=two),
    )
    broken_rerun = (
        call("run_model", cases=["all"], **DEFAULTS),
        call("check_outputs", cases=["all"]),
        call("run_model", cases=one, **good),
    )
    invalid = ({"invalid": True, "reason": "bad_json", "detail": "x"}, call("list_files", path="."))
    needs = json.loads(inst.files[f"models/{other}/weights.json"])["requires"]
    pilot = _pilot_cases(inst)
    return {
        "mess": (*invalid, *replan, *new_pilots, *break_setup),
        "broken": (*broken_rerun, *break_setup, *replan),
        "swap_model": (
            *[call("install", package=p) for p in needs],
            call("load_model", model=other),
            call("run_model", cases=two, **DEFAULTS),
            call("check_outputs", cases=two),
            call("run_model", cases=["all"], **good),
        ),
        "unfixed_pilot": (
            call("run_model", cases=pilot, **DEFAULTS),
            call("check_outputs", cases=pilot),
            call("run_model", cases=["all"], **good),
        ),
        "finish": (call("run_model", cases=["all"], **good), call("check_outputs", cases=["all"]), call("submit")),
    }


@pytest.mark.slow
@pytest.mark.parametrize("budget", [DEFAULT_CALLS, TIGHT_CALLS])
def test_cut_reward_equals_full_and_hostile_continuation_rewards(rows, tmp_path, budget):
    cuts: dict[str, list[tuple[str, int | None]]] = {s: [] for s in STAGES}
    for n, row in enumerate(rows):
        full = play(row, row.continuation, budget, tmp_path / f"{n}-full")
        cut = play(row, row.continuation, budget, tmp_path / f"{n}-cut", stop=True)
        assert cut.cut == full.cut and cut.reward == full.reward, (row.label, full.cut, cut.reward, full.reward)
        cuts[row.stage].append((row.label, full.cut))
        if full.cut is None:
            continue
        for name, tail in hostile_tails(row.inst).items():
            other = play(row, row.continuation[: full.cut] + tail, budget, tmp_path / f"{n}-{name}")
            assert other.reward == cut.reward, (row.label, name, other.reward, cut.reward)
    # where the cut falls, as derived in bat.benchmark.settled
    assert all(cut is None for stage in ("S1", "S4", "S5") for _, cut in cuts[stage])
    s3_cut = [label for label, cut in cuts["S3"] if cut is not None]
    assert len(s3_cut) >= len(TRACKS) * len(SEEDS) * 3  # expert, recovery and failure rows settle at their batch run
    s2_cut = [label for label, cut in cuts["S2"] if cut is not None]
    assert bool(s2_cut) == (budget == TIGHT_CALLS)


@pytest.mark.slow
@pytest.mark.parametrize("budget", [DEFAULT_CALLS, TIGHT_CALLS])
def test_a_settled_verdict_never_changes_afterwards(rows, tmp_path, budget):
    """Per id, stronger than the row reward: from the call where an item or evidence id is first settled, its
    verdict (and whether it applies) is the same at that point, at the end of the recorded run and at the end of
    every hostile continuation; and a settled id stays settled."""
    whole_runs = [r for r in rows if r.stage == "S1" and not r.prefix and r.inst.seed in FIRST_SEEDS]
    assert len(whole_runs) == len(TRACKS) * len(AGENTS)
    for n, row in enumerate(whole_runs):
        ids = all_ids(row.inst.track)
        full = play(row, row.continuation, budget, tmp_path / f"{n}-full", ids=ids, trace=True)
        for before, after in zip(full.settled, full.settled[1:]):
            assert before <= after, (row.label, sorted(before - after))
        newly = [now - before for before, now in zip([frozenset()] + full.settled, full.settled)]
        points = [k for k, (new, asked) in enumerate(zip(newly, full.asked), start=1) if new and asked]
        for k in points:
            fixed, at = full.settled[k - 1], full.verdicts[k - 1]
            assert all(full.verdicts[-1][i] == at[i] for i in fixed), (row.label, k)
            for name, tail in hostile_tails(row.inst).items():
                other = play(
                    row, row.continuation[:k] + tail, budget, tmp_path / f"{n}-{k}-{name}", ids=ids, trace=True
                )
                changed = sorted(i for i in fixed if other.verdicts[-1][i] != at[i])
                assert not changed, (row.label, k, name, changed)


def test_the_cut_falls_right_after_the_first_batch_run(rows, tmp_path):
    expert = [r for r in rows if r.label.startswith("expert/") and r.stage == "S3"]
    assert expert
    for n, row in enumerate(expert):
        cut = play(row, row.continuation, DEFAULT_CALLS, tmp_path / str(n), stop=True).cut
        batch = next(
            k
            for k, c in enumerate(row.continuation, 1)
            if c["name"] == "run_model" and c["arguments"]["cases"] == ["all"]
        )
        assert cut == batch and len(row.continuation) - cut == 2  # check_outputs(all) and submit are saved


def test_a_breach_after_the_cut_is_the_documented_exception(rows, tmp_path):
    row = next(r for r in rows if r.label.startswith("expert/") and r.stage == "S3")
    cut = play(row, row.continuation, DEFAULT_CALLS, tmp_path / "cut", stop=True)
    breach = (call("read_file", path="../g/instance.json"),)
    breached = play(row, row.continuation[: cut.cut] + breach, DEFAULT_CALLS, tmp_path / "breach")
    assert cut.reward == 1.0 and breached.reward == 0.0


def test_settlement_names_what_it_waits_for(rows, tmp_path):
    row = next(r for r in rows if r.label.startswith("expert/") and r.stage == "S3")
    env = open_row(row, tmp_path / "row")
    env.reset()
    items, evidence = row.ids
    waiting = env.settlement([*items, *evidence, "z9_unknown"], DEFAULT_CALLS, judged={"s3a_pilot_before_batch"})
    assert not waiting.settled
    assert waiting.pending["s3c_failure_fixed"].startswith("after the first ok batch run_model")
    assert waiting.pending["s3a_pilot_before_batch"].startswith("decided by the LLM judge")
    assert "s3a_pilot_before_batch" in waiting.pending["z9_unknown"]  # lists the ids that have a rule
    assert env.settlement(items + evidence, 0).settled  # no call can follow: nothing can change
    env.close()


def test_every_builtin_item_and_evidence_id_has_a_rule():
    for stage in BUILTIN_CONTRACT.values():
        for spec in (*stage.items, *stage.evidence):
            assert rule_for(spec.id.replace("{track}", "vqa"), "vqa") is RULES[spec.id]


def _bank_row(row: Row) -> SimpleNamespace:
    items, evidence = row.ids
    return SimpleNamespace(
        stage=row.stage,
        track=row.inst.track,
        rubric=[SimpleNamespace(id=i) for i in items],
        evidence=[SimpleNamespace(id=e) for e in evidence],
    )


def _verify(outcome: Any, env: StagedEnv, row: Row, workdir: Path) -> float | None:
    """The real verifier's reward of one loop outcome (evidence = the rollout's final workspace)."""
    items, evidence = row.ids
    rec = outcome.record.model_copy(update={"evidence_dir": env.workspace.name})
    truth = StateTruth("s", row.stage, row.inst.track, env.grader_dir, items, evidence, list(env.prior_records))
    records = execution_records(rec, outcome.timings)
    return make_verifier(CFG).verify(rec, env.workspace.parent, truth, records, workdir).reward


def _spec(i: int, env: StagedEnv, stage: str, check: Any) -> RolloutSpec:
    return RolloutSpec(
        rollout_id=f"r{i}",
        state_id=f"s{i}",
        k=0,
        seed=i,
        env=env,
        messages=make_messages(i),
        workspace=env.workspace,
        pool="E2E" if stage == "E2E" else "S-target",
        stage=stage,
        stage_exit=check,
    )


def _scripts(row: Row, n: int) -> dict[int, list[str]]:
    texts = [render_tool_call(c, thought="Next step.") for c in row.continuation]
    return dict.fromkeys(range(n), texts)


def test_the_loop_ends_a_stage_row_at_its_stage_exit_with_the_same_verified_reward(rows, tokenizer, tmp_path):
    row = next(r for r in rows if r.label.startswith("expert/classification/") and r.label.endswith("/S3"))
    tt = TurnTokens(tokenizer)
    got = {}
    for on in (True, False):
        env = open_row(row, tmp_path / f"on-{on}")
        spec = _spec(0, env, "S3", stage_exit_check(env, _bank_row(row), CFG))
        engine = ScriptedEngine(tokenizer, _scripts(row, 1), end_id=tt.stop_ids[0])
        (outcome,) = run_rollouts(engine, [spec], tt, LoopSettings(budgets=RolloutBudgets(), stage_exit=on))
        got[on] = (outcome.record, _verify(outcome, env, row, tmp_path / f"verify-{on}"))
        env.close()
    (cut, cut_reward), (full, full_reward) = got[True], got[False]
    assert cut.end_reason == "stage_exit" and cut.valid and full.end_reason == "done"
    assert len(cut.turns) == 3 and len(full.turns) == 5
    assert cut.turns[-1].call["name"] == "run_model" and cut.turns[-1].record["stage"] == "S4"
    assert cut.segments[-1].kind == "generated"  # like `done`: the last observation is recorded, not appended
    assert cut.token_ids == full.token_ids[: len(cut.token_ids)]
    assert cut_reward == full_reward == 1.0


def test_e2e_rows_and_evaluation_runs_are_never_cut(rows, tokenizer, tmp_path):
    row = next(r for r in rows if r.label.startswith("expert/") and r.stage == "S3")
    tt = TurnTokens(tokenizer)
    envs = [open_row(row, tmp_path / f"e{i}") for i in range(2)]
    e2e = _spec(0, envs[0], "E2E", stage_exit_check(envs[0], _bank_row(row), CFG))
    evaluation = _spec(1, envs[1], "S3", stage_exit_check(envs[1], _bank_row(row), CFG))
    engine = ScriptedEngine(tokenizer, _scripts(row, 2), end_id=tt.stop_ids[0])
    # E2E: never cut even with the setting on; evaluation builds LoopSettings without it (off by default)
    (a,) = run_rollouts(engine, [e2e], tt, LoopSettings(budgets=RolloutBudgets(), stage_exit=True))
    (b,) = run_rollouts(engine, [evaluation], tt, LoopSettings(budgets=RolloutBudgets()))
    assert a.record.end_reason == b.record.end_reason == "done"
    assert len(a.record.turns) == len(b.record.turns) == len(row.continuation)
    assert stage_exit_check(envs[0], SimpleNamespace(stage="E2E"), CFG) is None
    assert (
        RolloutSpec("r", "s", 0, 0, envs[0]).stage_exit is None and RolloutSpec("r", "s", 0, 0, envs[0]).stage == "E2E"
    )
    for env in envs:
        env.close()


def test_shard_runner_cuts_stage_rows_only_and_reports_the_end_reason(rows, tokenizer, tmp_path):
    row = next(r for r in rows if r.label.startswith("expert/") and r.stage == "S3")
    tt = TurnTokens(tokenizer)
    jobs = [StateJob("st3", "S-target", "S3"), StateJob("e2e", "E2E", "E2E")]

    def open_env(job: StateJob, k: int, workdir: Path) -> OpenedEnv:
        env = open_row(row, workdir)
        index = [j.state_id for j in jobs].index(job.state_id)
        # both get a check: the runner must drop the E2E row's
        check = stage_exit_check(env, _bank_row(row), CFG)
        return OpenedEnv(
            env=env, workspace=env.workspace, messages=make_messages(index), close=env.close, stage_exit=check
        )

    phase = tmp_path / "rollout"
    run_shards(
        phase,
        jobs,
        k=1,
        states_per_shard=2,
        run_seed=1,
        round_index=0,
        open_env=open_env,
        engine_factory=lambda: ScriptedEngine(tokenizer, _scripts(row, 2), end_id=tt.stop_ids[0]),
        turn_tokens=lambda: tt,
        settings=LoopSettings(budgets=RolloutBudgets(), stage_exit=True),
        scratch=tmp_path / "scratch",
    )
    by_state = {r.state_id: r for r in read_rollouts(phase)}
    assert by_state["st3"].end_reason == "stage_exit" and by_state["e2e"].end_reason == "done"
    meta = json.loads((shard_dir(phase, 0) / "DONE.json").read_text())
    assert meta["end_reasons"] == {"done": 1, "stage_exit": 1}
    breakdown = json.loads((shard_dir(phase, 0) / "breakdown.json").read_text())
    assert breakdown["summary"]["end_reasons"] == {"done": 1, "stage_exit": 1}
    stalled = {r["run_id"]: r["stalled"] for r in breakdown["runs"]}
    assert stalled[by_state["st3"].rollout_id] == STAGE_DONE and stalled[by_state["e2e"].rollout_id] != STAGE_DONE


def test_breakdown_reports_a_stage_exit_as_a_done_stage_not_a_stall():
    b = analyse_run("r", [], "stage_exit", "", STAGES, start_stage="S3")
    assert b.stalled == STAGE_DONE
    assert summarise([b]).end_reasons == {"stage_exit": 1} and summarise([b]).stalled == {STAGE_DONE: 1}


def test_phase_settings_cut_only_with_the_option_and_the_rubric_reward():
    assert RolloutConfig().stage_exit is True
    assert loop_settings(RolloutConfig(), "rubric", []).stage_exit is True
    assert loop_settings(RolloutConfig(), "final", []).stage_exit is False
    assert loop_settings(RolloutConfig(stage_exit=False), "rubric", []).stage_exit is False


def test_judge_items_are_never_settled_when_the_judge_decides_them(rows):
    row = next(r for r in rows if r.stage == "S1")
    judged_cfg = BatConfig.model_validate({"verify": {"judge": {"enabled": True}}})
    track = row.inst.track
    assert judged_ids(_bank_row(row), judged_cfg) == {"s1b_plan_pipeline", f"s1c_{track}_model"}
    assert judged_ids(_bank_row(row), CFG) == set()


def test_settlement_reads_the_same_verdicts_as_the_grader(rows, tmp_path):
    """`settlement` is a pure function of records, workspace and metadata: called on a finished S3 row it agrees
    with the grader (nothing pending once the batch ran)."""
    row = next(r for r in rows if r.label.startswith("failure/") and r.stage == "S3")
    env = open_row(row, tmp_path / "row")
    env.reset()
    for c in row.continuation[:-1]:
        env.step(c)
    items, evidence = row.ids
    meta = json.loads((env.grader_dir / "instance.json").read_text())
    direct = settlement(env.all_records, env.workspace, meta, items + evidence, CFG, 5)
    assert direct == env.settlement(items + evidence, 5) and direct.settled
    env.close()


def test_a_failing_check_ends_the_rollout_as_an_infrastructure_failure(tokenizer, tmp_path):
    def broken(_left: int) -> bool:
        raise FileNotFoundError("grader side is gone")

    tt = TurnTokens(tokenizer)
    env = ToyEnv(tmp_path / "ws")
    spec = RolloutSpec("r0", "s0", 0, 0, env, messages=make_messages(0), workspace=env.workspace, stage="S3")
    spec.stage_exit = broken
    engine = ScriptedEngine(tokenizer, {0: [render_tool_call(call("write", path="a.txt", text="x"))]}, tt.stop_ids[0])
    (out,) = run_rollouts(engine, [spec], tt, LoopSettings(budgets=RolloutBudgets(), stage_exit=True))
    assert out.record.end_reason == "error" and not out.record.valid
    assert "stage_exit check failed: FileNotFoundError" in out.record.invalid_reason and len(out.record.turns) == 1


def _verify_with(outcome: Any, env: StagedEnv, row: Row, workdir: Path, config: BatConfig) -> float | None:
    """`_verify` under another config (the real verifier's reward of one loop outcome)."""
    items, evidence = row.ids
    rec = outcome.record.model_copy(update={"evidence_dir": env.workspace.name})
    truth = StateTruth("s", row.stage, row.inst.track, env.grader_dir, items, evidence, list(env.prior_records))
    records = execution_records(rec, outcome.timings)
    return make_verifier(config).verify(rec, env.workspace.parent, truth, records, workdir).reward


def test_a_recovery_row_pays_only_for_the_evidence_its_rollout_confirms(rows, tokenizer, tmp_path):
    """A recovery state's prefix already holds the failed pilot and the check (s3a, s3b true): with
    `verify.stage_evidence: rollout` a rollout that stops at once earns 0, one that re-pilots and fixes earns 1; with
    `trajectory` (reward v2) both earn at least 0.667 and the lazy one exactly that, so a group carries no gradient."""
    row = next(r for r in rows if r.label.startswith("recovery/classification/") and r.label.endswith("/S3-recovery"))
    assert any(c["name"] == "run_model" for c in row.prefix) and any(c["name"] == "check_outputs" for c in row.prefix)
    tt = TurnTokens(tokenizer)
    scripts = {0: ["The pilot failed, so I stop here."], 1: _scripts(row, 1)[0]}
    trajectory = CFG.model_copy(update={"verify": CFG.verify.model_copy(update={"stage_evidence": "trajectory"})})
    got: dict[str, list[float | None]] = {}
    for name, config in (("rollout", CFG), ("trajectory", trajectory)):
        envs = [open_row(row, tmp_path / f"{name}-{i}") for i in range(2)]
        specs = [_spec(i, env, "S3", stage_exit_check(env, _bank_row(row), config)) for i, env in enumerate(envs)]
        engine = ScriptedEngine(tokenizer, scripts, end_id=tt.stop_ids[0])
        outcomes = run_rollouts(engine, specs, tt, LoopSettings(budgets=RolloutBudgets(), stage_exit=True))
        assert outcomes[0].record.end_reason == "no_tool_call" and outcomes[1].record.end_reason == "stage_exit"
        got[name] = [
            _verify_with(o, env, row, tmp_path / f"verify-{name}-{i}", config)
            for i, (o, env) in enumerate(zip(outcomes, envs))
        ]
        for env in envs:
            env.close()
    assert got["rollout"] == [0.0, 1.0]
    assert got["trajectory"][0] == pytest.approx(2 / 3) and got["trajectory"][1] == 1.0
