"""Queue the next unfinished round(s): what `run_round.sh` calls (and the twin of `bat run`).

Reads:  state/<run>/ DONE.json markers, job records, the round lease; the config.
Writes: run.json, jobs/round_NN/<phase>.job.json, leases/, events.log; submits one submitit job per
        unfinished phase (Slurm: an afterok chain, the route job queues round r+1; local: runs them in order).
Launch: python jobs/launch.py --config configs/local.yaml --state state/local [--rounds N] [--wait] [--set k=v]
Exit:   0 queued/finished (or another driver holds the round), 1 a phase failed, 2 bad config (nothing queued).
"""

import sys

from bat.orchestrate.entry import launch_main

if __name__ == "__main__":
    sys.exit(launch_main())
