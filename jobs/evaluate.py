"""Run the `evaluate` phase of one round in this process (no scheduler).

Reads:  the round's candidate (checkpoints/round_NN/export/, or the SFT export in round 0), heldout/SECRET and the
        held-out controller suite.
Writes: round_NN/evaluate/aggregate_controller.json (+ the base model's in round 0, the final split's when
        evaluate.final_eval says so) and heldout/round_NN/controller/; round_NN/evaluate/DONE.json last (a DONE phase
        is a no-op, a partial one resumes). `bat phases` prints every phase's declared files.
Launch: python jobs/evaluate.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("evaluate"))
