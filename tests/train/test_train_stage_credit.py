"""Stage-row credit: under `grpo.stage_row_credit: own-stage` a stage row trains only on the turns of its own stage."""

from __future__ import annotations

import json

import pytest

from bat.schemas.rollout import RolloutRecord, Segment, TurnRecord
from bat.train.grpo_data import build_items, own_stage_mask

ORDER = ("S1", "S2", "S3", "S4", "S5")


def _rollout(rollout_id: str, stage: str, turn_stages: list[str | None], *, tokens: int = 3) -> RolloutRecord:
    """A prompt of 2 tokens, then per turn `tokens` generated tokens and a 1-token observation; each turn's
    execution record carries the given stage tag (None: no record)."""
    ids, mask, segments, turns = [7, 7], [0, 0], [Segment(kind="prompt", start=0, end=2)], []
    for i, tag in enumerate(turn_stages):
        start = len(ids)
        ids += [5] * tokens + [9]
        mask += [1] * tokens + [0]
        segments += [Segment(kind="generated", start=start, end=start + tokens)]
        segments += [Segment(kind="observation", start=start + tokens, end=start + tokens + 1)]
        record = None if tag is None else {"stage": tag, "ok": True}
        turns.append(TurnRecord(index=i, response_text="x", generated_tokens=tokens, finish="stop", record=record))
    return RolloutRecord(
        rollout_id=rollout_id,
        state_id=rollout_id.split("-k")[0],
        round=1,
        shard=0,
        k=int(rollout_id.split("-k")[1]),
        pool="E2E" if stage == "E2E" else "S-target",
        stage=stage,
        seed=0,
        engine="test",
        checkpoint="test",
        temperature=1.0,
        token_ids=ids,
        loss_mask=mask,
        behavior_logprobs=[0.0] * len(ids),
        prompt_len=2,
        segments=segments,
        turns=turns,
        tool_calls=len(turns),
        response_tokens=tokens * len(turns),
        end_reason="done",
    )


def test_an_s3_rows_early_submit_and_batch_leave_the_loss_its_own_turns_stay() -> None:
    row = _rollout("s3-k0", "S3", ["S3", "S3", "S5", None, "S2"])
    mask, cleared = own_stage_mask(row, ORDER)
    assert cleared == 1
    # turn i's generated tokens sit at 2 + 4 i .. 2 + 4 i + 3
    assert mask[10:13] == [0, 0, 0] and mask[2:5] == [1, 1, 1] and mask[6:9] == [1, 1, 1]
    assert mask[14:17] == [1, 1, 1], "a turn without an execution record keeps its mask"
    assert mask[18:21] == [1, 1, 1], "an earlier stage's call is the row's own work"
    assert sum(mask) == sum(row.loss_mask) - 3


def test_e2e_rows_are_trained_on_every_turn() -> None:
    row = _rollout("e2e-k0", "E2E", ["S1", "S3", "S5"])
    assert own_stage_mask(row, ORDER) == (list(row.loss_mask), 0)


def test_turns_out_of_step_with_the_segments_are_an_error_not_a_silent_mask() -> None:
    row = _rollout("s3-k0", "S3", ["S3", "S5"])
    broken = row.model_copy(update={"segments": row.segments[:2]})
    with pytest.raises(ValueError, match="out of step"):
        own_stage_mask(broken, ORDER)


def test_build_items_counts_uncredited_turns_and_keeps_every_rollout_in_its_group(record_factories) -> None:
    _, make_reward = record_factories
    rollouts = [_rollout("g-k0", "S3", ["S3", "S5"]), _rollout("g-k1", "S3", ["S5"]), _rollout("g-k2", "S3", ["S3"])]
    rewards = [make_reward(r.rollout_id, "g", x) for r, x in zip(rollouts, (1.0, 0.0, 0.5))]
    kw = {"max_seq_len": 4096, "normalize_std": True, "adv_eps": 1e-6}
    every = build_items(rollouts, rewards, **kw)
    own = build_items(rollouts, rewards, **kw, own_stage_order=ORDER)
    assert own.counts["stage_turns_uncredited"] == 2
    # g-k1 made nothing but a later-stage call: it counts in the group, nothing of it is trained
    assert own.counts["excluded_no_generated_tokens"] == 1 and own.counts["groups"] == 1
    assert [i.rollout_id for i in own.items] == ["g-k0", "g-k2"]
    advantages = {i.rollout_id: i.adv for i in every.items}
    assert all(i.adv == pytest.approx(advantages[i.rollout_id]) for i in own.items)
    assert sum(own.items[0].mask) == sum(every.items[0].mask) - 3


def test_the_config_names_the_stage_order_only_under_own_stage() -> None:
    from bat.config.load import load_config
    from bat.train.grpo_data import credited_stage_order

    assert credited_stage_order(load_config(None, [])) == ORDER  # the default: own-stage
    assert credited_stage_order(load_config(None, ["grpo.stage_row_credit=all-turns"])) is None
    with pytest.raises(Exception, match="all-turns"):
        load_config(None, ["grpo.stage_row_credit=later"])


def test_the_balance_command_reads_the_runs_stage_credit_from_its_run_json(tmp_path, capsys, record_factories) -> None:
    from bat.config.load import load_config, resolved_dict
    from bat.state.jsonl import write_jsonl
    from bat.state.markers import write_done
    from bat.train.advantage_balance import main

    _, make_reward = record_factories
    run_root, round_dir = tmp_path / "run", tmp_path / "run" / "round_01"
    rows = [_rollout("s3-k0", "S3", ["S3", "S5"]), _rollout("s3-k1", "S3", ["S3", "S3"])]
    write_jsonl(round_dir / "rollout" / "shard_0000" / "rollouts.jsonl", rows)
    write_jsonl(
        round_dir / "verify" / "shard_0000" / "rewards.jsonl",
        [make_reward(r.rollout_id, "s3", 1.0 - r.k) for r in rows],
    )
    for phase in ("rollout", "verify"):
        write_done(round_dir / phase / "shard_0000", phase=phase, config_hash="h")

    def balance() -> dict:
        assert main([str(round_dir)]) == 0
        return json.loads(capsys.readouterr().out)

    default = balance()  # no run.json: the defaults (own-stage credit)
    assert default["stage_row_credit"] == "own-stage" and default["config"].startswith("defaults")
    assert default["stage_turns_uncredited"] == 1 and default["groups"][0]["trained_tokens"] == [3, 6]
    cfg = load_config(None, ["grpo.stage_row_credit=all-turns"])
    (run_root / "run.json").write_text(json.dumps({"config": resolved_dict(cfg)}), encoding="utf-8")
    every = balance()
    assert every["stage_row_credit"] == "all-turns" and every["config"] == str((run_root / "run.json").resolve())
    assert every["stage_turns_uncredited"] == 0 and every["groups"][0]["trained_tokens"] == [6, 6]
    (run_root / "run.json").write_text("{not json", encoding="utf-8")
    assert main([str(round_dir)]) == 2
    assert "run.json" in capsys.readouterr().err
