"""The staged-benchmark contract: rubric items and evidence per stage, stage formulas, Agentic and Overall.

Items, evidence and formulas are read from `benchmark.contract` (`bat.config.contract`, paper §2.1 Eqs. 1-2, §2.2.1
Eq. 4, App. A.1 Eqs. 7 and 14; default: the built-in benchmark's contract), so a user's own staged benchmark can
define them.

Item ids mirror AutoMedBench's sub-criteria. Verdicts are True / False / None, where None means the
evidence is missing for an infrastructure reason (judge down): such a stage is *null*, never 0. Items
that do not apply to a run are simply absent; a stage without applicable items is dropped and the
remaining stage weights are renormalised. All scores are on 0-1 and unrounded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bat.benchmark.builtin_spec import CONTRACT as BUILTIN_CONTRACT
from bat.benchmark.builtin_spec import STAGES as DEFAULT_STAGES
from bat.config.contract import TRACK_PLACEHOLDER, ContractConfig, StageContract
from bat.config.stages import StageSpec

BUILTIN_STAGE_KEYS = tuple(BUILTIN_CONTRACT)


@dataclass(frozen=True)
class EvidenceSpec:
    """One evidence requirement (G): what must be confirmed from execution records or artifacts."""

    id: str
    stage: str
    text: str


@dataclass(frozen=True)
class RubricItem:
    """One binary rubric item (c_l) with its evidence ids and, for judgment items, the proxy used offline."""

    id: str
    stage: str
    text: str
    evidence: tuple[str, ...]
    judgment: bool = False
    proxy: str = ""


NOT_APPLICABLE_BUILTIN = {"S1": ("s1e_plan_plot", "s1f_plot_pipeline")}
"""AutoMedBench items the built-in benchmark does not score (no plotting tool): dropped, not zero."""

_DEFAULT = ContractConfig()


def _stage(stage_key: str, contract: ContractConfig | None) -> StageContract:
    stages = (contract or _DEFAULT).stages
    if stage_key not in stages:
        raise ValueError(f"unknown stage {stage_key!r}; valid: {list(stages)}")
    return stages[stage_key]


def check_stage_keys(stages: Sequence[StageSpec], contract: ContractConfig | None = None) -> None:
    """Raise when a configured stage key has no contract (lists the stages that have one)."""
    defined = list((contract or _DEFAULT).stages)
    unknown = [s.key for s in stages if s.key not in defined]
    if unknown:
        raise ValueError(f"stages {unknown} have no rubric in benchmark.contract; valid keys: {defined}")


def rubric(stage_key: str, track: str, contract: ContractConfig | None = None) -> list[RubricItem]:
    """Rubric items of `stage_key` for `track` from `contract` (default: the built-in contract); a `{track}` in an
    item id becomes the track name."""
    return [
        RubricItem(
            item.id.replace(TRACK_PLACEHOLDER, track),
            stage_key,
            item.text,
            tuple(item.evidence),
            item.judgment,
            item.proxy,
        )
        for item in _stage(stage_key, contract).items
    ]


def evidence_requirements(stage_key: str, contract: ContractConfig | None = None) -> list[EvidenceSpec]:
    """Evidence requirements (G) of `stage_key` from `contract` (default: the built-in contract)."""
    return [EvidenceSpec(e.id, stage_key, e.text) for e in _stage(stage_key, contract).evidence]


def stage_formula(stage_key: str, contract: ContractConfig | None = None) -> str:
    """The score formula of `stage_key` (`bat.config.contract.FORMULA_ITEMS` says what each computes)."""
    return _stage(stage_key, contract).formula


def stage_score(
    key: str,
    verdicts: Mapping[str, bool | None],
    measures: Mapping[str, float] | None = None,
    formula: str | None = None,
) -> float | None:
    """Score of one stage from its applicable item verdicts (None if any is null; None if no item applies -> NA).

    `formula` (default: the built-in contract's formula of `key`, `mean` for other keys): `pilot_ladder` is the
    ladder {0, 0.5, 1} (built-in S3); `completion_format` = 0.5*completion_rate + 0.5*format_valid (S4);
    `submission` = 0.5*valid + 0.5*format (S5); `mean` = mean of items. Use `is_not_applicable` to tell NA from null.
    """
    if not verdicts or any(v is None for v in verdicts.values()):
        return None
    measures = measures or {}
    if formula is None:
        formula = BUILTIN_CONTRACT[key].formula if key in BUILTIN_CONTRACT else "mean"
    if formula == "pilot_ladder":
        if not verdicts.get("s3a_pilot_before_batch"):
            return 0.0
        fixed = verdicts.get("s3c_failure_fixed", True)
        return 1.0 if verdicts.get("s3b_output_checked") and fixed else 0.5
    if formula == "completion_format":
        completion = measures.get("completion_rate", 1.0 if verdicts.get("s4a_all_cases_run") else 0.0)
        return 0.5 * float(completion) + 0.5 * float(bool(verdicts.get("s4b_format_valid")))
    if formula == "submission":
        return 0.5 * float(bool(verdicts.get("s5a_has_valid_results"))) + 0.5 * float(
            bool(verdicts.get("s5b_format_valid"))
        )
    return sum(float(bool(v)) for v in verdicts.values()) / len(verdicts)


def agentic(
    stage_scores: Mapping[str, float | None],
    stages: Sequence[StageSpec] = DEFAULT_STAGES,
    not_applicable: Sequence[str] = (),
) -> float | None:
    """Weighted stage mean; stages in `not_applicable` are dropped and weights renormalised; a null stage -> None."""
    used = [s for s in stages if s.key not in set(not_applicable)]
    if not used:
        return None
    if any(stage_scores.get(s.key) is None for s in used):
        return None
    total = sum(s.weight for s in used)
    return sum(s.weight * float(stage_scores[s.key]) for s in used) / total  # type: ignore[arg-type]


def overall(task: float | None, agentic_score: float | None) -> float | None:
    """Overall = 0.5 * Task + 0.5 * Agentic from unrounded values; None when either is null."""
    if task is None or agentic_score is None:
        return None
    return 0.5 * task + 0.5 * agentic_score


def to_percent(value: float | None) -> float | None:
    """Report form: 0-100 with one decimal (for display only; compute differences from unrounded values)."""
    return None if value is None else round(100.0 * value, 1)


STAGE_SKILLS: dict[str, str] = {
    "S1": "Plan: read the brief (task/README.md, task/spec.json) and every model card in models/; choose the model whose "
    "modality matches the task; write plan.md naming the model and the steps setup -> pilot -> validate -> inference -> submit.",
    "S2": "Setup: check_compatibility of the chosen model, install every package its card requires, then load_model. "
    "If loading fails, read the error, install what is missing and load again.",
    "S3": "Validate: run_model on one or two cases first (a pilot), then check_outputs. If the check reports a degenerate, "
    "non-finite or wrongly laid-out output, re-read the model card and spec, fix the preprocessing (normalize, fill_nan, "
    "match_contract) and pilot again until the check is clean.",
    "S4": "Inference: run_model on all cases with the validated settings, then check_outputs on all cases and re-run any case that fails.",
    "S5": "Submit: when every case has a clean output, call submit; it writes submission/manifest.json.",
}
"""Public stage skill texts (kappa) shown to agents; contain no instance content."""
