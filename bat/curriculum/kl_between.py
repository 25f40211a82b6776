"""KL(candidate || reference) of any two checkpoints on a finished run's KL probe rows, for reading a run after the
fact (`bat model diff --kl-state`): reads the run's config and newest bank, keeps its chunks in a scratch folder
that is removed afterwards, writes nothing under the run."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bat.curriculum.kl_chunks import KlEstimate


def checkpoint_kl(state: str | Path, candidate: str | Path, reference: str | Path) -> KlEstimate:
    """Mean per-token KL(candidate || reference) over `state`'s KL probe prompts, sampled and rendered as the run's
    route measures it (its `curriculum.fallback.kl_new_tokens`, `model.dtype`, tool list, run seed); StateFileError
    when the run's bank holds no probe rows."""
    from bat.config.run_record import config_of_run
    from bat.curriculum.kl import probe_prompts
    from bat.curriculum.kl_chunks import chunked_kl
    from bat.policy.tools import config_tools
    from bat.state.errors import StateFileError
    from bat.state.layout import RunLayout

    cfg = config_of_run(str(state), None, [])
    layout = RunLayout(state)
    prompts = probe_prompts(layout, cfg)
    if not prompts:
        raise StateFileError(Path(state), "its bank holds no KL probe rows", hint="give a run state with a bank")
    with tempfile.TemporaryDirectory(prefix="bat-kl-") as scratch:
        return chunked_kl(
            lambda i: Path(scratch) / f"chunk_{i:03d}.json",
            str(candidate),
            str(reference),
            prompts,
            seed=cfg.run.seed,
            new_tokens=cfg.curriculum.fallback.kl_new_tokens,
            dtype=cfg.model.dtype,
            tools=config_tools(cfg)[1] or [],
        )
