"""Run the `route` phase of one round in this process (no scheduler).

Reads:  round_NN/evaluate/aggregate_controller.json, the previous round's decision.json and best.json, the bank's
        rl/index.json.
Writes: round_NN/route/{decision,best}.json, checkpoints/best.json, round_{NN+1}/plan.json (when the run goes on),
        round_NN/report.md and report.json; round_NN/route/DONE.json last (a DONE phase is a no-op, a partial one
        resumes). `bat phases` prints every phase's declared files.
Launch: python jobs/route.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("route"))
