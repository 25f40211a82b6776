"""Files of the held-out stage probe (`bat evaluate probe`): its states and raw rollouts live on the held-out side,
only its per-stage aggregates beside the run's other aggregates.

```
heldout/stage_probe/MANIFEST.json                  build record (digest, secret fingerprint, knobs, counts), written last
heldout/stage_probe/trajectories.jsonl             the expert's trajectory on every probe instance
heldout/stage_probe/states.jsonl                   one record per probe state (`bat.schemas.stage_probe.ProbeState`)
heldout/stage_probe/states/<state_id>/             state packages (files/, package.json, prior_records.jsonl)
heldout/stage_probe/scores/<label>/request.json    what the scoring under <label> was started for
heldout/stage_probe/scores/<label>/rollout/        the raw rollouts of one scored checkpoint (`bat.rollout.shards`)
heldout/stage_probe/scores/<label>/verify/shard_0000/   their rewards (`bat.verify.shards`)
stage_probe/<label>.json                           the aggregate of one scored checkpoint (`StageProbeScore`)
```
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bat.state.bank_layout import PRIOR_RECORDS_NAME


@dataclass(frozen=True)
class StageProbeLayout:
    """Paths of the probe under the held-out side (`root` = `heldout/stage_probe`) and of its aggregates
    (`scores_root` = `stage_probe/` of the run, aggregate numbers only)."""

    root: Path
    scores_root: Path

    @property
    def manifest(self) -> Path:
        """The build record; the probe exists once it does (written last)."""
        return self.root / "MANIFEST.json"

    @property
    def trajectories(self) -> Path:
        return self.root / "trajectories.jsonl"

    @property
    def states(self) -> Path:
        return self.root / "states.jsonl"

    @property
    def states_dir(self) -> Path:
        return self.root / "states"

    def state(self, state_id: str) -> Path:
        """The state package of `state_id`."""
        return self.states_dir / state_id

    def prior_records(self, state_id: str) -> Path:
        """The replayed prefix's execution records beside a state package."""
        return self.state(state_id) / PRIOR_RECORDS_NAME

    @property
    def build_scratch(self) -> Path:
        """Teacher and replay workspaces while the probe is built (removed afterwards)."""
        return self.root / "scratch"

    def scored(self, label: str) -> Path:
        """Held-out folder of one scored checkpoint."""
        return self.root / "scores" / label

    def request(self, label: str) -> Path:
        """What one scoring was started for (checkpoint digest, K, temperature): a resumed scoring must match it."""
        return self.scored(label) / "request.json"

    def rollouts(self, label: str) -> Path:
        """The rollout phase dir of one scoring (its shards)."""
        return self.scored(label) / "rollout"

    def rewards(self, label: str) -> Path:
        """The reward shard of one scoring."""
        return self.scored(label) / "verify" / "shard_0000"

    def scratch(self, label: str) -> Path:
        """Workspaces and grader sides while one scoring runs (removed afterwards)."""
        return self.scored(label) / "scratch"

    def score(self, label: str) -> Path:
        """The aggregate of one scoring (`stage_probe/<label>.json`, outside the held-out side)."""
        return self.scores_root / f"{label}.json"

    def labels(self) -> list[str]:
        """Labels with a finished aggregate, in name order."""
        return sorted(p.stem for p in self.scores_root.glob("*.json"))
