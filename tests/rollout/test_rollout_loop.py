"""Agent loop: token-in/token-out masks, budgets with their end reasons, malformed calls, real HF engine."""

from __future__ import annotations

import json

import pytest
import torch
from rollout_doubles import ScriptedEngine, ToyEnv, make_messages

from bat.config.rollout import RolloutBudgets
from bat.policy.codec import render_tool_call
from bat.rollout.chat import TurnTokens
from bat.rollout.loop import run_rollouts
from bat.rollout.spec import LoopSettings, RolloutSpec


def call(name: str, **arguments) -> str:
    return render_tool_call({"name": name, "arguments": arguments}, thought=f"I will use {name}.")


def run_scripted(
    tokenizer, tmp_path, scripts, budgets=None, no_tool_call="end", envs=None, stages=None, row_turns=None
):
    tt = TurnTokens(tokenizer)
    engine = ScriptedEngine(tokenizer, scripts, end_id=tt.stop_ids[0])
    specs = []
    for i in scripts:
        env = (envs or {}).get(i) or ToyEnv(tmp_path / f"ws{i}")
        specs.append(
            RolloutSpec(
                rollout_id=f"r{i}",
                state_id="s",
                k=i,
                seed=100 + i,
                env=env,
                messages=make_messages(i),
                workspace=env.workspace,
                stage=(stages or {}).get(i, "E2E"),
            )
        )
    settings = LoopSettings(
        budgets=budgets or RolloutBudgets(), temperature=1.0, no_tool_call=no_tool_call, stage_row_turns=row_turns
    )
    return [o.record for o in run_rollouts(engine, specs, tt, settings)], tt


def masked_text(tt, rec) -> str:
    return tt.decode(rec.generated_ids)


def test_multiturn_masks_align_and_malformed_call_continues(tokenizer, tmp_path):
    scripts = {0: [call("write", path="out.txt", text="hello"), "<tool_call>{not json</tool_call>", call("submit")]}
    (rec,), tt = run_scripted(tokenizer, tmp_path, scripts)
    assert rec.end_reason == "done" and rec.valid
    assert [t.finish for t in rec.turns] == ["stop", "stop", "stop"]
    # decode of the masked-in tokens equals the generated text, turn by turn
    assert masked_text(tt, rec) == "".join(t.response_text for t in rec.turns)
    assert all(t.response_text.endswith("<|im_end|>") for t in rec.turns)
    # behavior logprobs live exactly on generated tokens
    assert all((lp != 0.0) == bool(m) for lp, m in zip(rec.behavior_logprobs, rec.loss_mask))
    assert rec.prompt_len > 0 and not any(rec.loss_mask[: rec.prompt_len])
    # the malformed call became an error observation and the rollout went on
    bad = rec.turns[1]
    assert bad.invalid is not None and bad.invalid["reason"] == "bad_json" and bad.call is None
    assert bad.observation.startswith("error: invalid action")
    assert rec.tool_calls == 3
    # the write was recorded with its digest; timing fields were kept out of the record
    assert list(rec.turns[0].files_written) == ["out.txt"]
    assert rec.turns[0].files_written["out.txt"].startswith("sha256:")
    assert "duration_s" not in rec.turns[0].record
    # segments tile the sequence and alternate prompt / generated / observation
    kinds = [s.kind for s in rec.segments]
    assert kinds == ["prompt", "generated", "observation", "generated", "observation", "generated"]
    assert rec.segments[-1].end == len(rec.token_ids)
    # the observation tokens hold the tool message and the next assistant header
    obs_seg = rec.segments[2]
    obs_text = tt.decode(rec.token_ids[obs_seg.start : obs_seg.end])
    assert "<|im_start|>tool\nwrote out.txt<|im_end|>" in obs_text and obs_text.endswith("<|im_start|>assistant\n")


def test_no_tool_call_ends_or_observes(tokenizer, tmp_path):
    (rec,), _ = run_scripted(tokenizer, tmp_path, {0: ["I am done."]})
    assert rec.end_reason == "no_tool_call" and len(rec.turns) == 1 and rec.tool_calls == 0
    budgets = RolloutBudgets(max_assistant_turns=3, max_tool_calls=3)
    (rec,), _ = run_scripted(tokenizer, tmp_path / "b", {0: ["I am done."]}, budgets, no_tool_call="observe")
    assert rec.end_reason == "max_turns" and rec.tool_calls == 3
    assert all(t.invalid["reason"] == "no_tool_call" for t in rec.turns)


def test_a_stage_row_stops_at_its_turn_cap_while_an_e2e_row_goes_on(tokenizer, tmp_path):
    write = call("write", path="a.txt", text="x")
    budgets = RolloutBudgets(max_assistant_turns=5, max_tool_calls=5)
    recs, _ = run_scripted(tokenizer, tmp_path, {0: [write], 1: [write]}, budgets, stages={0: "S2"}, row_turns=2)
    stage_row, e2e_row = recs
    assert stage_row.end_reason == "max_turns" and len(stage_row.turns) == 2 and stage_row.tool_calls == 2
    assert e2e_row.end_reason == "max_turns" and len(e2e_row.turns) == 5


@pytest.mark.parametrize(
    "case", ["max_turns", "max_tool_calls", "max_response_tokens", "context_length", "max_observation_chars"]
)
def test_every_budget_ends_with_its_reason(tokenizer, tmp_path, case):
    write = call("write", path="a.txt", text="x")
    n_write = len(tokenizer(write, add_special_tokens=False)["input_ids"]) + 1
    budgets = {
        "max_turns": RolloutBudgets(max_assistant_turns=3, max_tool_calls=3),
        "max_tool_calls": RolloutBudgets(max_assistant_turns=6, max_tool_calls=2),
        "max_response_tokens": RolloutBudgets(max_response_tokens=int(n_write * 1.5)),
        "context_length": RolloutBudgets(max_context_tokens=400),
        "max_observation_chars": RolloutBudgets(observation_overflow="end"),
    }[case]
    script = [call("big")] if case == "max_observation_chars" else [write]
    (rec,), tt = run_scripted(tokenizer, tmp_path, {0: script}, budgets)
    assert rec.end_reason == case
    assert rec.valid
    assert masked_text(tt, rec) == "".join(t.response_text for t in rec.turns)
    assert len(rec.token_ids) <= budgets.max_context_tokens
    assert rec.response_tokens <= budgets.max_response_tokens
    if case == "max_turns":
        assert len(rec.turns) == 3
    if case == "max_tool_calls":
        assert rec.tool_calls == 2 and len(rec.turns) == 3 and rec.turns[-1].observation is None
    if case == "max_response_tokens":
        assert rec.turns[-1].finish == "length" and rec.response_tokens == budgets.max_response_tokens
    if case == "max_observation_chars":
        assert rec.turns[0].observation_chars == 5000 and rec.turns[0].observation_truncated


def test_observation_cap_truncates_by_default(tokenizer, tmp_path):
    budgets = RolloutBudgets(max_assistant_turns=2, max_tool_calls=2)
    (rec,), _ = run_scripted(tokenizer, tmp_path, {0: [call("big"), call("submit")]}, budgets)
    first = rec.turns[0]
    assert first.observation_truncated and first.observation_chars == 5000
    assert len(first.observation) == budgets.max_observation_chars and "truncated 2952" in first.observation
    assert rec.end_reason == "done"


class _BrokenEnv(ToyEnv):
    def step(self, call):
        raise RuntimeError("sandbox died")


def test_infrastructure_failure_marks_rollout_invalid(tokenizer, tmp_path):
    env = _BrokenEnv(tmp_path / "ws0")
    (rec,), _ = run_scripted(tokenizer, tmp_path, {0: [call("write", path="a", text="b")]}, envs={0: env})
    assert rec.end_reason == "error" and not rec.valid and "sandbox died" in rec.invalid_reason


def test_many_rollouts_in_flight_share_batches(tokenizer, tmp_path):
    scripts = {i: [call("write", path=f"f{i}.txt", text=str(i))] * i + [call("submit")] for i in range(1, 5)}
    tt = TurnTokens(tokenizer)
    engine = ScriptedEngine(tokenizer, scripts, end_id=tt.stop_ids[0])
    envs = {i: ToyEnv(tmp_path / f"w{i}") for i in scripts}
    specs = [
        RolloutSpec(
            rollout_id=f"r{i}",
            state_id="s",
            k=i,
            seed=i,
            env=envs[i],
            messages=make_messages(i),
            workspace=envs[i].workspace,
        )
        for i in scripts
    ]
    recs = [o.record for o in run_rollouts(engine, specs, tt, LoopSettings(budgets=RolloutBudgets()))]
    assert [len(r.turns) for r in recs] == [2, 3, 4, 5]
    assert engine.calls == 5  # one batched generation per lockstep step, not one per rollout turn
    assert all(r.end_reason == "done" for r in recs)


def test_real_hf_engine_multiturn_logprobs_and_determinism(tiny_model, tokenizer, tmp_path):
    from bat.rollout.engine_hf import HFEngine

    engine = HFEngine(tiny_model)
    tt = TurnTokens(tokenizer)
    budgets = RolloutBudgets(max_assistant_turns=3, max_tool_calls=3, max_new_tokens_per_turn=12)
    settings = LoopSettings(budgets=budgets, temperature=1.0, no_tool_call="observe")

    def once(tag):
        specs = [
            RolloutSpec(
                rollout_id=f"r{i}",
                state_id="s",
                k=i,
                seed=7 + i,
                env=ToyEnv(tmp_path / tag / str(i)),
                messages=make_messages(i),
            )
            for i in range(3)
        ]
        return [o.record for o in run_rollouts(engine, specs, tt, settings)]

    first, second = once("a"), once("b")
    assert [r.model_dump() for r in first] == [r.model_dump() for r in second]
    assert len({tuple(r.generated_ids) for r in first}) == 3  # different seeds, different samples
    for rec in first:
        assert rec.end_reason in ("max_turns", "done")
        assert len(rec.turns) >= 1
        assert masked_text(tt, rec) == "".join(t.response_text for t in rec.turns)
        # behavior logprobs equal a teacher-forced forward pass over the stored token ids (temperature 1)
        with torch.inference_mode():
            logits = engine.model(torch.tensor([rec.token_ids])).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        for pos, (tok, m, lp) in enumerate(zip(rec.token_ids, rec.loss_mask, rec.behavior_logprobs)):
            if m:
                assert abs(logp[pos - 1, tok].item() - lp) < 1e-3
    json.dumps(first[0].model_dump(mode="json"))


class _SlowEnv(ToyEnv):
    busy = 0

    def step(self, call):
        import time

        type(self).busy += 1
        try:
            time.sleep(0.2)
            return super().step(call)
        finally:
            type(self).busy -= 1


def test_cohorts_overlap_tool_calls_with_generation_and_keep_results(tokenizer, tmp_path):
    scripts = {i: [call("write", path=f"f{i}.txt", text=str(i)), call("submit")] for i in range(4)}
    tt = TurnTokens(tokenizer)
    seen_busy = []

    class Watching(ScriptedEngine):
        def generate(self, requests):
            # "busy during generation" = a tool call is running at some point in a short window while this
            # generate call is in progress (tool worker threads may start a moment after dispatch on a loaded box)
            import time

            busy, deadline = _SlowEnv.busy, time.monotonic() + 0.15
            while busy == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
                busy = _SlowEnv.busy
            seen_busy.append(busy)
            return super().generate(requests)

    def go(cohorts, tag):
        engine = Watching(tokenizer, scripts, end_id=tt.stop_ids[0])
        envs = {i: _SlowEnv(tmp_path / tag / str(i)) for i in scripts}
        specs = [
            RolloutSpec(
                rollout_id=f"r{i}",
                state_id="s",
                k=i,
                seed=i,
                env=envs[i],
                messages=make_messages(i),
                workspace=envs[i].workspace,
            )
            for i in scripts
        ]
        settings = LoopSettings(budgets=RolloutBudgets(), cohorts=cohorts, tool_workers=4)
        return [o.record.model_dump() for o in run_rollouts(engine, specs, tt, settings)], engine.calls

    lockstep, calls1 = go(1, "a")
    assert max(seen_busy) == 0 and calls1 == 2  # lockstep: the engine never runs while a tool call does
    seen_busy.clear()
    piped, calls2 = go(2, "b")
    assert max(seen_busy) > 0 and calls2 == 4  # cohort B generated while cohort A's tool calls ran
    assert piped == lockstep


def test_hf_results_do_not_depend_on_cohorts(tiny_model, tokenizer, tmp_path):
    from bat.rollout.engine_hf import HFEngine

    engine, tt = HFEngine(tiny_model), TurnTokens(tokenizer)
    budgets = RolloutBudgets(max_assistant_turns=2, max_tool_calls=2, max_new_tokens_per_turn=10)

    def go(cohorts):
        specs = [
            RolloutSpec(
                rollout_id=f"r{i}",
                state_id="s",
                k=i,
                seed=3 + i,
                env=ToyEnv(tmp_path / f"{cohorts}-{i}"),
                messages=make_messages(i),
            )
            for i in range(4)
        ]
        settings = LoopSettings(budgets=budgets, temperature=1.0, no_tool_call="observe", cohorts=cohorts)
        return [o.record.token_ids for o in run_rollouts(engine, specs, tt, settings)]

    assert go(1) == go(2)


class _HostileEngine:
    """Test double of an engine emitting, per turn, either random token ids of the whole vocabulary (special
    tokens included) or the tokens of an adversarial tool call (deep nesting, huge numbers, lone surrogate
    escapes, unclosed or doubled tags); seeded, so the fuzz case is reproducible."""

    name = "hostile"
    checkpoint = "hostile"

    def __init__(self, tokenizer, seed: int) -> None:
        import random

        self.tok, self.rng = tokenizer, random.Random(seed)
        self.texts = [
            "<tool_call>" + "[" * 3000 + "</tool_call>",
            '<tool_call>{"name": "write", "arguments": {"path": "a", "text": ' + "9" * 6000 + "}}</tool_call>",
            '<tool_call>{"name": "write", "arguments": {"path": "\\ud800", "text": "\\udfff"}}</tool_call>',
            '<tool_call>{"name": "write", "arguments": {"path": "../../etc/x"}}</tool_call><tool_call>{}',
            '<tool_call>{"name": "submit", "arguments": {"x": NaN}}</tool_call>',
            "\u0000\ufffd\U0010ffff <tool_call>",
        ]

    def generate(self, requests):
        from bat.rollout.engine import GenResult

        out = []
        for req in requests:
            if self.rng.random() < 0.5:
                ids = [self.rng.randrange(len(self.tok)) for _ in range(self.rng.randrange(1, req.max_new_tokens + 1))]
            else:
                ids = self.tok(self.rng.choice(self.texts), add_special_tokens=False)["input_ids"]
            finish = "length" if len(ids) >= req.max_new_tokens else "stop"
            ids = ids[: req.max_new_tokens]
            out.append(GenResult(token_ids=ids, logprobs=[-1.0] * len(ids), finish=finish))
        return out

    def set_weights(self, path) -> None:
        self.checkpoint = str(path)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hostile_model_output_never_crashes_and_records_stay_utf8_jsonl(tokenizer, tmp_path, seed):
    from bat.state.jsonl import read_jsonl, write_jsonl

    tt = TurnTokens(tokenizer)
    specs = []
    for i in range(6):
        env = ToyEnv(tmp_path / f"ws{i}")
        specs.append(
            RolloutSpec(
                rollout_id=f"r{i}",
                state_id="s",
                k=i,
                seed=7 + i,
                env=env,
                messages=make_messages(i),
                workspace=env.workspace,
            )
        )
    budgets = RolloutBudgets(
        max_assistant_turns=5,
        max_tool_calls=5,
        max_new_tokens_per_turn=600,
        max_response_tokens=2500,
        max_context_tokens=6000,
    )
    settings = LoopSettings(budgets=budgets, temperature=1.0, no_tool_call="observe")
    records = [o.record for o in run_rollouts(_HostileEngine(tokenizer, seed), specs, tt, settings)]
    assert len(records) == 6 and all(r.end_reason for r in records)
    invalid = [t.invalid["reason"] for r in records for t in r.turns if t.invalid]
    assert invalid  # the adversarial calls became observations, not exceptions
    path = tmp_path / "rollouts.jsonl"
    write_jsonl(path, records)
    path.read_bytes().decode("utf-8")  # strict UTF-8
    back = read_jsonl(path)
    assert [b["rollout_id"] for b in back] == [r.rollout_id for r in records]
