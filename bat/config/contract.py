"""The staged-benchmark contract as config: per stage, its binary rubric items (c), evidence requirements (G) and
the formula that turns item verdicts into a stage score (paper §2.1 Eqs. 1-2, §2.2.1 Eq. 4, App. A.1 Eqs. 7 and
14; CONTRACTS.md).

The defaults are the built-in benchmark's contract, declared by that plug-in (`bat.benchmarks.builtin_spec`; item ids
mirror AutoMedBench's sub-criteria). A user's own
staged benchmark (`benchmark.kind: external`) defines its own stages here; the built-in grader computes only the
items it knows, so with `benchmark.kind: builtin` the item and evidence ids must be built-in ones (texts may be
reworded and items dropped), and a stage's formula must find the items it reads.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from bat.config.base import Section
from bat.config.stages import builtin_declared

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


def builtin_contract() -> dict[str, StageContract]:
    """The built-in benchmark's contract (stage key -> `StageContract`), a fresh dict."""
    return {key: StageContract.model_validate(c) for key, c in builtin_declared().CONTRACT.items()}


def __getattr__(name: str) -> Any:
    """`BUILTIN_CONTRACT`: the built-in benchmark's contract, read from the plug-in on first use."""
    if name == "BUILTIN_CONTRACT":
        return builtin_contract()
    raise AttributeError(f"module 'bat.config.contract' has no attribute {name!r}")


class ContractConfig(Section):
    """Rubric items, evidence requirements and stage formulas of every stage, keyed by stage key."""

    stages: dict[str, StageContract] = Field(default_factory=builtin_contract)
    """Stage key -> its contract; every key of the top-level `stages` list needs one (default: the built-in benchmark's)."""

    def is_builtin(self) -> bool:
        """True when this is the built-in contract unchanged."""
        return self.stages == builtin_contract()

    def check_builtin(self) -> None:
        """Raise unless the built-in grader can compute every item and evidence id (lists the valid ones)."""
        builtin_stages = builtin_contract()
        for key, stage in self.stages.items():
            if key not in builtin_stages:
                raise ValueError(
                    f"benchmark.contract.stages.{key}: the built-in grader has no stage {key}; "
                    f"valid: {list(builtin_stages)} (use benchmark.kind: external for your own stages)"
                )
            builtin = builtin_stages[key]
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
