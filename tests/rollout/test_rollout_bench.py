"""`bat bench rollout` runs end to end at toy sizes; its same-turns baseline replays each rollout's token work."""

from __future__ import annotations

import re

import pytest

from bat.cli.main import main


@pytest.mark.slow
def test_bench_rollout_prints_both_baselines(capsys):
    args = ["bench", "rollout", "--rollouts", "2", "--turns", "2", "--tokens-per-turn", "4", "--runtime", "inprocess"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "raw engine, same turns and observations, batched, prefix cache" in out
    same_turns = re.search(
        r"best full rollout / raw engine on the same turns and observations \(no tools\): (\S+)x", out
    )
    last = out.strip().splitlines()[-1]
    assert same_turns and float(same_turns.group(1)) > 0
    assert re.fullmatch(r"best full rollout / raw batched engine: \d+\.\d\dx", last)


def test_turn_pieces_rebuild_the_record_from_its_turns(tiny_model, tmp_path):
    from bat.benchmark import TOOL_SPECS
    from bat.perf.rollout import _config, _full, turn_pieces
    from bat.policy.loader import load_tokenizer
    from bat.rollout.chat import TurnTokens
    from bat.rollout.engine_hf import HFEngine

    class Args:
        rollouts, turns, tokens_per_turn, track = 2, 3, 4, "classification"

    tt = TurnTokens(load_tokenizer(tiny_model), TOOL_SPECS)
    _, _, records = _full(HFEngine(tiny_model), tt, _config("inprocess", "classification"), Args, tmp_path, cohorts=1)
    for record in records:
        prompt, lengths, follows = turn_pieces(record)
        assert len(lengths) == 3 and len(follows) == 2 and all(follows)
        generated = [s for s in record.segments if s.kind == "generated"]
        rebuilt = list(prompt)
        for seg, follow in zip(generated, [*follows, []]):
            rebuilt += record.token_ids[seg.start : seg.end] + follow
        assert rebuilt == record.token_ids
        assert sum(lengths) == record.response_tokens
