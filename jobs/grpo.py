"""Run the `grpo` phase of one round in this process (no scheduler).

Reads:  round_NN/plan.json (start checkpoint, step batches), the finished rollout and verify shards.
Writes: checkpoints/round_NN/ (step checkpoints, resumed from), checkpoints/round_NN/export/ (the candidate) and
        round_NN/grpo/metrics.jsonl; round_NN/grpo/DONE.json last (a DONE phase is a no-op, a partial one resumes).
        `bat phases` prints every phase's declared files.
Launch: python jobs/grpo.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("grpo"))
