"""Paths of an arm-versus-twin study's folder (`twin_dir` of an experiment file, e.g. docs/results/rl_teaches/):
its committed units and the analysis' outputs.

```
<study>/units/<arm>/seed_<s>_train.json       an arm x seed's training curve and probe scores (`TwinPiece`)
<study>/units/<arm>/seed_<s>_e2e.json         its final checkpoint's held-out E2E runs
<study>/units/<reference>/seed_<b>_reference.json   the SFT's probe at step 0 and its held-out E2E runs
<study>/units/<arm>/seed_<s>_<part>_partial.json    an unfinished e2e or reference unit's runs played so far
<study>/results.json                          the pre-registered criteria (`TwinResults`)
<study>/curves.png                            training reward and held-out probe against step
```

Also the name of a probe score at a training step (`bat evaluate probe --label step_<N>`), which the study's
collection reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

UNITS_DIR_NAME = "units"
"""Folder of the committed units under the study folder."""
PROBE_LABEL_PREFIX = "step_"
"""A probe score at training step N is labelled `step_<N>` (`stage_probe/step_<N>.json` of the run)."""
_PIECE = re.compile(r"^seed_(\d+)_(train|e2e|reference)\.json$")


def probe_label(step: int) -> str:
    """`step_<step>`: the label of the held-out probe score of the checkpoint after `step` GRPO steps."""
    return f"{PROBE_LABEL_PREFIX}{step}"


@dataclass(frozen=True)
class TwinStudyLayout:
    """The study folder `root`."""

    root: Path

    @property
    def units_dir(self) -> Path:
        return Path(self.root) / UNITS_DIR_NAME

    def piece(self, arm: str, seed: int, part: str) -> Path:
        """`units/<arm>/seed_<seed>_<part>.json` (`part`: train, e2e or reference)."""
        return self.units_dir / arm / f"seed_{seed}_{part}.json"

    def partial_runs(self, arm: str, seed: int, part: str) -> Path:
        """`units/<arm>/seed_<seed>_<part>_partial.json`: the held-out runs an unfinished `e2e` or `reference` unit
        played so far (`TwinPartialRuns`), from which its evaluation resumes on another disk."""
        return self.units_dir / arm / f"seed_{seed}_{part}_partial.json"

    def adapter(self, arm: str, seed: int) -> Path:
        """`units/<arm>/seed_<seed>_adapter/`: the LoRA adapter of a `train` unit's final candidate."""
        return self.units_dir / arm / f"seed_{seed}_adapter"

    def pieces(self) -> list[Path]:
        """Every committed piece `units/<arm>/seed_<s>_<part>.json`, sorted (other files left out)."""
        if not self.units_dir.is_dir():
            return []
        return sorted(p for p in self.units_dir.glob("*/seed_*.json") if _PIECE.match(p.name))

    @property
    def results(self) -> Path:
        return Path(self.root) / "results.json"

    @property
    def curves(self) -> Path:
        return Path(self.root) / "curves.png"
