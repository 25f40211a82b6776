"""Which seed and config a bank synthesis runs with: the bank seed, the refresh seeds, the steered task counts, and
the bank knobs left out of fingerprints. Shared by the built-in bank (`bat.bank.synthesize`) and plug-in banks
(`bat.bank.plugin_synth`).

Reads: config (bank, run seed); a steered refresh also the newest controller aggregate before it (numbers only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bat.bank.aggregates import newest_controller_aggregate
from bat.bank.practice import bank_tracks
from bat.seeds import derive_seed

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.state.layout import RunLayout


CONTENT_NEUTRAL = {"workers", "refresh_steering", "skill_writer", "skill_llm"}
"""Bank knobs that change how fast a bank is built, never its content (left out of the fingerprint; the steering
mode acts only through the `track_tasks` it sets, the skill writer only through the `skills` it sets)."""
WRITER_KNOBS = {"task_writer", "task_writer_llm"}
"""Bank knobs of the LLM task writer: fingerprinted only when `bank.task_writer == "llm"` (a scripted bank's
fingerprint does not depend on them)."""


def bank_seed(config: BatConfig) -> int:
    """`bank.seed`, or the run seed when unset."""
    return config.run.seed if config.bank.seed is None else config.bank.seed


def steered_track_tasks(config: BatConfig, track_overall: dict[str, float | None]) -> dict[str, int]:
    """Tasks per track for a steered refresh: `tasks_per_track x tracks` tasks split in proportion to each track's
    weakness 1 - Overall (scores in [0, 1]; a track without a score counts as 0, the weakest), at least one each,
    rounded by largest remainder so the total is kept. Reads aggregate numbers only."""
    tracks = bank_tracks(config)
    total = config.bank.tasks_per_track * len(tracks)
    weakness = {t: max(1.0 - (track_overall.get(t) or 0.0), 0.0) + 1e-9 for t in tracks}
    spare = total - len(tracks)
    shares = {t: spare * w / sum(weakness.values()) for t, w in weakness.items()}
    counts = {t: 1 + int(shares[t]) for t in tracks}
    for t in sorted(tracks, key=lambda t: (int(shares[t]) - shares[t], tracks.index(t)))[
        : total - sum(counts.values())
    ]:
        counts[t] += 1
    return counts


def steering(config: BatConfig, layout: RunLayout, refresh: int) -> tuple[BatConfig, dict[str, Any] | None]:
    """The config a steered refresh synthesizes with, and the record of why (None when not steered; paper §2.1:
    "Aggregate recording statistics can guide synthesis"): refresh k >= 1 with `bank.refresh_steering: weakness`
    reads the newest controller aggregate of a round before k (training-side aggregate numbers, never held-out
    content) and sets `bank.track_tasks` (`steered_track_tasks`)."""
    if refresh < 1 or config.bank.refresh_steering == "off":
        return config, None
    found = newest_controller_aggregate(layout, refresh)
    if found is None:
        return config, None
    source, agg = found
    scores = {t: agg.tracks[t].overall if t in agg.tracks else None for t in bank_tracks(config)}
    tasks = steered_track_tasks(config, scores)
    record = {"mode": "weakness", "source_round": source, "track_overall": scores, "track_tasks": tasks}
    return config.model_copy(update={"bank": config.bank.model_copy(update={"track_tasks": tasks})}), record


def refreshed_config(config: BatConfig, refresh: int) -> BatConfig:
    """The config a bank synthesis runs with. Refresh 0 (the bootstrap bank) is `config` itself; refresh k >= 1 (the
    asynchronous refresh beside round k, paper §2.1: the Stage Bank is refreshed while training runs) sets
    `bank.seed` to `derive_seed(bank_seed(config), "refresh", k)`, so every refresh draws new practice tasks and E2E
    reductions from the practice seed space and becomes a new version (its fingerprint differs)."""
    if refresh < 0:
        raise ValueError(f"refresh index must be >= 0, got {refresh}")
    if refresh == 0:
        return config
    seed = derive_seed(bank_seed(config), "refresh", refresh)
    return config.model_copy(update={"bank": config.bank.model_copy(update={"seed": seed})})
