"""Small pieces shared by the SFT and GRPO loops: metrics log, cross-rank sums, memory, rank slicing."""

from __future__ import annotations

import random
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.seeds import derive_seed
from bat.state.jsonl import append_jsonl, read_jsonl_resuming, write_jsonl


@dataclass
class MetricsLog:
    """`metrics.jsonl` written by rank 0; on resume, lines after the restored step are dropped."""

    path: Path
    is_main: bool

    def truncate_after(self, step: int) -> None:
        """Keep only records with `step <= step` (steps after a checkpoint are re-run on resume; a torn last
        line, from a crash during its append, is one of those)."""
        if self.is_main and self.path.exists():
            records, _ = read_jsonl_resuming(self.path)
            write_jsonl(self.path, [r for r in records if r.get("step", 0) <= step])

    def reset(self) -> None:
        if self.is_main and self.path.exists():
            write_jsonl(self.path, [])

    def write(self, record: dict[str, Any]) -> None:
        if self.is_main:
            append_jsonl(self.path, [record])


def all_sum(values: Sequence[float]) -> list[float]:
    """Element-wise sum of `values` over all ranks (identity without a process group)."""
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(list(values), dtype=torch.float64)
    if dist.is_initialized() and dist.get_world_size() > 1:
        if dist.get_backend() == "nccl":
            tensor = tensor.cuda()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return [float(v) for v in tensor.cpu()]


def peak_memory_mb() -> float:
    """Peak memory of this process in MiB: CUDA max allocated on GPU, max RSS on CPU."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rank_slice(items: Sequence[Any], rank: int, world: int) -> list[Any]:
    """This rank's contiguous share of a global batch whose length is a multiple of `world`."""
    if len(items) % world:
        raise ValueError(f"global batch of {len(items)} does not split over {world} ranks")
    share = len(items) // world
    return list(items[rank * share : (rank + 1) * share])


def chunks(items: Sequence[Any], size: int) -> list[list[Any]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def plan_accumulation(global_batch: int, micro: int, world: int, what: str) -> int:
    """Gradient-accumulation steps so that micro * world * accum == global_batch; else a clear error."""
    if global_batch % (micro * world):
        valid = [micro * world * k for k in range(1, 5)]
        raise ValueError(
            f"{what}={global_batch} must be a multiple of micro_batch_per_rank ({micro}) x ranks "
            f"({world}); valid values include {valid}"
        )
    return global_batch // (micro * world)


def batch_positions(n: int, cursor: int, size: int, seed: int) -> list[tuple[int, int]]:
    """(epoch, index) of the `size` examples starting at global position `cursor` of a per-epoch seeded shuffle."""
    out: list[tuple[int, int]] = []
    position = cursor
    while len(out) < size:
        epoch, offset = divmod(position, n)
        order = list(range(n))
        random.Random(derive_seed(seed, "epoch", epoch)).shuffle(order)
        take = min(size - len(out), n - offset)
        out.extend((epoch, index) for index in order[offset : offset + take])
        position += take
    return out


def batch_indices(n: int, cursor: int, size: int, seed: int) -> list[int]:
    """Indices of the `size` examples starting at global position `cursor` of a per-epoch seeded shuffle."""
    return [index for _, index in batch_positions(n, cursor, size, seed)]
