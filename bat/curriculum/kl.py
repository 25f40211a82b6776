"""KL(candidate || best) for the fallback rule, measured on the bank rows held back as probes (never trained on)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bat.curriculum.plan import kl_probe_ids
from bat.phase.events import log_event
from bat.schemas.routing import BestCheckpoint

if TYPE_CHECKING:
    from bat.config.root import BatConfig
    from bat.phase.context import PhaseContext
    from bat.state.layout import RunLayout


def probe_prompts(layout: RunLayout, config: BatConfig) -> list[list[dict]]:
    """Opening messages (system + user) of the KL probe rows of the run's newest admitted bank."""
    from bat.bank.store import open_bank

    bank = open_bank(layout)
    rows = {r.state_id: r for r in bank.rows()}
    ids = kl_probe_ids(sorted(rows), config.curriculum, config.run.seed)
    return [[m.model_dump(mode="json", exclude_none=True) for m in rows[sid].prompt] for sid in ids]


def same_weights(a: Path, b: Path) -> bool:
    """Whether the HF model directories `a` and `b` hold byte-identical weights and model config (then they compute
    the same distribution and KL is 0 without loading either: a round whose steps all had equal rewards)."""
    from bat.state.digest import sha256_path
    from bat.state.model_files import export_config, export_weights

    files = (export_weights, export_config)
    return all(f(a).is_file() and sha256_path(f(a)) == sha256_path(f(b)) for f in files)


def measure_kl(ctx: PhaseContext, candidate: str, best: BestCheckpoint) -> float | None:
    """Mean per-token KL(candidate || best) over the probe prompts (rendered with the configured benchmark's tool
    list in `sft.tool_format`, as rollouts render them), both loaded in `model.dtype` (KL in fp32), in
    chunks kept under `route/kl/` so a requeued route continues (`bat.curriculum.kl_chunks`; the events log gets the
    interval across chunks); 0 without loading a model when the candidate is the best or holds the same weights
    (`same_weights`); None (logged) when it cannot be measured: KL disabled, or a checkpoint that is not a model
    directory (scripted evaluations)."""
    cfg = ctx.config.curriculum.fallback
    if not cfg.kl_enabled:
        return None
    if candidate == best.checkpoint:
        return 0.0
    missing = [p for p in (candidate, best.checkpoint) if not Path(p).is_dir()]
    if missing:
        log_event(ctx.layout, ctx.round, "route", f"KL not measured: {missing} are not checkpoint directories")
        return None
    if same_weights(Path(candidate), Path(best.checkpoint)):
        log_event(ctx.layout, ctx.round, "route", "KL(candidate || best) 0: the candidate's weights are the best's")
        return 0.0
    prompts = probe_prompts(ctx.layout, ctx.config)
    if not prompts:
        log_event(ctx.layout, ctx.round, "route", "KL not measured: the bank holds no probe rows")
        return None
    from bat.curriculum.kl_chunks import chunked_kl
    from bat.policy.tools import config_tools

    result = chunked_kl(
        ctx.layout.round(ctx.round).kl_chunk,
        candidate,
        best.checkpoint,
        prompts,
        seed=ctx.seed("kl"),
        new_tokens=cfg.kl_new_tokens,
        dtype=ctx.config.model.dtype,
        tools=config_tools(ctx.config)[1] or [],
        log=lambda line: log_event(ctx.layout, ctx.round, "route", line),
    )
    interval = f" +- {result.half_width:.4g} (95%, across chunks)" if result.half_width is not None else ""
    log_event(
        ctx.layout,
        ctx.round,
        "route",
        f"KL(candidate || best) {result.mean:.4g}{interval} over {result.prompts} probe prompts, "
        f"{result.tokens} tokens; {result.resumed} of {result.chunks} chunks from an earlier attempt",
    )
    return result.mean
