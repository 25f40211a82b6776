"""Run the `rollout` phase of one round in this process (no scheduler).

Reads:  round_NN/plan.json, the bank's rl/rows.jsonl and states/, the plan's start checkpoint.
Writes: round_NN/rollout/shard_NNNN/{rollouts,timings}.jsonl, each shard's DONE.json last; round_NN/rollout/DONE.json
        last (a DONE phase is a no-op, a partial one resumes). `bat phases` prints every phase's declared files.
Launch: python jobs/rollout.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("rollout"))
