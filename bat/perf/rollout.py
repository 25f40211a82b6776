"""`bat bench rollout`: generated tokens/s of full multi-turn rollouts (with sandboxes) vs the raw engine.

One run prints, side by side, on the same tiny policy (random init, built offline into a temp dir):
* full rollouts: the real loop (token in / token out, budgets, masks) on real benchmark instances whose
  tool calls run in the configured sandbox runtime: full re-prefill every turn (lockstep), per-rollout
  prefix KV cache (lockstep), and prefix cache with 2 cohorts (sandboxes of one run while the other generates);
* the raw engine generating the same number of tokens from the same prompts without tools, batched;
* the raw engine doing the rollouts' turns without tools: per turn the same number of generated tokens, then the
  same template and observation tokens prefilled on the cached context (`_raw_turns`): the work a full rollout
  cannot avoid, so the full rollout's ratio to it is the loop's own overhead (tools, sandboxes, parsing, waits);
* the raw engine generating them one request at a time.
`--model smollm2-135m-instruct` (a registered pretrained policy, or any HF folder) measures that policy instead.
`--engine vllm` measures vLLM's server (`bat.rollout.vllm_server`) instead of hf: full rollouts with the
continuous schedule (each rollout on its own thread, the server batching whatever is in flight), then the raw
server on the same tokens; the server's prefix cache is emptied before each measurement. A random-init (or untuned) policy
emits no valid tool call, so the bench harness replaces each turn's *action* with the
scripted expert's next call (`ExpertActions`): generation cost is the policy's, sandbox cost is real work.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path
from typing import Any

HELP = "rollout tokens/s: full multi-turn rollouts with sandboxes vs raw engine; batched vs one-at-a-time"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bat.policy.pretrained import REGISTRY

    parser.add_argument(
        "--model",
        help="registered pretrained policy (e.g. smollm2-135m-instruct) or local HF folder "
        "(default: build the tiny model into a temp dir)",
    )
    parser.add_argument("--pretrained", choices=sorted(REGISTRY), help="same as --model NAME")
    parser.add_argument(
        "--engine",
        choices=("hf", "vllm"),
        default="hf",
        help="hf (in-process, cohorts) or vllm (managed server, continuous schedule); default hf",
    )
    parser.add_argument("--rollouts", type=int, default=8, help="rollouts in flight (default 8)")
    parser.add_argument("--turns", type=int, default=3, help="assistant turns per rollout (default 3, <= 13)")
    parser.add_argument("--tokens-per-turn", type=int, default=32, help="generated tokens per turn (default 32)")
    parser.add_argument(
        "--runtime",
        choices=("bwrap", "process", "inprocess"),
        default="bwrap",
        help="where tool calls run (default bwrap)",
    )
    parser.add_argument("--track", default="classification", help="benchmark track of the instances")


class ExpertActions:
    """Bench harness around a StagedEnv: whatever the policy wrote, the expert's next call is executed."""

    def __init__(self, env: Any, instance: Any) -> None:
        from bat.benchmark.agents import SCRIPTS

        self.env, self.script, self.obs = env, SCRIPTS["expert"](instance), None
        self.workspace = env.workspace

    def reset(self) -> str:
        return self.env.reset()

    def step(self, call: dict[str, Any]) -> Any:
        try:
            _, action = self.script.send(self.obs) if self.obs is not None else next(self.script)
        except StopIteration:
            action = {"name": "list_files", "arguments": {"path": "."}}
        self.obs = self.env.step(action)
        return self.obs


def _config(runtime: str, track: str) -> Any:
    from bat.config.root import BatConfig

    return BatConfig.model_validate(
        {
            "benchmark": {
                "runtime": "inprocess" if runtime == "inprocess" else "sandbox",
                "tracks": [track],
                "cases_per_instance": 3,
            },
            "sandbox": {"runtime": "process" if runtime == "inprocess" else runtime},
        }
    )


def _model(args: argparse.Namespace, tmp: Path) -> Path:
    from bat.perf.engine import resolve_model

    if args.pretrained or args.model:
        return resolve_model(args.pretrained or args.model)
    from bat.config.model import TINY_PRESETS
    from bat.policy.tiny import build_tiny_model

    cfg = TINY_PRESETS["tiny"].model_copy(update={"max_positions": 4096})
    return build_tiny_model(tmp / "tiny", cfg, seed=0)


def _full(
    engine: Any, tt: Any, cfg: Any, args: argparse.Namespace, tmp: Path, cohorts: int, schedule: str = "cohorts"
) -> tuple[int, float, list]:
    from bat.benchmark import TOOL_NAMES
    from bat.benchmark.bank_side import open_instance
    from bat.benchmark.instance import generate_instance
    from bat.config.rollout import RolloutBudgets
    from bat.rollout.loop import run_rollouts
    from bat.rollout.spec import LoopSettings, RolloutSpec

    specs = []
    for i in range(args.rollouts):
        inst = generate_instance(args.track, "practice", 100 + i, config=cfg.benchmark)
        env = ExpertActions(
            open_instance(inst, tmp / f"c{cohorts}" / str(i) / "ws", tmp / f"c{cohorts}" / str(i) / "gr", cfg), inst
        )
        specs.append(RolloutSpec(rollout_id=f"b{i}", state_id=f"s{i}", k=0, seed=i, env=env, workspace=env.workspace))
    budgets = RolloutBudgets(
        max_assistant_turns=args.turns,
        max_tool_calls=args.turns,
        max_new_tokens_per_turn=args.tokens_per_turn,
        max_context_tokens=engine.max_context or 4096,
    )
    settings = LoopSettings(
        budgets=budgets,
        temperature=1.0,
        no_tool_call="observe",
        tool_workers=args.rollouts,
        tool_names=list(TOOL_NAMES),
        cohorts=cohorts,
        schedule=schedule,
    )
    t0 = time.perf_counter()
    outcomes = run_rollouts(engine, specs, tt, settings)
    seconds = time.perf_counter() - t0
    return sum(o.record.response_tokens for o in outcomes), seconds, [o.record for o in outcomes]


def _raw(engine: Any, records: list, batched: bool) -> tuple[int, float]:
    from bat.rollout.engine import GenRequest

    reqs = [
        GenRequest(
            prompt_ids=r.token_ids[: r.prompt_len],
            max_new_tokens=r.response_tokens,
            seed=r.seed,
            temperature=1.0,
            stop_ids=(),
        )
        for r in records
    ]
    t0 = time.perf_counter()
    results = engine.generate(reqs) if batched else [engine.generate([r])[0] for r in reqs]
    return sum(len(res.token_ids) for res in results), time.perf_counter() - t0


def turn_pieces(record: Any) -> tuple[list[int], list[int], list[list[int]]]:
    """A record's opening prompt, the length of each of its generated segments, and the tokens that follow each one
    (chat template and observation) before the next: the work of its turns without the tool calls."""
    prompt = record.token_ids[: record.prompt_len]
    generated = [s for s in record.segments if s.kind == "generated"]
    follows = [record.token_ids[seg.end : nxt.start] for seg, nxt in itertools.pairwise(generated)]
    return prompt, [s.end - s.start for s in generated], follows


def _raw_turns(engine: Any, records: list) -> tuple[int, float]:
    """The engine doing each rollout's token work turn by turn, lockstep, with no tools: each turn generates as many
    tokens as the rollout did (its own samples), then its context grows by the rollout's template and observation
    tokens, which a prefix-caching engine prefills on top of the cached context, as in the full rollout."""
    from bat.rollout.engine import GenRequest

    pieces = [turn_pieces(r) for r in records]
    contexts = [list(prompt) for prompt, _, _ in pieces]
    tokens, t0 = 0, time.perf_counter()
    for turn in range(max(len(lengths) for _, lengths, _ in pieces)):
        rows = [i for i, (_, lengths, _) in enumerate(pieces) if turn < len(lengths)]
        reqs = [
            GenRequest(
                prompt_ids=contexts[i],
                max_new_tokens=pieces[i][1][turn],
                seed=records[i].seed + turn,
                temperature=1.0,
                cache_key=f"raw-turns-{i}",
            )
            for i in rows
        ]
        for i, res in zip(rows, engine.generate(reqs)):
            tokens += len(res.token_ids)
            follow = pieces[i][2][turn] if turn < len(pieces[i][2]) else []
            contexts[i] = contexts[i] + res.token_ids + follow
    if hasattr(engine, "release"):
        for i in range(len(records)):
            engine.release(f"raw-turns-{i}")
    return tokens, time.perf_counter() - t0


def run(args: argparse.Namespace) -> int:
    """Print the figures (tokens, seconds, tokens/s) and the ratios in one table."""
    from bat.benchmark import TOOL_SPECS
    from bat.policy.loader import load_tokenizer
    from bat.rollout.chat import TurnTokens

    if not 1 <= args.turns <= 13:
        print("bat bench rollout: --turns must be within 1..13 (the expert script has 14 calls)")
        return 2
    with tempfile.TemporaryDirectory(prefix="bat-bench-rollout-") as tmp_name:
        tmp = Path(tmp_name)
        model = _model(args, tmp)
        tt = TurnTokens(load_tokenizer(model), TOOL_SPECS)
        cfg = _config(args.runtime, args.track)
        rows_of = _vllm_rows if args.engine == "vllm" else _hf_rows
        rows, records, note = rows_of(model, tt, cfg, args, tmp)
    _print_figures(args, rows, records, note)
    return 0


def _hf_rows(model: Path, tt: Any, cfg: Any, args: argparse.Namespace, tmp: Path) -> tuple[list, list, str]:
    """The HF-engine figures: full rollouts (full prefill lockstep, prefix cache lockstep, prefix cache in 2
    cohorts, workspaces under `tmp`), then the raw engine on the same tokens and on the same turns; returns
    (rows of (what, generated tokens, seconds), the first full run's records, no note)."""
    from bat.rollout.engine_hf import HFEngine

    rows = []
    engine = HFEngine(model, max_batch=args.rollouts)
    cached = HFEngine(model, prefix_cache=True)
    tokens1, s1, records = _full(engine, tt, cfg, args, tmp / "a", cohorts=1)
    rows.append((f"full rollout, {args.runtime} sandbox, full prefill, lockstep", tokens1, s1))
    tokens2, s2, _ = _full(cached, tt, cfg, args, tmp / "b", cohorts=1)
    rows.append((f"full rollout, {args.runtime} sandbox, prefix cache, lockstep", tokens2, s2))
    tokens3, s3, _ = _full(cached, tt, cfg, args, tmp / "c", cohorts=2)
    rows.append((f"full rollout, {args.runtime} sandbox, prefix cache, 2 cohorts", tokens3, s3))
    tb, sb = _raw(engine, records, batched=True)
    rows.append(("raw engine, same tokens, batched", tb, sb))
    tt_, st = _raw_turns(cached, records)
    rows.append(("raw engine, same turns and observations, batched, prefix cache", tt_, st))
    to, so = _raw(engine, records, batched=False)
    rows.append(("raw engine, same tokens, one at a time", to, so))
    return rows, records, ""


def _print_figures(args: argparse.Namespace, rows: list, records: list, note: str) -> None:
    """Print the table of `rows` (what, generated tokens, seconds, tokens/s), `note`, and the ratios: prefix cache
    and cohorts (HF only), raw batched vs one at a time, best full rollout vs the raw engine."""
    import torch
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"rollout throughput: {args.rollouts} rollouts x {args.turns} turns x <= {args.tokens_per_turn} "
        f"tokens, prompt {records[0].prompt_len} tokens, torch threads {torch.get_num_threads()}"
    )
    for col in ("what", "generated tokens", "seconds", "tokens/s"):
        table.add_column(col, justify="left" if col == "what" else "right")
    for name, tok, sec in rows:
        table.add_row(name, str(tok), f"{sec:.2f}", f"{tok / sec:.1f}")
    console = Console(width=120)
    console.print(table)
    rate = {name: tok / sec for name, tok, sec in rows}
    full = [name for name in rate if name.startswith("full rollout")]
    raw_batched, raw_one = (
        next(n for n in rate if n.startswith(p))
        for p in ("raw engine, same tokens, batched", "raw engine, same tokens, one")
    )
    best = max(rate[n] for n in full)
    turns_raw = next(n for n in rate if n.startswith("raw engine, same turns"))
    extra = ""
    if args.engine == "hf":
        extra = (
            f"prefix cache / full prefill (lockstep): {rate[full[1]] / rate[full[0]]:.2f}x; "
            f"2 cohorts / lockstep (prefix cache): {rate[full[2]] / rate[full[1]]:.2f}x; "
        )
    if note:
        console.print(note)
    console.print(f"{extra}raw batched / one-at-a-time: {rate[raw_batched] / rate[raw_one]:.2f}x")
    console.print(
        f"best full rollout / raw engine on the same turns and observations (no tools): {best / rate[turns_raw]:.2f}x"
    )
    console.print(f"best full rollout / raw batched engine: {best / rate[raw_batched]:.2f}x")


def _vllm_rows(model: Path, tt: Any, cfg: Any, args: argparse.Namespace, tmp: Path) -> tuple[list, list, str]:
    """The vllm figures: full rollouts (continuous schedule), then the raw server on the same tokens; the
    server's prefix cache is emptied before each, so no measurement reuses another's prefill."""
    from bat.config.rollout import VllmEngineConfig
    from bat.rollout.engine_vllm import VllmServerEngine

    engine = VllmServerEngine(model, VllmEngineConfig(max_num_seqs=max(8, args.rollouts), enforce_eager=True))
    try:
        rows = []
        engine.reset_prefix_cache()
        tokens, seconds, records = _full(engine, tt, cfg, args, tmp / "v", cohorts=1, schedule="continuous")
        rows.append((f"full rollout, {args.runtime} sandbox, vllm server, continuous", tokens, seconds))
        engine.reset_prefix_cache()
        tb, sb = _raw(engine, records, batched=True)
        rows.append(("raw engine, same tokens, batched (vllm server)", tb, sb))
        engine.reset_prefix_cache()
        tt_, st = _raw_turns(engine, records)
        rows.append(("raw engine, same turns and observations, batched (vllm server)", tt_, st))
        engine.reset_prefix_cache()
        to, so = _raw(engine, records, batched=False)
        rows.append(("raw engine, same tokens, one at a time (vllm server)", to, so))
        note = f"vllm server start: {engine.start_seconds:.1f} s (not counted above)"
    finally:
        engine.close()
    return rows, records, note
