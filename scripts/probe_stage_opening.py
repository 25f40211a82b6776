"""Turn-0 probe: how a policy starts a Stage Bank stage row under each opening (`rollout.state_context`).

For `--per-stage` rows of each stage in `--stages` (a seeded pick from the run's bank), samples `--k` first replies
of the checkpoint under each opening (`handoff`: the row's stored prompt with the hand-off note; `history`: the
SFT-slice layout with the teacher prefix as chat turns, `bat.bank.rows.history_opening`) and prints, per stage and
opening, how many replies parse as a tool call and how many call one of the stage's own tools. Reads the run's
`run.json`, its newest bank version and the checkpoint; writes nothing. CPU, a minute or two per row and opening.

    .venv/bin/python scripts/probe_stage_opening.py --run STATE/experiments/arms_cpu/seed_1/_shared \
        --checkpoint STATE/experiments/arms_cpu/seed_1/_shared/checkpoints/sft/export --stages S2,S3
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from collections import Counter
from pathlib import Path

STAGE_TOOLS = {
    "S1": {"list_files", "read_file", "write_plan"},
    "S2": {"check_compatibility", "install", "load_model"},
    "S3": {"run_model", "check_outputs"},
    "S4": {"run_model", "check_outputs"},
    "S5": {"submit", "check_outputs"},
}
"""The built-in benchmark's tools that do each stage's work (the stage skills' verbs)."""
OPENINGS = ("handoff", "history")


def sample_first_replies(model, tokenizer, prompt_ids: list[int], k: int, max_new_tokens: int, seed: int) -> list[str]:
    """`k` replies sampled at temperature 1 after one shared prefill of `prompt_ids`, each cut at the end of turn."""
    import torch

    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        cache = model(torch.tensor([prompt_ids[:-1]]), use_cache=True).past_key_values
        cache.batch_repeat_interleave(k)
        current, out = torch.tensor([[prompt_ids[-1]]] * k), []
        finished = torch.zeros(k, dtype=torch.bool)
        for _ in range(max_new_tokens):
            step = model(current, past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            current = torch.multinomial(torch.softmax(step.logits[:, -1, :].float(), -1), 1, generator=generator)
            out.append(current)
            finished |= current[:, 0] == end
            if finished.all():
                break
    texts = tokenizer.batch_decode(torch.cat(out, 1), skip_special_tokens=False)
    return [t.split("<|im_end|>")[0] for t in texts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="a run's state dir (its run.json and bank/)")
    parser.add_argument("--checkpoint", required=True, help="HF-format checkpoint directory of the policy")
    parser.add_argument("--stages", default="S2,S3", help="comma-separated stage keys (default S2,S3)")
    parser.add_argument("--per-stage", type=int, default=3, help="rows per stage (default 3)")
    parser.add_argument("--k", type=int, default=8, help="replies per row and opening (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=160, help="reply length cap (default 160)")
    parser.add_argument("--seed", type=int, default=0, help="row pick and sampling seed (default 0)")
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from bat.bank.store import open_bank
    from bat.benchmark import TOOL_NAMES
    from bat.config.run_record import recorded_config
    from bat.policy.codec import ToolCall, parse_tool_call
    from bat.policy.tools import policy_tools
    from bat.rollout.chat import TurnTokens
    from bat.rollout.envs import opening_messages
    from bat.state.layout import RunLayout

    layout = RunLayout(Path(args.run))
    config = recorded_config(layout)
    if config is None:
        print(f"probe: {layout.run_json} is missing; pass a run's state dir", file=sys.stderr)
        return 2
    bank = open_bank(layout)
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32).eval()
    turns = TurnTokens(tokenizer, policy_tools(config.sft.render_tools, config.sft.tool_format))
    by_opening = {
        o: config.model_copy(update={"rollout": config.rollout.model_copy(update={"state_context": o})})
        for o in OPENINGS
    }
    rng = random.Random(args.seed)
    counts: dict[tuple[str, str], Counter] = {}
    for stage in args.stages.split(","):
        rows = sorted((r for r in bank.rows() if r.stage == stage), key=lambda r: r.state_id)
        if not rows:
            print(f"probe: no {stage} rows in bank v{bank.version:04d}", file=sys.stderr)
            return 2
        for row in rng.sample(rows, min(args.per_stage, len(rows))):
            for opening, cfg in by_opening.items():
                ids = turns.prompt_ids(opening_messages(bank, row, cfg))
                replies = sample_first_replies(model, tokenizer, ids, args.k, args.max_new_tokens, args.seed)
                tally = counts.setdefault((stage, opening), Counter())
                for text in replies:
                    call = parse_tool_call(text, TOOL_NAMES)
                    named = re.search(r'"name":\s*"(\w+)"', text) if isinstance(call, ToolCall) else None
                    tally["replies"] += 1
                    tally["tool_call"] += isinstance(call, ToolCall)
                    tally["stage_tool"] += bool(named and named.group(1) in STAGE_TOOLS.get(stage, set()))
                print(f"{row.state_id} {opening}: prompt {len(ids)} tokens, {dict(tally)}", flush=True)
    print("| stage | opening | replies | tool call | the stage's own tool |")
    print("|---|---|---|---|---|")
    for (stage, opening), t in sorted(counts.items()):
        n = t["replies"]
        print(
            f"| {stage} | {opening} | {n} | {t['tool_call']} ({100 * t['tool_call'] / n:.0f} %) "
            f"| {t['stage_tool']} ({100 * t['stage_tool'] / n:.0f} %) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
