"""Run the `sft` phase of one round in this process (no scheduler).

Reads:  the admitted bank's sft/train.jsonl and sft/validation.jsonl and the base model.
Writes: checkpoints/sft/ (step checkpoints, resumed from), checkpoints/sft/export/ and round_00/sft/metrics.jsonl;
        round_NN/sft/DONE.json last (a DONE phase is a no-op, a partial one resumes). `bat phases` prints every
        phase's declared files.
Launch: python jobs/sft.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("sft"))
