"""Run the `verify` phase of one round in this process (no scheduler).

Reads:  round_NN/plan.json, the finished rollout shards and the bank's states/.
Writes: round_NN/verify/shard_NNNN/rewards.jsonl, each shard's DONE.json last; round_NN/verify/DONE.json last (a DONE
        phase is a no-op, a partial one resumes). `bat phases` prints every phase's declared files.
Launch: python jobs/verify.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("verify"))
