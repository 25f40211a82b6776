"""Copy pretraining of the tiny base model: synthetic token sequences in which spans recur, loss on the recurrences.

A real base model arrives pretrained and can copy a name it has read; the tiny model is random-init and, as
measured (`docs/results/RUNS.md`), does not learn to copy from the SFT rows alone (renamed identifiers stayed at
3.8 nats per token after 300 SFT steps, about a uniform guess over letters). A couple of thousand steps on sequences where a span
recurs grow that ability (induction heads), on a small vocabulary first and then on every ordinary token, so the policy can later
copy held-out names it has never been trained on. The data is random token ids: nothing from either seed space.

Reads and writes only the in-memory model; deterministic for one seed on one machine (CPU, fixed thread count).
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from bat.config.model import CopyPretrainConfig, CopyStage


def copy_sequence(rng: random.Random, tokens: Sequence[int], length: int) -> tuple[list[int], list[int]]:
    """One sequence of `length` ids from `tokens`: a random span of 8..length/2 ids, a random gap, the same span
    again, random fill. Returns (ids, mask) with mask 1 on the repeated span after its first id (the first one
    cannot be predicted; every later one can, by finding the earlier occurrence)."""
    span = [rng.choice(tokens) for _ in range(rng.randint(min(8, length // 2), length // 2))]
    gap = [rng.choice(tokens) for _ in range(rng.randint(0, length - 2 * len(span)))]
    ids = span + gap + span
    mask = [0] * (len(span) + len(gap)) + [0] + [1] * (len(span) - 1)
    fill = length - len(ids)
    return ids + [rng.choice(tokens) for _ in range(fill)], mask + [0] * fill


def text_copy_sequence(
    rng: random.Random,
    stream: Sequence[int],
    tokens: Sequence[int],
    length: int,
    name_ids: Callable[[random.Random], list[int]] | None = None,
) -> tuple[list[int], list[int]]:
    """A window of `stream` (tokenized corpus) with one random name inserted at 2..4 places, cut to `length`.
    The name is `name_ids(rng)` (e.g. a tokenized random identifier), else 3..8 random ids from `tokens`.
    Returns (ids, mask) with mask 1 on each later occurrence after its first id."""
    name = name_ids(rng) if name_ids is not None else [rng.choice(tokens) for _ in range(rng.randint(3, 8))]
    copies = rng.randint(2, 4)
    body = length - copies * len(name)
    start = rng.randrange(max(1, len(stream) - body))
    window = list(stream[start : start + body])
    cuts = sorted(rng.randrange(len(window) + 1) for _ in range(copies))
    ids: list[int] = []
    mask: list[int] = []
    previous = 0
    for index, cut in enumerate(cuts):
        ids += window[previous:cut] + name
        mask += [0] * (cut - previous) + ([0] * len(name) if index == 0 else [0] + [1] * (len(name) - 1))
        previous = cut
    ids += window[previous:]
    mask += [0] * (len(window) - previous)
    return ids[:length], mask[:length]


def copy_pretrain(
    model: Any,
    tokens: Sequence[int],
    cfg: CopyPretrainConfig,
    seed: int,
    progress: Callable[[dict[str, float]], None] | None = None,
    stream: Sequence[int] | None = None,
    name_ids: Callable[[random.Random], list[int]] | None = None,
) -> dict[str, float]:
    """Train `model` in place through `cfg.stages` (AdamW) on `copy_sequence` batches; stage i draws ids from
    `tokens[:stage.vocab]` (all of `tokens` for 0), so list the ids in the order the vocabulary should grow.
    `text` stages need `stream`, the tokenized practice corpus their windows come from; `identifier` stages
    also need `name_ids`, which draws one tokenized random identifier.

    A stage with `until_loss` runs past its `steps` until the mean copy loss of its last `cfg.log_every` steps
    reaches the target (at most `stage.step_bound` steps).

    Returns {steps, first_loss, loss, seconds, stages_short}: the masked mean NLL on repeated ids over the first
    and the last logged window, and how many `until_loss` stages ended at their bound without the target.
    `progress` is called with the same keys (plus `vocab`, `seq_len`) every `cfg.log_every` steps and at the end."""
    import torch

    if any(stage.kind in ("text", "identifier") for stage in cfg.stages) and not stream:
        raise ValueError("a text or identifier copy stage needs the tokenized corpus (`stream`)")
    if any(stage.kind == "identifier" for stage in cfg.stages) and name_ids is None:
        raise ValueError("an identifier copy stage needs `name_ids`")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup_steps)))
    model.train()
    trainer = _CopyTrainer(model, optimizer, schedule, rng, cfg, _LossLog(progress), stream, name_ids)
    pool: list[int] = []
    for number, stage in enumerate(cfg.stages, start=1):
        pool = list(tokens[: stage.vocab] if stage.vocab else tokens)
        trainer.run_stage(number, stage, pool)
    if cfg.stages:
        trainer.log.report(trainer.step, cfg.stages[-1], pool)
    model.eval()
    return trainer.log.summary


class _LossLog:
    """The copy losses since the last report and the running summary {steps, first_loss, loss, seconds,
    stages_short}; each report averages the pending losses into the summary and passes it to `progress`."""

    def __init__(self, progress: Callable[[dict[str, float]], None] | None) -> None:
        self.progress = progress
        self.started = time.perf_counter()
        self.window: list[float] = []
        self.first: float | None = None
        self.summary: dict[str, float] = {
            "steps": 0,
            "first_loss": float("nan"),
            "loss": float("nan"),
            "seconds": 0.0,
            "stages_short": 0,
        }

    def report(self, step: int, stage: CopyStage, pool: list[int]) -> None:
        """Fold the pending losses into the summary (no-op when none are pending) and call `progress`."""
        if not self.window:
            return
        mean = sum(self.window) / len(self.window)
        self.first = mean if self.first is None else self.first
        self.summary = {
            **self.summary,
            "steps": step,
            "first_loss": self.first,
            "loss": mean,
            "seconds": time.perf_counter() - self.started,
        }
        if self.progress is not None:
            self.progress({**self.summary, "vocab": len(pool), "seq_len": stage.seq_len})
        self.window = []


class _CopyTrainer:
    """The optimizer state shared by every copy stage: draws batches, takes masked-loss steps, counts steps."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        schedule: Any,
        rng: random.Random,
        cfg: CopyPretrainConfig,
        log: _LossLog,
        stream: Sequence[int] | None,
        name_ids: Callable[[random.Random], list[int]] | None,
    ) -> None:
        self.model, self.optimizer, self.schedule, self.rng = model, optimizer, schedule, rng
        self.cfg, self.log, self.stream, self.name_ids = cfg, log, stream, name_ids
        self.step = 0

    def run_stage(self, number: int, stage: CopyStage, pool: list[int]) -> None:
        """Train one stage on ids from `pool` for `stage.steps` steps, or on to `until_loss` within its bound;
        warn and count it in `stages_short` when the bound ends it short of the target."""
        recent: collections.deque[float] = collections.deque(maxlen=self.cfg.log_every)
        for taken in range(1, stage.step_bound + 1):
            self.step += 1
            self.log.window.append(self.train_step(self.batch(stage, pool)))
            recent.append(self.log.window[-1])
            if self.step % self.cfg.log_every == 0:
                self.log.report(self.step, stage, pool)
            if taken >= stage.steps and (
                stage.until_loss is None
                or (len(recent) == recent.maxlen and sum(recent) / len(recent) <= stage.until_loss)
            ):
                return
        if stage.until_loss is not None:
            self.log.summary["stages_short"] += 1
            print(
                f"copy pretraining: warning: stage {number} reached max_steps {stage.step_bound} with mean "
                f"copy loss {sum(recent) / len(recent):.3f} > until_loss {stage.until_loss}",
                flush=True,
            )

    def batch(self, stage: CopyStage, pool: list[int]) -> list[tuple[list[int], list[int]]]:
        """One batch of (ids, mask) sequences of the stage's kind: corpus windows with a name, or random spans."""
        size = stage.batch or self.cfg.batch
        if stage.kind in ("text", "identifier"):
            names = self.name_ids if stage.kind == "identifier" else None
            return [text_copy_sequence(self.rng, self.stream, pool, stage.seq_len, names) for _ in range(size)]
        return [copy_sequence(self.rng, pool, stage.seq_len) for _ in range(size)]

    def train_step(self, batch: list[tuple[list[int], list[int]]]) -> float:
        """One clipped AdamW step on the mean NLL of the masked (repeated) ids; returns that loss."""
        import torch

        ids = torch.tensor([b[0] for b in batch])
        mask = torch.tensor([b[1] for b in batch])[:, 1:].bool()
        logits = self.model(input_ids=ids).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")[mask].mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.schedule.step()
        return float(loss.detach())


def identifier_ids(tokenizer: Any) -> Callable[[random.Random], list[int]]:
    """A `name_ids` drawing a random model, package or case identifier (`bat.policy.rename`, no seed space's
    words) and tokenizing it, preceded by a space half of the time."""
    from bat.policy.rename import fresh_identifier

    def draw(rng: random.Random) -> list[int]:
        kind = rng.choice(("model", "model", "package", "case"))
        text = fresh_identifier(kind, rng)
        if kind == "case":
            text = fresh_identifier("case_prefix", rng) + text
        return tokenizer((" " if rng.random() < 0.5 else "") + text, add_special_tokens=False)["input_ids"]

    return draw


def ordinary_tokens(tokenizer: Any) -> list[int]:
    """Every token id except the special and added tokens (chat markers, tool-call markers), in id order: the
    256 byte symbols first, then the BPE merges from the most frequent."""
    added = set(tokenizer.get_added_vocab().values()) | set(tokenizer.all_special_ids)
    return [i for i in range(len(tokenizer)) if i not in added]
