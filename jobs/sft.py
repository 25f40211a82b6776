"""Run the `sft` phase of one round in this process (no scheduler).

Reads:  and writes what its `PhaseSpec` declares (`bat phases` prints every phase's files).
Writes: DONE.json last (a DONE phase is a no-op, a partial one resumes).
Launch: python jobs/sft.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("sft"))
