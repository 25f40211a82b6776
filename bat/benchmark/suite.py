"""The held-out suite (tracks x repeats per split), practice seeds, the fingerprint export and suite runs.

Held-out instances derive from (heldout_seed, held-out secret, "heldout", split, track, repeat) as 128-bit seeds and
use the held-out vocabulary; practice instances from (practice_seed, "practice", track, index) and the practice
vocabulary. The secret (`bat.benchmark.secret`) keeps the held-out suite out of reach of anything that only has the
config and the code.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bat.benchmark import workspace_files as wf
from bat.benchmark.heldout_runs import heldout_run_id
from bat.benchmark.instance import Instance, InstanceParams, brief_text, generate_instance
from bat.benchmark.score import RunScore
from bat.benchmark.secret import HeldoutSecret
from bat.benchmark.tracks import get_track
from bat.benchmark.vocab import vocab
from bat.seeds import derive_seed, derive_wide_seed

SPLITS = ("controller", "final", "test")


@dataclass(frozen=True)
class SuiteRun:
    """One held-out run: its track, repeat, fixed instance seed (128-bit, secret-derived) and sampling seed (for LLM
    agents)."""

    run_id: str
    split: str
    track: str
    repeat: int
    instance_seed: int
    sampling_seed: int


suite_run_id = heldout_run_id
"""The id of held-out run `repeat` of `track` on `split`: `<split>-<track>-rNN` (the form of every benchmark)."""


def suite_run_track(run_id: str) -> str:
    """The track named in a held-out run id (`suite_run_id`'s form); ValueError naming the valid form otherwise."""
    split, _, rest = run_id.partition("-")
    track, marker, repeat = rest.rpartition("-r")
    if split not in SPLITS or not track or not marker or not repeat.isdigit():
        raise ValueError(
            f"{run_id!r} is not a held-out run id; valid form: <split>-<track>-rNN, split in {list(SPLITS)}"
        )
    return track


def _cfg(config: Any) -> Any:
    from bat.config.root import BatConfig

    return config or BatConfig()


def heldout_suite(
    config: Any = None, split: str = "controller", tracks: tuple[str, ...] | None = None, *, secret: HeldoutSecret
) -> list[SuiteRun]:
    """Runs of the held-out suite for `split` (splits are disjoint runs of the same tracks) under `secret`."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid: {list(SPLITS)}")
    bench = _cfg(config).benchmark
    chosen = tracks or bench.tracks
    for t in chosen:
        get_track(t)
    return [
        SuiteRun(
            suite_run_id(split, t, r),
            split,
            t,
            r,
            derive_wide_seed(bench.heldout_seed, secret.key, "heldout", split, t, r),
            derive_seed(bench.heldout_seed, "sampling", split, t, r),
        )
        for t in chosen
        for r in range(bench.repeats_for(split))
    ]


def suite_instance(run: SuiteRun, config: Any = None) -> Instance:
    """The fixed held-out instance of `run`."""
    return generate_instance(run.track, "heldout", run.instance_seed, config=_cfg(config).benchmark)


def practice_seed(track: str, index: int, config: Any = None) -> int:
    """Seed of the `index`-th practice task of `track` (practice space, disjoint from the held-out one)."""
    get_track(track)
    return derive_seed(_cfg(config).benchmark.practice_seed, "practice", track, index)


def practice_instance(
    track: str,
    seed: int,
    config: Any = None,
    *,
    n_cases: int | None = None,
    params: InstanceParams | None = None,
    input_fraction: float = 1.0,
) -> Instance:
    """Rebuild a practice instance (and its grader side) from its seed (and, for a written task, its explicit
    `params`, see `InstanceParams`; for an E2E surrogate, its `input_fraction`, lambda_input of Eq. 12)."""
    return generate_instance(
        track,
        "practice",
        seed,
        n_cases=n_cases,
        config=_cfg(config).benchmark,
        params=params,
        input_fraction=input_fraction,
    )


def instance_identifiers(inst: Instance) -> set[str]:
    """Every identifier an instance exposes: instance id, case ids, model and package names, data file names."""
    ids = {inst.instance_id, *inst.case_ids, *inst.candidates}
    ids |= {p.split("/")[-1] for p in inst.files if p.startswith(f"{wf.DATA_DIR}/")}
    ids |= set((inst.files["env/wheelhouse.txt"].decode()).split())
    return ids


def fingerprint_entries(config: Any = None, *, secret: HeldoutSecret) -> list[dict[str, str]]:
    """Held-out fingerprints for the leakage index: identifiers, paths, answers, texts, eval field names.

    Answers are exported as `<case id>=<answer>` (bare labels such as "yes" or "benign" are shared
    vocabulary of both spaces and would match every row); texts are the instance paragraphs of the briefs
    and the held-out VQA question wordings.
    """
    cfg = _cfg(config)
    entries: dict[tuple[str, str], str] = {}
    v = vocab("heldout")
    for split in SPLITS:
        for run in heldout_suite(cfg, split, secret=secret):
            inst = suite_instance(run, cfg)
            src = run.run_id
            for ident in instance_identifiers(inst):
                entries.setdefault(("identifier", ident), src)
            for path in inst.files:
                if path.startswith(f"{wf.DATA_DIR}/"):
                    entries.setdefault(("path", path), src)
            for case, truth in inst.truths.items():
                if not isinstance(truth, np.ndarray):
                    entries.setdefault(("answer", f"{case}={truth}"), src)
            entries.setdefault(("text", brief_text(inst, get_track(inst.track), v)), src)
    for question in v.questions.values():
        entries.setdefault(("text", question), "heldout:vqa")
    for field in ("heldout_split", "sampling_seed", "instance_seed"):
        entries.setdefault(("field", field), "heldout:suite")
    return [{"kind": k, "value": val, "source": src} for (k, val), src in sorted(entries.items())]


def run_suite(
    agent: str,
    config: Any = None,
    *,
    secret: HeldoutSecret,
    split: str = "controller",
    tracks: tuple[str, ...] | None = None,
    workdir: str | Path | None = None,
) -> list[RunScore]:
    """Run a scripted agent on every run of the held-out split under `secret`; returns one RunScore per run."""
    from bat.benchmark.episode import run_instance

    cfg = _cfg(config)
    scores = []
    with tempfile.TemporaryDirectory(prefix="bat-bench-") as tmp:
        base = Path(workdir) if workdir else Path(tmp)
        for run in heldout_suite(cfg, split, tracks, secret=secret):
            ep = run_instance(
                suite_instance(run, cfg), agent, base / run.run_id, cfg, run_id=run.run_id, repeat=run.repeat
            )
            scores.append(ep.score)
    return scores


def aggregate(scores: list[RunScore]) -> dict[str, Any]:
    """Mean of repeats within each track, then mean of track means (0-1, unrounded); nulls counted, not averaged."""
    out: dict[str, Any] = {"tracks": {}, "nulls": 0}
    for metric in ("overall", "agentic", "task"):
        per_track = {}
        for track in dict.fromkeys(s.track for s in scores):
            values = [getattr(s, metric) for s in scores if s.track == track]
            finite = [v for v in values if v is not None]
            per_track[track] = float(np.mean(finite)) if finite else None
            out["nulls"] += len(values) - len(finite) if metric == "overall" else 0
            out["tracks"].setdefault(track, {})[metric] = per_track[track]
        means = [v for v in per_track.values() if v is not None]
        out[metric] = float(np.mean(means)) if means else None
    return out
