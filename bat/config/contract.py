"""The staged-benchmark contract as config: per stage, its binary rubric items (c), evidence requirements (G) and
the formula that turns item verdicts into a stage score (paper §2.1 Eqs. 1-2, §2.2.1 Eq. 4, App. A.1 Eqs. 7 and
14; CONTRACTS.md).

The defaults are the built-in benchmark's contract (item ids mirror AutoMedBench's sub-criteria). A user's own
staged benchmark (`benchmark.kind: external`) defines its own stages here; the built-in grader computes only the
items it knows, so with `benchmark.kind: builtin` the item and evidence ids must be built-in ones (texts may be
reworded and items dropped), and a stage's formula must find the items it reads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bat.config.base import Section

TRACK_PLACEHOLDER = "{track}"
"""An item id containing this is per track: `s1c_{track}_model` is `s1c_vqa_model` on the vqa track."""

StageFormula = Literal["mean", "pilot_ladder", "completion_format", "submission"]

FORMULA_ITEMS: dict[str, tuple[str, ...]] = {
    "mean": (),
    "pilot_ladder": ("s3a_pilot_before_batch", "s3b_output_checked"),
    "completion_format": ("s4b_format_valid",),
    "submission": ("s5a_has_valid_results", "s5b_format_valid"),
}
"""Items each stage formula reads (they must be among the stage's items):
* `mean`: the mean of the applicable items' verdicts (any items);
* `pilot_ladder`: 0 without a pilot, 0.5 with a pilot, 1 when its output was checked and any failure fixed;
* `completion_format`: 0.5 x completion rate + 0.5 x output format valid;
* `submission`: 0.5 x valid results + 0.5 x format valid."""


class EvidenceRequirement(Section):
    """One evidence requirement (g in G): what must be confirmed from execution records or artifacts."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Evidence id, unique within the contract (e.g. `e1_plan_artifact`)."""
    text: str = Field(min_length=1)
    """What the evidence is, as shown to the judge and written into Stage Bank rows."""


class RubricItemSpec(Section):
    """One binary rubric item (c_l) of a stage."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*(\{track\}[a-z0-9_]*)?$")
    """Item id, unique within the contract; may contain `{track}` once (a per-track item, e.g. `s1c_{track}_model`)."""
    text: str = Field(min_length=1)
    """The criterion, as shown to the judge and written into Stage Bank rows."""
    evidence: tuple[str, ...] = ()
    """Ids of the stage's evidence requirements this item is decided from."""
    judgment: bool = False
    """A judgment item: decided by the LLM judge when `verify.judge.enabled`, else by the grader's offline proxy."""
    proxy: str = ""
    """How the offline proxy decides a judgment item (documentation only)."""


class StageContract(Section):
    """The contract of one stage: its items, evidence and score formula."""

    items: tuple[RubricItemSpec, ...] = Field(min_length=1)
    """Binary rubric items; an item that does not apply to a run is absent from it (never 0)."""
    evidence: tuple[EvidenceRequirement, ...] = ()
    """Evidence requirements; eta (Eq. 4's evidence gate) is the fraction of them confirmed."""
    formula: StageFormula = "mean"
    """How item verdicts become the stage score (see `FORMULA_ITEMS`)."""

    @model_validator(mode="after")
    def _check(self) -> StageContract:
        evidence_ids = [e.id for e in self.evidence]
        item_ids = [i.id for i in self.items]
        for name, ids in (("items", item_ids), ("evidence", evidence_ids)):
            duplicates = sorted({i for i in ids if ids.count(i) > 1})
            if duplicates:
                raise ValueError(f"{name}: duplicate ids {duplicates}")
        for item in self.items:
            unknown = [e for e in item.evidence if e not in evidence_ids]
            if unknown:
                raise ValueError(f"item {item.id}: unknown evidence {unknown}; valid: {evidence_ids}")
        missing = [i for i in FORMULA_ITEMS[self.formula] if i not in item_ids]
        if missing:
            raise ValueError(f"formula {self.formula!r} reads items {missing}, which the stage does not have")
        return self


def _item(id: str, text: str, *evidence: str, proxy: str = "") -> RubricItemSpec:
    return RubricItemSpec(id=id, text=text, evidence=evidence, judgment=bool(proxy), proxy=proxy)


def _evidence(*pairs: tuple[str, str]) -> tuple[EvidenceRequirement, ...]:
    return tuple(EvidenceRequirement(id=i, text=t) for i, t in pairs)


BUILTIN_CONTRACT: dict[str, StageContract] = {
    "S1": StageContract(
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
    "S2": StageContract(
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
    "S3": StageContract(
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
    "S4": StageContract(
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
    "S5": StageContract(
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


def _builtin_contract() -> dict[str, StageContract]:
    return dict(BUILTIN_CONTRACT)


class ContractConfig(Section):
    """Rubric items, evidence requirements and stage formulas of every stage, keyed by stage key."""

    stages: dict[str, StageContract] = Field(default_factory=_builtin_contract)
    """Stage key -> its contract; every key of the top-level `stages` list needs one (defaults: the built-in S1-S5)."""

    def is_builtin(self) -> bool:
        """True when this is the built-in contract unchanged."""
        return self.stages == BUILTIN_CONTRACT

    def check_builtin(self) -> None:
        """Raise unless the built-in grader can compute every item and evidence id (lists the valid ones)."""
        for key, stage in self.stages.items():
            if key not in BUILTIN_CONTRACT:
                raise ValueError(
                    f"benchmark.contract.stages.{key}: the built-in grader has no stage {key}; "
                    f"valid: {list(BUILTIN_CONTRACT)} (use benchmark.kind: external for your own stages)"
                )
            builtin = BUILTIN_CONTRACT[key]
            valid_items = [i.id for i in builtin.items]
            unknown = [i.id for i in stage.items if i.id not in valid_items]
            if unknown:
                raise ValueError(
                    f"benchmark.contract.stages.{key}: items {unknown} are not computed by the built-in grader; "
                    f"valid: {valid_items}"
                )
            valid_evidence = [e.id for e in builtin.evidence]
            unknown = [e.id for e in stage.evidence if e.id not in valid_evidence]
            if unknown:
                raise ValueError(
                    f"benchmark.contract.stages.{key}: evidence {unknown} is not confirmed by the built-in grader; "
                    f"valid: {valid_evidence}"
                )
