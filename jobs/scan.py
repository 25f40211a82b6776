"""Run the `scan` phase of one round in this process (no scheduler): `run(ctx)` of the phase table.

Reads:  the newest bank version, the held-out fingerprint index.
Writes: bank/vNNNN/leakage.json and ADMITTED (or a rejection), round_NN/scan/; DONE.json last (a DONE phase is a no-op, a partial one resumes).
Launch: python jobs/scan.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("scan"))
