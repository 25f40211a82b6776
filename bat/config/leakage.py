"""LeakageConfig: the leakage preflight (held-out fingerprint index + bank-version scanner)."""

from __future__ import annotations

from pydantic import Field, model_validator

from bat.config.base import Section
from bat.state.bank_layout import ADMITTED_NAME, LEAKAGE_REPORT_NAME, REJECTED_NAME

DEFAULT_EVAL_FIELDS = (
    "heldout_score",
    "heldout_scores",
    "heldout_instance_id",
    "heldout_run_id",
    "controller_score",
    "controller_scores",
    "final_score",
    "final_scores",
    "eval_run_id",
    "eval_split",
    "eval_transcript",
    "eval_trace",
    "grader_answer",
    "grader_verdict",
    "ground_truth",
    "gold_label",
    "reference_answer",
    "track_means",
    "half_width",
    "half_widths",
    "null_cells",
    "routable",
    "suite_version",
    "harness_version",
)
"""Names only evaluation records carry (`bat.schemas.evaluation`, held-out run ids/scores); generic names the
bank also uses (track, overall, stages, seed, split, breach) are deliberately absent."""

DEFAULT_RL_FORBIDDEN_FIELDS = (
    "target",
    "completion",
    "response",
    "responses",
    "turns",
    "transcript",
    "trajectory",
    "answer",
    "answers",
    "teacher_response",
    "assistant",
)


class LeakageConfig(Section):
    """Settings of the leakage preflight: what counts as a leak and how near-duplicates are measured."""

    enabled: bool = True
    """Run the scan. When false the scan phase admits the version unscanned and says so in leakage.json."""
    fail_on_reject: bool = True
    """A rejected version makes the scan phase fail (stops the launch); false only records the verdict."""
    index_path: str | None = None
    """Fingerprint index directory exported by the held-out side; None = `state/<run>/fingerprints`
    (built from `bat.benchmark` on first use)."""
    shingle_size: int = Field(2, ge=1, le=16)
    """Words per shingle for near-duplicate detection (Jaccard over word k-shingles)."""
    minhash_perms: int = Field(128, ge=16, le=1024)
    """MinHash permutations per signature (more = tighter Jaccard estimates, slower)."""
    minhash_seed: int = Field(1, ge=0)
    """Seed of the MinHash permutations; index and scanner must agree (recorded in the index)."""
    jaccard_threshold: float = Field(0.3, gt=0.0, le=1.0)
    """A text window whose shingle Jaccard with a held-out text window reaches this is a near-duplicate."""
    audit_floor: float = Field(0.1, gt=0.0, le=1.0)
    """LSH retrieval threshold: similarities at or above it are measured for the audit histogram."""
    window_words: int = Field(48, ge=8, le=4096)
    """Texts are compared in windows of this many words (stride half a window), held-out and bank alike."""
    min_text_words: int = Field(8, ge=2, le=4096)
    """Strings with fewer words are not checked for near-duplicates (exact matchers still apply)."""
    exact_ngram_words: int = Field(8, ge=0, le=64)
    """A verbatim run of this many words from a held-out text is a leak; 0 disables the check."""
    min_pattern_chars: int = Field(6, ge=1, le=64)
    """Identifiers/answers shorter than this are matched only as a whole string value, not as substrings."""
    eval_fields: tuple[str, ...] = DEFAULT_EVAL_FIELDS
    """Key names (and whole values) that only evaluation produces; the index adds its `field` entries."""
    rl_forbidden_fields: tuple[str, ...] = DEFAULT_RL_FORBIDDEN_FIELDS
    """Keys an RL row must not carry (assistant targets, transcripts, answers)."""
    rl_row_globs: tuple[str, ...] = ("rl/*.jsonl",)
    """Bank-relative globs of files whose lines are RL rows (checked for forbidden fields/roles)."""
    allowed_abs_path_prefixes: tuple[str, ...] = ("/workspace", "/dev/null", "/usr/bin/", "/bin/")
    """Absolute paths under these prefixes are not machine-specific (sandbox mount points, system tools)."""
    skip_files: tuple[str, ...] = (LEAKAGE_REPORT_NAME, ADMITTED_NAME, REJECTED_NAME)
    """Bank-relative file names the scanner does not read (its own outputs)."""
    max_findings_per_row: int = Field(20, ge=1, le=10_000)
    """Findings kept per row in the report (the count of the rest is recorded)."""
    max_report_rows: int = Field(2000, ge=1, le=1_000_000)
    """Flagged rows listed in leakage.json (all are counted; the rest are summarised by count)."""

    @model_validator(mode="after")
    def _check_thresholds(self) -> LeakageConfig:
        if self.audit_floor > self.jaccard_threshold:
            raise ValueError(
                f"leakage.audit_floor={self.audit_floor} must be <= leakage.jaccard_threshold={self.jaccard_threshold}"
            )
        if self.min_text_words < self.shingle_size:
            raise ValueError(
                f"leakage.min_text_words={self.min_text_words} must be >= leakage.shingle_size={self.shingle_size}"
            )
        if self.window_words < self.shingle_size:
            raise ValueError(
                f"leakage.window_words={self.window_words} must be >= leakage.shingle_size={self.shingle_size}"
            )
        return self
