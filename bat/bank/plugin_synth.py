"""Synthesize a bank version for a plug-in benchmark: fingerprint, collect (`bat.bank.plugin_bank`), SFT slices
with the benchmark's skills and preamble, and the version's files and manifest (as `bat.bank.synthesize` does for
the built-in benchmark, whose path is unchanged).

Reads: config (bank, benchmark, rollout budgets, leakage), the benchmark's practice tasks; a refresh also the newest
controller aggregate before it (steering). Writes: one new immutable `RunLayout.bank(v)`; the same config and seed
give the same fingerprint and reuse the existing version.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.bank import checks, sft, store
from bat.bank.collected import leak_scanner, write_collected
from bat.bank.plugin_bank import GENERATOR_VERSION, collect
from bat.bank.plugin_states import benchmark
from bat.bank.practice import bank_tracks
from bat.bank.seeding import CONTENT_NEUTRAL, WRITER_KNOBS, bank_seed, refreshed_config, steering
from bat.schemas.bank import SftRow
from bat.seeds import derive_seed
from bat.staged.interface import Benchmark

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.state.layout import RunLayout


def fingerprint(config: BatConfig, bench: Benchmark) -> str:
    """Digest of what determines a plug-in bank's content: this generator's version, the benchmark (name, version,
    harness, stages, tracks), the bank seed, the bank and benchmark config (speed-only knobs left out), the stage
    config and the rollout limit H."""
    from bat.bank.e2e import rollout_limit

    unset = {name for name in ("track_tasks", "skills") if not getattr(config.bank, name)}
    payload = {
        "generator": GENERATOR_VERSION,
        "benchmark": {**bench.describe(), "harness": bench.harness_version},
        "seed": bank_seed(config),
        "bank": config.bank.model_dump(mode="json", exclude=CONTENT_NEUTRAL | WRITER_KNOBS | unset),
        "benchmark_config": config.benchmark.model_dump(mode="json", exclude={"contract"}),
        "stages": [s.model_dump(mode="json") for s in config.stages],
        "rollout_limit_h": rollout_limit(config),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def _meter(config: BatConfig, bench: Benchmark) -> Any:
    if config.bank.sft_tokenizer is None:
        return sft.ApproxLengthMeter(config.bank.approx_chars_per_token)
    from bat.policy.loader import load_tokenizer

    return sft.TokenLengthMeter(load_tokenizer(config.bank.sft_tokenizer), bench.tools())


def slice_sft(config: BatConfig, bench: Benchmark, out: Any) -> tuple[list[SftRow], sft.SliceStats]:
    """SFT rows of every checked trajectory whose label is in `bank.sft_outcomes` (plus accepted E2E ones), with the
    benchmark's skills and preamble; a recovery run's turns done before it turned back are context, never targets."""
    stages = bench.stages()
    order, names, skills = [s.key for s in stages], {s.key: s.name for s in stages}, {s.key: s.skill for s in stages}
    e2e_ids = out.e2e_trajectory_ids
    use = [  # a checked E2E candidate is an accepted one (a rejection unchecks it)
        t
        for t in out.trajectories
        if t.checked and (t.trajectory_id in e2e_ids or t.outcome in config.bank.sft_outcomes)
    ]
    return sft.slice_trajectories(
        use,
        split_seed=derive_seed(bank_seed(config), "sft_split"),
        validation_fraction=config.bank.validation_fraction,
        e2e_ids=e2e_ids,
        recovery_skip=lambda traj: checks.premature_turns(traj.turns, order),
        skills=skills,
        stage_order=order,
        meter=_meter(config, bench),
        max_length=config.bank.sft_max_length,
        stage_names=names,
        agent_context=config.bank.sft_context == "agent",
        preamble=bench.preamble,
    )


def synthesize_plugin(config: BatConfig, layout: RunLayout, refresh: int = 0) -> tuple[store.BankVersion, bool]:
    """`bat.bank.synthesize.synthesize` for a plug-in benchmark: the next bank version at refresh `refresh`
    (new practice draws per refresh, steered like the built-in one), or the existing one of the same fingerprint."""
    config, steered = steering(refreshed_config(config, refresh), layout, refresh)
    bench = benchmark(config)
    fp = fingerprint(config, bench)
    existing = store.find_by_fingerprint(layout, fp)
    if existing is not None:
        return existing, True
    seed, tracks = bank_seed(config), bank_tracks(config)

    def fill(build: Path) -> dict[str, Any]:
        out = collect(bench, config, seed, tracks, build, layout.bank_scratch(fp[:16]), leak_scanner(config, layout))
        sft_rows, stats = slice_sft(config, bench, out)
        return write_collected(build, config, out, sft_rows, stats)

    fields = {
        "fingerprint": fp,
        "generator_versions": {
            "bank": GENERATOR_VERSION,
            "benchmark": f"{bench.name}:{bench.version}",
            "benchmark_grader": bench.harness_version or bench.version,
            "teacher": f"{bench.name}:scripted",
        },
        "seeds": {"bank": seed, "practice_root": config.benchmark.practice_seed, "refresh": refresh},
        "reduction_grid": "whole-task",
        "stages": [s.key for s in bench.stages()],
        "tracks": tracks,
        "config": {
            "bank": config.bank.model_dump(mode="json"),
            "benchmark": config.benchmark.model_dump(mode="json", exclude={"contract"}),
            "steering": steered,
        },
    }
    return store.write_version(layout, fill, fields, resume_key=fp[:16]), False
