"""Finding records: what the scanner reports about one row (kind, where, what matched, which held-out source)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

FindingKind = Literal[
    "identifier",
    "path",
    "answer",
    "text_ngram",
    "near_duplicate",
    "eval_field",
    "forbidden_field",
    "credential",
    "machine_path",
]
FINDING_KINDS: tuple[str, ...] = get_args(FindingKind)

INDEX_KIND_TO_FINDING: dict[str, str] = {
    "identifier": "identifier",
    "path": "path",
    "answer": "answer",
    "text": "text_ngram",
    "field": "eval_field",
}
"""Finding kind reported for a match of an index entry of each kind."""


class Finding(BaseModel):
    """One leak inside a row: `location` is a JSON-path-like address (`prompt[1].content`, `seeds{key}`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FindingKind
    location: str
    matched: str
    """The matched text with a little context (credentials redacted)."""
    detail: str = ""
    """Rule label or similarity, e.g. `jaccard=0.62` or `github_token`."""
    source: str = ""
    """Source label of the held-out entry that matched (empty for index-free rules)."""


class RowFindings(BaseModel):
    """Findings of one flagged row, as stored in leakage.json."""

    model_config = ConfigDict(extra="forbid")

    row_id: str
    file: str
    line: int | None = None
    """1-based record number inside a JSONL file (blank lines are not counted); None for whole files."""
    findings: list[Finding]
    dropped: int = Field(0, ge=0)
    """Findings beyond `max_findings_per_row` (counted, not stored)."""
    max_similarity: float = 0.0
