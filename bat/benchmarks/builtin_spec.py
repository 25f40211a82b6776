"""The built-in benchmark's declared names and contract as plain data: its ordered stages (keys, names, weights), its
tracks, its rubric contract (items, evidence, formula per stage; ids mirror AutoMedBench's sub-criteria) and the
stages the promotion gate bounds one by one.

This is the one place the built-in stage keys and track names are spelled. It imports nothing from bat, so
configuration reads its defaults from here (`bat.config.stages`, `bat.config.contract`, `bat.config.benchmark`,
`bat.config.curriculum`) without loading the benchmark; `bat.benchmark.builtin_spec` gives the same declaration as
config types, and every other module reads the configured stages and tracks.
"""

from __future__ import annotations

from typing import Any

STAGES: tuple[dict[str, Any], ...] = (
    dict(key="S1", name="Plan", weight=0.25),
    dict(key="S2", name="Setup", weight=0.15),
    dict(key="S3", name="Validate", weight=0.35),
    dict(key="S4", name="Inference", weight=0.15),
    dict(key="S5", name="Submit", weight=0.10),
)
"""The built-in benchmark's ordered stages with their Agentic weights (CONTRACTS.md)."""
STAGE_KEYS: tuple[str, ...] = tuple(s["key"] for s in STAGES)
LATE_STAGES: tuple[str, ...] = STAGE_KEYS[2:]
"""Stages whose own drop the promotion gate bounds (validation, inference, submission): every stage after the first
two, the rule a plug-in benchmark's late stages follow too."""
TRACKS: tuple[str, ...] = ("classification", "detection", "enhancement", "report", "segmentation", "synthesis", "vqa")
"""The seven synthetic tracks (`bat.benchmark.tracks` implements each)."""


def _item(id: str, text: str, *evidence: str, proxy: str = "") -> dict[str, Any]:
    return dict(id=id, text=text, evidence=evidence, judgment=bool(proxy), proxy=proxy)


def _evidence(*pairs: tuple[str, str]) -> tuple[dict[str, str], ...]:
    return tuple(dict(id=i, text=t) for i, t in pairs)


CONTRACT: dict[str, dict[str, Any]] = {
    "S1": dict(
        items=(
            _item(
                "s1a_plan_md", "A plan (plan.md) was written before inference.", "e1_plan_artifact", "e1_plan_record"
            ),
            _item(
                "s1b_plan_pipeline",
                "The plan describes the pipeline: setup, pilot/validation, full inference, submission.",
                "e1_plan_artifact",
                proxy="plan mentions >= 3 of 4 step groups: {setup|install|load}, {pilot|validate|check}, "
                "{inference|all cases|batch}, {submit}",
            ),
            _item(
                "s1c_{track}_model",
                "The plan names the model that fits the task's modality.",
                "e1_plan_artifact",
                proxy="plan.md contains the fitting model's exact name and no other candidate's name",
            ),
            _item(
                "s1d_researched_3",
                "Candidate models were researched before choosing (min(3, #candidates) cards read).",
                "e1_research_records",
            ),
        ),
        evidence=_evidence(
            ("e1_plan_artifact", "plan.md exists in the workspace"),
            ("e1_plan_record", "a successful write_plan execution record"),
            ("e1_research_records", "read_file records of model cards before the first model run"),
        ),
    ),
    "S2": dict(
        items=(
            _item(
                "s2a_checkpoint_downloaded", "The fitting model's weights were obtained and loaded.", "e2_setup_records"
            ),
            _item(
                "s2b_compatibility_check",
                "Compatibility of the loaded model was checked before inference.",
                "e2_setup_records",
            ),
            _item(
                "s2c_env_setup_success",
                "The environment ended set up: required packages installed, model loads.",
                "e2_setup_records",
                "e2_model_loaded",
            ),
            _item(
                "s2d_env_fail_within_5",
                "Setup succeeded within the allowed number of failed setup calls.",
                "e2_setup_records",
            ),
            _item("s2e_model_loaded", "A model was loaded before the first inference run.", "e2_model_loaded"),
        ),
        evidence=_evidence(
            ("e2_setup_records", "install / check_compatibility / load_model execution records"),
            ("e2_model_loaded", "a successful load_model record before inference"),
        ),
    ),
    "S3": dict(
        items=(
            _item("s3a_pilot_before_batch", "A pilot on a small case set ran before the batch run.", "e3_pilot_record"),
            _item(
                "s3b_output_checked",
                "Pilot output format, shape and non-degeneracy were checked before the batch.",
                "e3_check_record",
            ),
            _item(
                "s3c_failure_fixed",
                "A failing pilot was diagnosed, fixed and re-piloted cleanly (applies only when a pilot failed).",
                "e3_pilot_record",
                "e3_check_record",
            ),
        ),
        evidence=_evidence(
            ("e3_pilot_record", "a run_model record on <= pilot_max cases before the batch run"),
            ("e3_check_record", "a check_outputs record after the pilot"),
        ),
        formula="pilot_ladder",
    ),
    "S4": dict(
        items=(
            _item(
                "s4a_all_cases_run",
                "Inference produced persisted outputs for every case.",
                "e4_batch_record",
                "e4_outputs",
            ),
            _item("s4b_format_valid", "Every persisted output matches the output contract.", "e4_outputs"),
        ),
        evidence=_evidence(
            ("e4_batch_record", "a run_model record covering the remaining cases"),
            ("e4_outputs", "persisted outputs for the cases in outputs/"),
        ),
        formula="completion_format",
    ),
    "S5": dict(
        items=(
            _item(
                "s5a_has_valid_results",
                "A submission with a result for every case was made.",
                "e5_submit_record",
                "e5_submission",
            ),
            _item("s5b_format_valid", "Every submitted result matches the output contract.", "e5_submission"),
        ),
        evidence=_evidence(
            ("e5_submit_record", "a successful submit record"),
            ("e5_submission", "submission/manifest.json with one result per case"),
        ),
        formula="submission",
    ),
}
"""The built-in benchmark's contract; its grader computes exactly these items and evidence."""
