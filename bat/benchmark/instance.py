"""Generate one benchmark instance from a seed and write it out: workspace files + a separate grader side.

Workspace: task/README.md, task/spec.json, data/<prefix>_<case>.npy (+ .json questions), models/<name>/
{card.md, weights.json}, env/wheelhouse.txt. Grader side (never inside the workspace): instance.json
(pitfalls, fitting model, cases), truth.json, truth.npz.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bat.benchmark import workspace_files as wf
from bat.benchmark.contract import STAGE_SKILLS
from bat.benchmark.tracks import get_track
from bat.benchmark.vocab import vocab
from bat.seeds import derive_seed, derive_wide_seed
from bat.state.atomic import atomic_dir, dumps_json

if TYPE_CHECKING:
    from bat.config.benchmark import BenchmarkConfig

PITFALLS = ("normalisation", "layout", "dependency", "corrupt_case")
PILOT_REVEALED = ("normalisation", "layout", "corrupt_case")
"""Pitfalls a pilot run + output check reveals (an instance needs one for the recovery and failure outcomes)."""


@dataclass(frozen=True)
class InstanceParams:
    """Explicit parameters of a practice instance (a task written by the LLM task writer, `bat.bank.task_writer`).

    They replace what the seed would draw for the modality, the distractor model cards and the pitfalls; names,
    cases, intensity ranges and everything else still come from the seed, so the instance stays deterministic."""

    modality: str
    """Modality of the cases and of the fitting model (a profile of the track)."""
    pitfalls: tuple[str, ...] = ()
    """Pitfalls that are on (names from `PITFALLS`); the others are off."""
    distractors: tuple[str, ...] = ()
    """Modalities of the other candidate model cards (distinct profiles of the track, not `modality`)."""


def params_problems(track: str, params: InstanceParams) -> dict[str, str]:
    """What makes `params` impossible for `track`, keyed by the parameter (`modality`, `pitfalls`, `distractors`);
    each message names the valid values. Empty: the generator takes them."""
    profiles = list(get_track(track).profiles)
    problems: dict[str, str] = {}
    if params.modality not in profiles:
        problems["modality"] = f"modality {params.modality!r} is not a {track} modality; valid: {profiles}"
    if any(p not in PITFALLS for p in params.pitfalls) or len(set(params.pitfalls)) != len(params.pitfalls):
        problems["pitfalls"] = f"pitfalls {list(params.pitfalls)} must be distinct names from {list(PITFALLS)}"
    others = [m for m in profiles if m != params.modality]
    if any(d not in others for d in params.distractors) or len(set(params.distractors)) != len(params.distractors):
        problems["distractors"] = (
            f"distractors {list(params.distractors)} must be distinct {track} modalities other than "
            f"{params.modality!r}; valid: {others}"
        )
    return problems


@dataclass
class Instance:
    """A generated instance: public workspace files and the hidden grader side."""

    instance_id: str
    track: str
    space: str
    seed: int
    modality: str
    case_ids: list[str]
    pitfalls: dict[str, Any]
    fitting_model: str
    candidates: list[str]
    required_package: str | None
    files: dict[str, bytes] = field(repr=False)
    truths: dict[str, Any] = field(repr=False)
    extras: dict[str, dict[str, Any]] = field(repr=False)
    input_fraction: float = 1.0
    """lambda_input of Eq. 12: every case's input holds at most this fraction of its full-size elements (practice
    only; 1.0: full size)."""

    @property
    def pilot_revealed(self) -> bool:
        """True when a pilot + check reveals a pitfall (wrong normalisation, layout or a corrupt case)."""
        return any(self.pitfalls[p] for p in PILOT_REVEALED)

    def meta(self) -> dict[str, Any]:
        """Grader-side metadata (instance.json); `input_fraction` appears only for a reduced instance, so a full-size
        one keeps the bytes it always had."""
        meta = {
            "instance_id": self.instance_id,
            "track": self.track,
            "space": self.space,
            "seed": self.seed,
            "modality": self.modality,
            "case_ids": self.case_ids,
            "pitfalls": self.pitfalls,
            "fitting_model": self.fitting_model,
            "candidates": self.candidates,
            "required_package": self.required_package,
            "extras": self.extras,
        }
        if self.input_fraction != 1.0:
            meta["input_fraction"] = self.input_fraction
        return meta


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _card(name: str, track_obj: Any, modality: str, params: dict[str, Any], alt: bool, requires: list[str]) -> str:
    layout = (
        f"differs from the contract: {track_obj.alt_note}; run_model(match_contract=true) converts it"
        if alt
        else "matches the submission contract"
    )
    req = ", ".join(f"`{p}`" for p in requires) + " (install before load_model)" if requires else "no extra packages"
    return (
        f"# Model card: {name}\n\nTrack: {track_obj.name}. Modality: {modality}.\n"
        f"What it does: {track_obj.behaviour}.\n"
        "Input: intensities scaled to [0, 1] with the dataset's intensity_range from task/spec.json "
        '(run_model normalize="unit_range"); other scalings give meaningless output.\n'
        "Inputs must be finite: fill_nan=true replaces non-finite values by the case median.\n"
        f"Output layout: {layout}.\nRequires: {req}.\nParameters: {json.dumps(params, sort_keys=True)}\n"
    )


def brief_text(inst: Instance, track_obj: Any, v: Any) -> str:
    """The instance-specific paragraph of the brief, phrased in the space's own wording."""
    goal = v.goal_phrases[inst.seed % len(v.goal_phrases)]
    return v.brief.format(
        intro=v.intro,
        goal=goal,
        n=len(inst.case_ids),
        modality=inst.modality,
        metric=track_obj.metric,
        title=track_obj.title,
    )


def _brief(inst: Instance, track_obj: Any, v: Any, tier: str, spec: dict[str, Any]) -> str:
    lines = [
        f"# Task {inst.instance_id}: {track_obj.title}",
        "",
        brief_text(inst, track_obj, v),
        "",
        f"Candidate models (cards in models/): {', '.join(inst.candidates)}.",
    ]
    lines.append(
        f"Use model {inst.fitting_model}."
        if tier == "lite"
        else "Choose the candidate whose modality fits these cases."
    )
    lines += ["", "Workflow: plan -> setup -> validate on a pilot -> inference on all cases -> submit."]
    if tier == "lite":
        lines += ["", "Stage hints:"] + [f"- {k}: {text}" for k, text in STAGE_SKILLS.items()]
    return "\n".join(lines) + "\n"


def _add_cases(
    inst: Instance, t: Any, v: Any, rng: np.random.Generator, n: int, lo: float, span: float
) -> tuple[dict[str, str], tuple[int, ...]]:
    """Generate the cases at the track's `case_shape(inst.input_fraction)`: input files (raw-scaled, one corrupted if
    drawn), truths, extras; returns (inputs, input shape)."""
    for _ in range(n):
        inst.case_ids.append(v.case_id(rng, set(inst.case_ids)))
    shape = t.case_shape(inst.input_fraction)
    cases = {cid: t.make_case(rng, inst.modality, shape) for cid in inst.case_ids}
    if inst.pitfalls["corrupt_case"]:
        inst.pitfalls["corrupt_case"] = inst.case_ids[int(rng.integers(1, n))] if n > 1 else inst.case_ids[0]
    inputs: dict[str, str] = {}
    for cid, case in cases.items():
        x = case.unit.astype(np.float32) * np.float32(span) + np.float32(lo)
        if cid == inst.pitfalls["corrupt_case"]:
            x.flat[rng.permutation(x.size)[: max(1, x.size // 10)]] = np.nan
        inputs[cid] = wf.data_file(f"{v.file_prefix}_{cid}.npy")
        inst.files[inputs[cid]] = _npy(x)
        inst.truths[cid] = case.truth
        extra = dict(case.extra)
        if "type" in extra:
            extra["question"] = v.questions[extra["type"]]
            public = {k: extra[k] for k in ("question", "choices", "type")}
            inst.files[wf.data_file(f"{v.file_prefix}_{cid}.json")] = json.dumps(public, indent=2).encode()
        inst.extras[cid] = {**extra, "input_shape": list(case.unit.shape)}
    return inputs, tuple(next(iter(cases.values())).unit.shape)


def _add_models(inst: Instance, t: Any, rng: np.random.Generator, modalities: list[str], pkgs: list[str]) -> None:
    """Model cards + weights; the first name fits the modality and carries the layout/dependency pitfalls."""
    names = [inst.fitting_model] + [c for c in inst.candidates if c != inst.fitting_model]
    for i, (name, mod) in enumerate(zip(names, modalities)):
        alt = bool(inst.pitfalls["layout"]) if i == 0 else bool(rng.random() < 0.5)
        if i == 0:
            requires = [inst.required_package] if inst.required_package else []
        else:
            requires = [pkgs[1 + int(rng.integers(2))]] if rng.random() < 0.5 else []
        weights = {
            "name": name,
            "track": t.name,
            "modality": mod,
            "params": t.profiles[mod],
            "expects": "unit_range",
            "native_layout": "alt" if alt else "contract",
            "requires": requires,
        }
        inst.files[wf.model_file(name, wf.MODEL_WEIGHTS)] = json.dumps(weights, indent=2, sort_keys=True).encode()
        inst.files[wf.model_file(name, wf.MODEL_CARD)] = _card(name, t, mod, t.profiles[mod], alt, requires).encode()


def _content_seed(seed: int, space: str, track: str) -> int:
    """Seed of an instance's random content: 128-bit for held-out instances (no exhaustive search can match a
    workspace to its seed), 31-bit for practice ones (the bank's tasks are public)."""
    return derive_wide_seed(seed, space, track) if space == "heldout" else derive_seed(seed, space, track)


def _id_suffix(seed: int, space: str, track: str) -> str:
    """Last part of an instance id: a hash of the seed for held-out instances (the id is in the workspace and must
    not reveal the seed), the seed itself in hex for practice ones."""
    return f"{derive_seed(seed, space, track, 'instance_id'):08x}" if space == "heldout" else f"{seed:08x}"


def generate_instance(
    track: str,
    space: str,
    seed: int,
    *,
    n_cases: int | None = None,
    config: BenchmarkConfig | None = None,
    params: InstanceParams | None = None,
    input_fraction: float = 1.0,
) -> Instance:
    """Build the instance of (`track`, `space`, `seed`) deterministically; `n_cases` overrides the config.

    `params` (practice space only) sets the modality, distractor cards and pitfalls: the seed's draws for them are
    still made and then replaced, so `params=None` leaves the seed-only instance exactly as it was.
    `input_fraction` (practice space only) is lambda_input of the E2E reduction (Eq. 12): every case is generated at
    the track's `case_shape(input_fraction)` (at most that fraction of the full input's elements) and the output
    contract names the reduced shape; 1.0 is the full-size instance, byte for byte. A fraction outside the track's
    range, or any fraction but 1.0 outside the practice space, raises naming what is valid."""
    from bat.config.benchmark import BenchmarkConfig

    cfg = config or BenchmarkConfig()
    t, v = get_track(track), vocab(space)
    n = n_cases or cfg.cases_per_instance
    _check_request(t, track, space, n, input_fraction, params)
    input_fraction = float(input_fraction)
    rng = np.random.default_rng(_content_seed(seed, space, track))
    modality, chosen = _draw_modalities(rng, list(t.profiles), cfg.candidate_models, params)
    taken: set[str] = set()
    names = [v.model_name(rng, taken) for _ in chosen]
    pkgs = [v.package_name(rng, taken) for _ in range(3)]
    pit, lo, span = _draw_pitfalls(rng, cfg.pitfall_probability, params)
    inst = Instance(
        instance_id=f"{v.instance_prefix}-{track[:4]}-{_id_suffix(seed, space, track)}",
        track=track,
        space=space,
        seed=seed,
        modality=modality,
        case_ids=[],
        pitfalls=pit,
        fitting_model=names[0],
        candidates=sorted(names),
        required_package=pkgs[0] if pit["dependency"] else None,
        files={},
        truths={},
        extras={},
        input_fraction=input_fraction,
    )
    inputs, shape = _add_cases(inst, t, v, rng, n, lo, span)
    if not pit["corrupt_case"]:
        pit["corrupt_case"] = None
    _add_models(inst, t, rng, chosen, pkgs)
    spec = _task_spec(inst, t, inputs, shape, (lo, lo + span))
    inst.files[wf.SPEC] = json.dumps(spec, indent=2).encode()
    inst.files[wf.BRIEF] = _brief(inst, t, v, cfg.tier, spec).encode()
    inst.files["env/wheelhouse.txt"] = ("\n".join(sorted(pkgs)) + "\n").encode()
    return inst


def _check_request(
    t: Any, track: str, space: str, n: int, input_fraction: float, params: InstanceParams | None
) -> None:
    """Raise naming what is valid when `n` < 1, when `input_fraction` is not 1.0 outside the practice space or out
    of the track's range, or when explicit `params` are given outside the practice space or do not fit the track."""
    if n < 1:
        raise ValueError(f"n_cases must be >= 1, got {n}")
    input_fraction = float(input_fraction)
    if input_fraction != 1.0:
        if space != "practice":
            raise ValueError(
                f"input_fraction={input_fraction} is for the practice space only (Eq. 12 reduces practice tasks); "
                f"{space} instances stay full size: valid there: 1.0"
            )
        problem = t.fraction_problem(input_fraction)
        if problem:
            raise ValueError(problem)
    if params is not None:
        if space != "practice":
            raise ValueError(f"explicit instance parameters are for the practice space only, got space={space!r}")
        problems = params_problems(track, params)
        if problems:
            raise ValueError("; ".join(problems.values()))


def _draw_modalities(
    rng: np.random.Generator, modalities: list[str], candidate_models: int, params: InstanceParams | None
) -> tuple[str, list[str]]:
    """(the instance's modality, the modalities of its model cards with that one first): drawn from `rng`, then
    replaced by `params` when given (the draws are made either way, so later draws do not shift)."""
    modality = modalities[int(rng.integers(len(modalities)))]
    others = [m for m in modalities if m != modality]
    chosen = [modality] + [
        others[i] for i in rng.permutation(len(others))[: min(candidate_models, len(modalities)) - 1]
    ]
    if params is not None:
        return params.modality, [params.modality, *params.distractors]
    return modality, chosen


def _draw_pitfalls(
    rng: np.random.Generator, probability: float, params: InstanceParams | None
) -> tuple[dict[str, Any], float, float]:
    """(pitfall on/off by name, raw intensity offset, raw intensity span): each pitfall drawn on with
    `probability` (then replaced by `params` when given), and scanner units only under the normalisation pitfall."""
    pit: dict[str, Any] = {k: bool(rng.random() < probability) for k in PITFALLS}
    if params is not None:
        pit = {k: k in params.pitfalls for k in PITFALLS}
    lo, span = (
        (float(rng.choice([500, 1000, 1024])), float(rng.choice([2000, 3000, 4095])))
        if pit["normalisation"]
        else (0.0, 1.0)
    )
    return pit, lo, span


def _task_spec(
    inst: Instance, t: Any, inputs: dict[str, str], shape: tuple[int, ...], intensity_range: tuple[float, float]
) -> dict[str, Any]:
    """The content of `task/spec.json`: the task, its modality, metric, cases, inputs, units and output contract."""
    return {
        "instance_id": inst.instance_id,
        "track": inst.track,
        "task": t.title,
        "modality": inst.modality,
        "metric": t.metric,
        "cases": inst.case_ids,
        "inputs": inputs,
        "intensity_range": list(intensity_range),
        "units": "scanner units" if inst.pitfalls["normalisation"] else "unit intensities",
        "output": {**t.contract(shape), "directory": f"{wf.OUTPUTS_DIR}/", "file": f"<case>.{t.output_kind}"},
        "notes": ["Inputs may contain non-finite values in rare corrupted cases."],
    }


def materialize(instance: Instance, workspace_dir: str | Path, grader_dir: str | Path) -> tuple[Path, Path]:
    """Write the workspace and the grader side, each as a whole directory renamed into place (replacing any
    previous one); the grader dir must lie outside the workspace."""
    ws, gd = Path(workspace_dir).resolve(), Path(grader_dir).resolve()
    if gd == ws or ws in gd.parents:
        raise ValueError(f"grader dir {gd} must lie outside the workspace {ws}")
    with atomic_dir(ws) as tmp:
        for rel, data in instance.files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
    arrays = {c: v for c, v in instance.truths.items() if isinstance(v, np.ndarray)}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    with atomic_dir(gd) as tmp:
        (tmp / wf.GRADER_META).write_text(dumps_json(instance.meta()))
        (tmp / wf.GRADER_TRUTHS).write_text(
            dumps_json({c: v for c, v in instance.truths.items() if not isinstance(v, np.ndarray)})
        )
        (tmp / wf.GRADER_ARRAYS).write_bytes(buf.getvalue())
        (tmp / wf.GRADER_SOURCE).write_text(f"{instance.space}:{instance.track}:{instance.seed}\n")
    return ws, gd


def load_grader_meta(grader_dir: str | Path) -> dict[str, Any]:
    """Read the instance metadata (case ids, candidates, fitting model; no truths) from a grader dir."""
    return json.loads((Path(grader_dir) / wf.GRADER_META).read_text())


def load_grader(grader_dir: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read (meta, truths) from a grader dir written by `materialize`."""
    gd = Path(grader_dir)
    meta = load_grader_meta(gd)
    truths: dict[str, Any] = json.loads((gd / wf.GRADER_TRUTHS).read_text())
    with np.load(gd / wf.GRADER_ARRAYS, allow_pickle=False) as npz:
        truths.update({k: npz[k] for k in npz.files})
    return meta, truths
