#!/usr/bin/env bash
#SBATCH --job-name=bat-driver
#SBATCH --time=00:15:00
#SBATCH --cpus-per-task=1
#SBATCH --mem=1G
#SBATCH --output=bat-driver-%j.out
# The BaT round as a script. `sbatch run_round.sh` queues the next unfinished round as one submitit
# job per phase (afterok chain; the route job queues round r+1); `./run_round.sh` on a laptop runs
# the rounds here (config `orchestrate.executor: local`, or BAT_EXECUTOR=local). Resubmitting is always safe: DONE phases are skipped, queued ones
# are not queued twice, and a lease stops two drivers from queueing the same round.
# The #SBATCH lines above are defaults; the driver's resources in the config (`orchestrate.resources.driver`)
# come as sbatch flags, which override them:
#   export BAT_CONFIG=configs/cluster/qwen9b_8xgpu.yaml BAT_STATE=state/qwen9b
#   sbatch $(.venv/bin/bat config sbatch "$BAT_CONFIG") run_round.sh [--set k=v ...]
#   ./run_round.sh                      # configs/local.yaml into state/local; `bat status --state state/local`
# This driver runs on the host with the checkout's venv; with `orchestrate.container.enabled` the phases run in the
# image (config paths bound, their Slurm commands relayed to the host side: docs/cluster.md).
set -euo pipefail
# under sbatch this script runs from a spool copy: find the checkout via BAT_HOME or the submit dir
REPO=${BAT_HOME:-${SLURM_SUBMIT_DIR:-$(dirname "$(readlink -f "$0")")}}
[ -f "$REPO/jobs/launch.py" ] || { echo "run_round.sh: $REPO is not a bat checkout; sbatch from the repo root or set BAT_HOME" >&2; exit 2; }
cd "$REPO"
CONFIG=${BAT_CONFIG:-configs/local.yaml}
STATE=${BAT_STATE:-state/local}
PY=${BAT_PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
EXTRA=()   # the executor comes from the config (slurm/local/auto); BAT_EXECUTOR overrides it
if [ -n "${BAT_EXECUTOR:-}" ]; then EXTRA=(--set "orchestrate.executor=$BAT_EXECUTOR"); fi

PHASES=(
  synthesize  # round 0 (+ async refresh): teacher runs practice tasks -> bank/vNNNN SFT/RL rows, stage states
  scan        # round 0 (+ async refresh): leakage preflight vs held-out fingerprints -> ADMITTED or rejected
  sft         # round 0: cold-start SFT on admitted rows -> checkpoints/sft
  rollout     # round r>=1: K continuations per Stage Bank state of plan.json -> round_NN/rollout shards
  verify      # round r>=1: rubric items x evidence -> reward shards (eta * mean verdict)
  grpo        # round r>=1: group-normalised advantages, clipped ratio + KL -> candidate checkpoint
  evaluate    # every round: fixed held-out suite -> stage scores, Task, Agentic, Overall (aggregates only)
  route       # every round: gate/fallback, next target stage -> plan for round r+1 (queues it on Slurm)
  final_test  # after the last round: retained best on the untouched final + test splits, once per run
)

exec "$PY" jobs/launch.py --config "$CONFIG" --state "$STATE" --phases "${PHASES[*]}" ${EXTRA[@]+"${EXTRA[@]}"} "$@"
