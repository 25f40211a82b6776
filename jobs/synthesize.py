"""Run the `synthesize` phase of one round in this process (no scheduler).

Reads:  the config (bank, benchmark), the practice seed space and the base tokenizer; in a bank refresh the newest
        controller aggregate before it (steering, skill writer).
Writes: bank/vNNNN/: tasks, trajectories, sft/{train,validation}.jsonl, rl/rows.jsonl + rl/index.json, states/,
        skills.json (when a stage's skill text is rewritten), MANIFEST.json; round_NN/synthesize/DONE.json last (a
        DONE phase is a no-op, a partial one resumes). `bat phases` prints every phase's declared files.
Launch: python jobs/synthesize.py --config configs/local.yaml --state state/local --round R [--set k=v]
        (normally queued for you by `sbatch run_round.sh` / `bat run`; use this to debug one phase,
        or under `srun` for a hand-made allocation).
"""

import sys

from bat.orchestrate.entry import phase_main

if __name__ == "__main__":
    sys.exit(phase_main("synthesize"))
