"""Files of an online GRPO block (`grpo.rollouts: online`): one folder per step with that step's rollouts and
rewards, so a training curve can be audited and a resumed block reuses what an interrupted one finished.

```
<root>/steps/step_00007/draw_0/rollout/shard_0000/...  the step's fresh rollouts (`bat.rollout.shards`)
<root>/steps/step_00007/draw_0/verify/shard_0000/...   their rewards (`bat.verify.shards`)
<root>/steps/step_00007/draw_1/...                     replacement groups of DAPO-style dynamic sampling
<root>/exports/step_00010/                             HF export after step 10 (`grpo.export_steps`)
<root>/weights/                                        the current weights, for an engine that cannot share them
```
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class OnlineLayout:
    """Paths under an online block's `root` (the grpo phase dir, or a learning check's folder)."""

    root: Path

    def step(self, step: int) -> Path:
        """The folder of 0-based step `step`."""
        return self.root / "steps" / f"step_{step:05d}"

    def draw(self, step: int, attempt: int = 0) -> Path:
        """A step's batch (`attempt` 0) or its `attempt`-th dynamic-sampling draw."""
        return self.step(step) / f"draw_{attempt}"

    def rollout(self, step: int, attempt: int = 0) -> Path:
        """The rollout phase dir of a draw (its shards)."""
        return self.draw(step, attempt) / "rollout"

    def rewards(self, step: int, attempt: int = 0) -> Path:
        """The reward shard dir of a draw."""
        return self.draw(step, attempt) / "verify" / "shard_0000"

    @property
    def scratch_root(self) -> Path:
        """Where rollouts and verification work while a step runs (removed when the block ends)."""
        return self.root / "scratch"

    def scratch(self, step: int) -> Path:
        """Workspaces of a step's rollouts while they run (removed after the step's shards are written)."""
        return self.scratch_root / f"step_{step:05d}"

    def export(self, step: int) -> Path:
        """The HF export of the weights after `step` (1-based) steps (`grpo.export_steps`)."""
        return self.root / "exports" / f"step_{step:05d}"

    @property
    def weights(self) -> Path:
        """The current weights exported for an engine that loads them from a folder."""
        return self.root / "weights"

    def steps_done(self) -> list[Path]:
        """Step folders present, in order."""
        return sorted((self.root / "steps").glob("step_*"))
