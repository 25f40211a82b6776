"""The staged-benchmark contract: rubric items and evidence per stage, stage formulas, Agentic and Overall.

Item ids mirror AutoMedBench's sub-criteria. Verdicts are True / False / None, where None means the
evidence is missing for an infrastructure reason (judge down): such a stage is *null*, never 0. Items
that do not apply to a run are simply absent; a stage without applicable items is dropped and the
remaining stage weights are renormalised. All scores are on 0-1 and unrounded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bat.config.stages import DEFAULT_STAGES, StageSpec

BUILTIN_STAGE_KEYS = ("S1", "S2", "S3", "S4", "S5")


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


EVIDENCE: dict[str, tuple[EvidenceSpec, ...]] = {
    "S1": (
        EvidenceSpec("e1_plan_artifact", "S1", "plan.md exists in the workspace"),
        EvidenceSpec("e1_plan_record", "S1", "a successful write_plan execution record"),
        EvidenceSpec("e1_research_records", "S1", "read_file records of model cards before the first model run"),
    ),
    "S2": (
        EvidenceSpec("e2_setup_records", "S2", "install / check_compatibility / load_model execution records"),
        EvidenceSpec("e2_model_loaded", "S2", "a successful load_model record before inference"),
    ),
    "S3": (
        EvidenceSpec("e3_pilot_record", "S3", "a run_model record on <= pilot_max cases before the batch run"),
        EvidenceSpec("e3_check_record", "S3", "a check_outputs record after the pilot"),
    ),
    "S4": (
        EvidenceSpec("e4_batch_record", "S4", "a run_model record covering the remaining cases"),
        EvidenceSpec("e4_outputs", "S4", "persisted outputs for the cases in outputs/"),
    ),
    "S5": (
        EvidenceSpec("e5_submit_record", "S5", "a successful submit record"),
        EvidenceSpec("e5_submission", "S5", "submission/manifest.json with one result per case"),
    ),
}


def _items(track: str) -> dict[str, tuple[RubricItem, ...]]:
    return {
        "S1": (
            RubricItem(
                "s1a_plan_md",
                "S1",
                "A plan (plan.md) was written before inference.",
                ("e1_plan_artifact", "e1_plan_record"),
            ),
            RubricItem(
                "s1b_plan_pipeline",
                "S1",
                "The plan describes the pipeline: setup, pilot/validation, full inference, submission.",
                ("e1_plan_artifact",),
                judgment=True,
                proxy="plan mentions >= 3 of 4 step groups: {setup|install|load}, {pilot|validate|check}, {inference|all cases|batch}, {submit}",
            ),
            RubricItem(
                f"s1c_{track}_model",
                "S1",
                "The plan names the model that fits the task's modality.",
                ("e1_plan_artifact",),
                judgment=True,
                proxy="plan.md contains the fitting model's exact name and no other candidate's name",
            ),
            RubricItem(
                "s1d_researched_3",
                "S1",
                "Candidate models were researched before choosing (min(3, #candidates) cards read).",
                ("e1_research_records",),
            ),
        ),
        "S2": (
            RubricItem(
                "s2a_checkpoint_downloaded",
                "S2",
                "The fitting model's weights were obtained and loaded.",
                ("e2_setup_records",),
            ),
            RubricItem(
                "s2b_compatibility_check",
                "S2",
                "Compatibility of the loaded model was checked before inference.",
                ("e2_setup_records",),
            ),
            RubricItem(
                "s2c_env_setup_success",
                "S2",
                "The environment ended set up: required packages installed, model loads.",
                ("e2_setup_records", "e2_model_loaded"),
            ),
            RubricItem(
                "s2d_env_fail_within_5",
                "S2",
                "Setup succeeded within the allowed number of failed setup calls.",
                ("e2_setup_records",),
            ),
            RubricItem(
                "s2e_model_loaded", "S2", "A model was loaded before the first inference run.", ("e2_model_loaded",)
            ),
        ),
        "S3": (
            RubricItem(
                "s3a_pilot_before_batch",
                "S3",
                "A pilot on a small case set ran before the batch run.",
                ("e3_pilot_record",),
            ),
            RubricItem(
                "s3b_output_checked",
                "S3",
                "Pilot output format, shape and non-degeneracy were checked before the batch.",
                ("e3_check_record",),
            ),
            RubricItem(
                "s3c_failure_fixed",
                "S3",
                "A failing pilot was diagnosed, fixed and re-piloted cleanly (applies only when a pilot failed).",
                ("e3_pilot_record", "e3_check_record"),
            ),
        ),
        "S4": (
            RubricItem(
                "s4a_all_cases_run",
                "S4",
                "Inference produced persisted outputs for every case.",
                ("e4_batch_record", "e4_outputs"),
            ),
            RubricItem(
                "s4b_format_valid", "S4", "Every persisted output matches the output contract.", ("e4_outputs",)
            ),
        ),
        "S5": (
            RubricItem(
                "s5a_has_valid_results",
                "S5",
                "A submission with a result for every case was made.",
                ("e5_submit_record", "e5_submission"),
            ),
            RubricItem(
                "s5b_format_valid", "S5", "Every submitted result matches the output contract.", ("e5_submission",)
            ),
        ),
    }


NOT_APPLICABLE_BUILTIN = {"S1": ("s1e_plan_plot", "s1f_plot_pipeline")}
"""AutoMedBench items the built-in benchmark does not score (no plotting tool): dropped, not zero."""


def check_stage_keys(stages: Sequence[StageSpec]) -> None:
    """Raise when a configured stage key has no built-in rubric (lists the valid keys)."""
    unknown = [s.key for s in stages if s.key not in BUILTIN_STAGE_KEYS]
    if unknown:
        raise ValueError(
            f"stages {unknown} have no rubric in the built-in benchmark; valid keys: {list(BUILTIN_STAGE_KEYS)}"
        )


def rubric(stage_key: str, track: str) -> list[RubricItem]:
    """Rubric items of `stage_key` for `track`."""
    items = _items(track)
    if stage_key not in items:
        raise ValueError(f"unknown stage {stage_key!r}; valid: {list(items)}")
    return list(items[stage_key])


def evidence_requirements(stage_key: str) -> list[EvidenceSpec]:
    """Evidence requirements (G) of `stage_key`."""
    if stage_key not in EVIDENCE:
        raise ValueError(f"unknown stage {stage_key!r}; valid: {list(EVIDENCE)}")
    return list(EVIDENCE[stage_key])


def stage_score(
    key: str, verdicts: Mapping[str, bool | None], measures: Mapping[str, float] | None = None
) -> float | None:
    """Score of one stage from its applicable item verdicts (None if any is null; None if no item applies -> NA).

    S3 is the ladder {0, 0.5, 1}; S4 = 0.5*completion_rate + 0.5*format_valid; S5 = 0.5*valid + 0.5*format;
    other stages = mean of items. Use `is_not_applicable` to tell NA from null.
    """
    if not verdicts or any(v is None for v in verdicts.values()):
        return None
    measures = measures or {}
    if key == "S3":
        if not verdicts.get("s3a_pilot_before_batch"):
            return 0.0
        fixed = verdicts.get("s3c_failure_fixed", True)
        return 1.0 if verdicts.get("s3b_output_checked") and fixed else 0.5
    if key == "S4":
        completion = measures.get("completion_rate", 1.0 if verdicts.get("s4a_all_cases_run") else 0.0)
        return 0.5 * float(completion) + 0.5 * float(bool(verdicts.get("s4b_format_valid")))
    if key == "S5":
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
