"""Phase "synthesize": build (or reuse) the Stage Bank version for this config and seed.

Reads: `ctx.config` (bank, benchmark, sandbox, stages, leakage), the benchmark's practice seed space; a refresh also
the newest controller aggregate before it (steering, `bank.skill_writer: llm`).
Writes: `ctx.layout.bank(v)` — a new immutable version, or none when a version with the same fingerprint
exists (re-running is a no-op). The scan phase (`bat.leakage.phase:run_scan`) admits it afterwards; rounds pin the
newest admitted version. The bootstrap (round 0) synthesizes refresh 0; the asynchronous refresh beside round r
(`orchestrate.bank_refresh`) synthesizes refresh r, which draws new practice tasks (`refreshed_config`).
"""

from __future__ import annotations

from bat.phase.context import PhaseContext, PhaseResult
from bat.phase.spec import Maybe, PhaseSpec, first_bank


def run_synthesize(ctx: PhaseContext) -> PhaseResult:
    """Synthesize the bank; counts = RL rows, SFT rows per split, E2E accepted/candidates, overlong SFT rows."""
    from bat.bank.synthesize import synthesize

    bank, reused = synthesize(ctx.config, ctx.layout, refresh=ctx.round)
    counts = bank.manifest().counts
    sft = counts.get("sft", {})
    e2e = counts.get("e2e", {})
    return PhaseResult(
        outputs=[bank.path],
        counts={
            "bank_version": bank.version,
            "rl_rows": counts.get("rl_total", 0),
            "sft_train": sft.get("train", 0),
            "sft_validation": sft.get("validation", 0),
            "sft_overlong": sft.get("rejected", {}).get("overlong", 0),
            "e2e_candidates": e2e.get("candidates", 0),
            "e2e_accepted": e2e.get("accepted", 0),
            "trajectories": counts.get("trajectories", 0),
            "refresh": ctx.round,
        },
        extra={"reused": reused, "fingerprint": bank.manifest().fingerprint, "bank_dir": bank.path.name},
    )


SYNTHESIZE = PhaseSpec(
    "synthesize",
    run_synthesize,
    reads=lambda L, r: (
        "config (bank, benchmark)",
        "practice seed space",
        "base tokenizer",
        "refresh: newest controller aggregate before it (steering, LLM skill writer)",
    ),
    writes=lambda L, r: (
        first_bank(L).tasks,
        first_bank(L).trajectories,
        first_bank(L).sft_split("train"),
        first_bank(L).sft_split("validation"),
        first_bank(L).rl_rows,
        first_bank(L).rl_index,
        first_bank(L).states_dir,
        Maybe(first_bank(L).skills, "bank.skills rewrites a stage's text"),
        first_bank(L).manifest,
    ),
    resources="synthesize",
)
