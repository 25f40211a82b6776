"""`BankVersionLayout`: the files of one immutable bank version `bank/vNNNN/`, and the one admission rule.

```
bank/vNNNN/
  MANIFEST.json                 written last by synthesis: a version is complete when it exists
  tasks.jsonl trajectories.jsonl
  sft/train.jsonl sft/validation.jsonl sft/rejected.json
  rl/rows.jsonl rl/index.json   RL rows (S-target, S-mix, E2E) and their counts
  e2e_acceptance.json           the acceptance decision of every E2E candidate
  skills.json                   the stage skill texts of the version's rows (only when they are not all static)
  states/<state_id>/            executable stage-state packages
  leakage.json                  the leakage scan's report
  ADMITTED | REJECTED.json      the scan's verdict marker (ADMITTED written last, only when clean)
```
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MANIFEST_NAME = "MANIFEST.json"
LEAKAGE_REPORT_NAME = "leakage.json"
ADMITTED_NAME = "ADMITTED"
REJECTED_NAME = "REJECTED.json"
SFT_SPLIT_FILES = {"train": "sft/train.jsonl", "validation": "sft/validation.jsonl"}
RL_ROWS_FILE = "rl/rows.jsonl"
RL_INDEX_FILE = "rl/index.json"
SKILLS_FILE = "skills.json"
PRIOR_RECORDS_NAME = "prior_records.jsonl"
"""A stage-state package's replayed prefix: the execution records that produced its workspace."""
TASK_WRITER_PROGRESS_NAME = ".written.json"
"""The LLM task writer's accepted proposals so far, inside a bank build folder (resume)."""
SCAN_OUTPUTS = frozenset({LEAKAGE_REPORT_NAME, ADMITTED_NAME, REJECTED_NAME})
"""Files the leakage scan adds to a finished version (not part of its manifest's digests, not scanned)."""


@dataclass(frozen=True)
class BankVersionLayout:
    """Paths inside one bank version directory (`path` is `bank/vNNNN`)."""

    path: Path

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST_NAME

    @property
    def tasks(self) -> Path:
        return self.path / "tasks.jsonl"

    @property
    def trajectories(self) -> Path:
        return self.path / "trajectories.jsonl"

    def sft_split(self, split: str) -> Path:
        """`sft/<split>.jsonl` for `train` or `validation`."""
        if split not in SFT_SPLIT_FILES:
            raise ValueError(f"unknown SFT split {split!r}; valid splits: {sorted(SFT_SPLIT_FILES)}")
        return self.path / SFT_SPLIT_FILES[split]

    @property
    def sft_rejected(self) -> Path:
        return self.path / "sft" / "rejected.json"

    @property
    def rl_rows(self) -> Path:
        return self.path / RL_ROWS_FILE

    @property
    def rl_index(self) -> Path:
        return self.path / RL_INDEX_FILE

    @property
    def e2e_acceptance(self) -> Path:
        """The acceptance decision (Eq. 15) of every E2E candidate synthesis tried."""
        return self.path / "e2e_acceptance.json"

    @property
    def skills(self) -> Path:
        """The stage skill texts (kappa) this version's rows carry, with where each came from (LLM or static);
        written only when some stage's text is not the static one."""
        return self.path / SKILLS_FILE

    @property
    def states_dir(self) -> Path:
        return self.path / "states"

    def state(self, state_id: str) -> Path:
        """The executable package of stage state `state_id`."""
        return self.states_dir / state_id

    @property
    def leakage_report(self) -> Path:
        return self.path / LEAKAGE_REPORT_NAME

    @property
    def admitted_marker(self) -> Path:
        return self.path / ADMITTED_NAME

    @property
    def rejected_marker(self) -> Path:
        return self.path / REJECTED_NAME

    def is_complete(self) -> bool:
        """True when synthesis finished the version (its MANIFEST.json exists)."""
        return self.manifest.is_file()

    def is_admitted(self) -> bool:
        """The one admission rule: the version carries the scan's ADMITTED marker. The scan writes it after
        `leakage.json` and only for a clean verdict, and removes it before recording a rejection, so the marker
        alone says what the newest scan decided."""
        return self.admitted_marker.exists()
