"""Run the `scan` phase of one round in this process (no scheduler).

Reads:  bank/vNNNN/ and the held-out fingerprint index (fingerprints/INDEX.json, fingerprints/entries.jsonl).
Writes: bank/vNNNN/leakage.json and bank/vNNNN/ADMITTED (admitted) or bank/vNNNN/REJECTED.json (rejected);
        round_NN/scan/DONE.json last (a DONE phase is a no-op, a partial one resumes). `bat phases` prints every
        phase's declared files.
Launch: python jobs/scan.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("scan"))
