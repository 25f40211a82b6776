"""`RoundLayout` and `ShardLayout`: the files of one round `round_NN/` and of one shard of a sharded phase.

```
round_NN/
  plan.json                         what the round trains on (written by the previous round's route)
  <phase>/DONE.json                 a phase's completion marker (written last)
  rollout/shard_NNNN/               rollouts.jsonl timings.jsonl evidence/ DONE.json
  verify/shard_NNNN/                rewards.jsonl DONE.json
  sft|grpo/metrics.jsonl            one line per optimizer step
  evaluate/aggregate_<split>[_<variant>].json   the only evaluation numbers the training side reads
  route/decision.json route/best.json
  report.md report.json events.log
```
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DONE_NAME = "DONE.json"
"""Completion marker of a phase or a shard, written last."""
SHARD_GLOB = "shard_[0-9][0-9][0-9][0-9]"
ROUTE_PHASE = "route"
EVALUATE_PHASE = "evaluate"
ROLLOUT_PHASE = "rollout"


@dataclass(frozen=True)
class ShardLayout:
    """Paths inside one shard directory `<phase>/shard_NNNN` of a sharded phase (rollout, verify)."""

    path: Path

    @property
    def index(self) -> int:
        return int(self.path.name.removeprefix("shard_"))

    @property
    def done(self) -> Path:
        return self.path / DONE_NAME

    @property
    def rollouts(self) -> Path:
        return self.path / "rollouts.jsonl"

    @property
    def timings(self) -> Path:
        return self.path / "timings.jsonl"

    @property
    def evidence_name(self) -> str:
        """Folder of kept workspace evidence, relative to the shard (rollout records store paths under it)."""
        return "evidence"

    @property
    def rewards(self) -> Path:
        return self.path / "rewards.jsonl"

    @property
    def breakdown(self) -> Path:
        """Failure breakdown of the shard's rollouts (per-rollout verdicts and their counts)."""
        return self.path / "breakdown.json"

    def is_done(self) -> bool:
        """True when the shard was written whole (its DONE.json exists)."""
        return self.done.is_file()


def shard_dir(phase_dir: Path, index: int) -> Path:
    """`<phase_dir>/shard_NNNN`."""
    return Path(phase_dir) / f"shard_{index:04d}"


def shard_layout(phase_dir: Path, index: int) -> ShardLayout:
    return ShardLayout(shard_dir(phase_dir, index))


def all_shards(phase_dir: Path) -> list[ShardLayout]:
    """Every shard directory under a phase directory (finished or not; build temp dirs excluded), index order."""
    return [ShardLayout(p) for p in sorted(Path(phase_dir).glob(SHARD_GLOB)) if p.is_dir()]


def finished_shards(phase_dir: Path) -> list[ShardLayout]:
    """Shards with their DONE.json, in index order."""
    return [s for s in all_shards(phase_dir) if s.is_done()]


def finished_shard_files(shards: list[ShardLayout], pick: Callable[[ShardLayout], Path]) -> tuple[list[Path], int]:
    """The `pick` file of every shard that has its DONE.json and that file, and the number of shards skipped."""
    files = [path for s in shards if s.is_done() and (path := pick(s)).exists()]
    return files, len(shards) - len(files)


def partial_shard_dirs(phase_dir: Path) -> list[Path]:
    """Build directories left by interrupted shard writes (`.shard_NNNN.*`)."""
    return [p for p in Path(phase_dir).glob(".shard_*") if p.is_dir()]


@dataclass(frozen=True)
class RoundLayout:
    """Paths of one round directory `round_NN` (`index` is NN)."""

    path: Path
    index: int

    @property
    def plan(self) -> Path:
        return self.path / "plan.json"

    def phase(self, phase: str) -> Path:
        return self.path / phase

    def done(self, phase: str) -> Path:
        """The phase's DONE.json marker."""
        return self.phase(phase) / DONE_NAME

    def shard(self, phase: str, index: int) -> ShardLayout:
        return shard_layout(self.phase(phase), index)

    def finished_shards(self, phase: str) -> list[ShardLayout]:
        return finished_shards(self.phase(phase))

    def metrics(self, phase: str) -> Path:
        """`<phase>/metrics.jsonl`: one line per optimizer step of a training phase (sft, grpo)."""
        return self.phase(phase) / "metrics.jsonl"

    def aggregate(self, split: str, phase: str = EVALUATE_PHASE, variant: str | None = None) -> Path:
        """`<phase>/aggregate_<split>.json` (`aggregate_<split>_<variant>.json` for a variant such as the base
        policy's): the training side's only view of an evaluation."""
        suffix = f"_{variant}" if variant else ""
        return self.phase(phase) / f"aggregate_{split}{suffix}.json"

    @property
    def decision(self) -> Path:
        """The route's decision record."""
        return self.phase(ROUTE_PHASE) / "decision.json"

    def kl_chunk(self, index: int) -> Path:
        """`route/kl/chunk_NNNN.json`: the route's KL check over one chunk of probe prompts (`bat.curriculum.kl`),
        kept so that a requeued route continues where it stopped."""
        return self.phase(ROUTE_PHASE) / "kl" / f"chunk_{index:04d}.json"

    @property
    def best_after(self) -> Path:
        """The retained best as it stood after this round (`checkpoints/best.json` copies the newest)."""
        return self.phase(ROUTE_PHASE) / "best.json"

    @property
    def report_md(self) -> Path:
        return self.path / "report.md"

    @property
    def report_json(self) -> Path:
        return self.path / "report.json"

    @property
    def events(self) -> Path:
        return self.path / "events.log"
