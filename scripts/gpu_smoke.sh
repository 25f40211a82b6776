#!/usr/bin/env bash
# The GPU smoke round: ONE short Slurm job on one GPU, before the first real round. Inside it:
#   1. `bat doctor` on the compute node (GPU and its memory, the driver against torch's CUDA, Apptainer and the image,
#      user namespaces, scratch), printed but not fatal;
#   2. every phase of rounds 0 and 1 of configs/smoke.yaml (the tiny model: bank, scan, SFT, rollout, verify, GRPO,
#      evaluation, route with its KL check) on that GPU with the local executor: DeepSpeed on NCCL, the policy and the
#      rollout engine on CUDA; in the image when --image is given (as the real phases run), else in the checkout's
#      .venv (scripts/setup_cluster.sh without --driver-only).
# It exits with the round's exit code (`sbatch --wait`); the job's log names each phase's result.
#
#   scripts/gpu_smoke.sh --partition gpu [--account A] [--image /shared/images/bat.sif] [--engine hf|vllm|sglang]
#                        [--config my.yaml] [--time MIN] [--mem GB] [--state DIR] [--cpu] [--print]
#   --config  the config `bat doctor` checks (default: configs/cluster/qwen9b_8xgpu.yaml)
#   --cpu     no GPU: the same job on the CPU (checks the plumbing where no GPU is lent)
#   --print   print the job script instead of submitting it
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
REPO=$PWD
PARTITION="" ACCOUNT="" IMAGE="" ENGINE=hf CONFIG=configs/cluster/qwen9b_8xgpu.yaml TIME=30 MEM=32 CPU=0 PRINT=0
STATE=$REPO/state/gpu_smoke.$(date +%Y%m%d-%H%M%S)
PY=${BAT_PYTHON:-$REPO/.venv/bin/python}   # the checkout's venv (scripts/setup_cluster.sh)
while [ $# -gt 0 ]; do
  case "$1" in
    --partition) PARTITION=$2; shift ;;
    --account) ACCOUNT=$2; shift ;;
    --image) IMAGE=$(readlink -m "$2"); shift ;;
    --engine) ENGINE=$2; shift ;;
    --config) CONFIG=$2; shift ;;
    --time) TIME=$2; shift ;;
    --mem) MEM=$2; shift ;;
    --state) STATE=$(readlink -m "$2"); shift ;;
    --cpu) CPU=1 ;;
    --print) PRINT=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "gpu_smoke.sh: unknown option $1; valid: --partition --account --image --engine --config --time --mem --state --cpu --print" >&2; exit 2 ;;
  esac
  shift
done
case "$ENGINE" in hf|vllm|sglang) ;; *) echo "gpu_smoke.sh: --engine $ENGINE; valid: hf, vllm, sglang" >&2; exit 2 ;; esac
[ -f "$CONFIG" ] || { echo "gpu_smoke.sh: --config $CONFIG does not exist" >&2; exit 2; }

SETS=(--set orchestrate.executor=local --set "rollout.engine=$ENGINE")
GPU_FLAGS=(--gpus-per-node=1)
if [ "$CPU" = 1 ]; then
  GPU_FLAGS=()
else
  SETS+=(--set rollout.device=cuda --set sft.deepspeed.backend=nccl --set grpo.deepspeed.backend=nccl)
  [ "$ENGINE" = hf ] || SETS+=(--set "rollout.$ENGINE.tensor_parallel_size=1" --set "rollout.$ENGINE.data_parallel_size=1")
fi
if [ -n "$IMAGE" ]; then
  # as the phases run in the image: contained, the checkout's configs and the state bound, node-local scratch on /tmp
  RUN=(apptainer exec --nv --containall --bind "@SCRATCH@:/tmp" --bind "$STATE:$STATE" --bind "$REPO:$REPO"
       --pwd "$REPO" --env HF_HUB_OFFLINE=1 "$IMAGE" python -m bat.cli.main)
else
  RUN=("$PY" -m bat.cli.main)
fi
quote() { printf '%q ' "$@"; }
job=$(cat <<EOF
#!/usr/bin/env bash
#SBATCH --job-name=bat-gpu-smoke
#SBATCH --time=$TIME
#SBATCH --cpus-per-task=4
#SBATCH --mem=${MEM}G
#SBATCH --output=$STATE/gpu_smoke-%j.out
set -uo pipefail
cd $(printf '%q' "$REPO")
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
SCRATCH=\${SLURM_TMPDIR:-/tmp}
echo "== bat doctor on \$(hostname) (job \$SLURM_JOB_ID)"
$(quote "$PY" -m bat.cli.main doctor --config "$CONFIG" --state "$STATE") || echo "(doctor found problems: see above)"
command -v nvidia-smi >/dev/null && nvidia-smi
echo "== smoke round: configs/smoke.yaml, engine $ENGINE$([ "$CPU" = 1 ] && echo ', CPU only')"
$(quote "${RUN[@]}" run --config configs/smoke.yaml --state "$STATE/run" "${SETS[@]}" | sed 's/@SCRATCH@/"$SCRATCH"/')
code=\$?
$(quote "$PY" -m bat.cli.main status --state "$STATE/run")
echo "== smoke round exit code \$code"
exit \$code
EOF
)
if [ "$PRINT" = 1 ]; then echo "$job"; exit 0; fi
[ -z "$IMAGE" ] || [ -f "$IMAGE" ] || { echo "gpu_smoke.sh: --image $IMAGE does not exist" >&2; exit 2; }
[ -n "$IMAGE" ] || [ -x "$PY" ] || { echo "gpu_smoke.sh: no $PY; run scripts/setup_cluster.sh or set BAT_PYTHON" >&2; exit 2; }
mkdir -p "$STATE"
printf '%s\n' "$job" > "$STATE/gpu_smoke.sbatch"
FLAGS=(--wait --parsable ${GPU_FLAGS[@]+"${GPU_FLAGS[@]}"})
[ -n "$PARTITION" ] && FLAGS+=(--partition "$PARTITION")
[ -n "$ACCOUNT" ] && FLAGS+=(--account "$ACCOUNT")
echo "gpu_smoke.sh: submitting $STATE/gpu_smoke.sbatch (log: $STATE/gpu_smoke-<job>.out); waiting for it"
set +e
sbatch "${FLAGS[@]}" "$STATE/gpu_smoke.sbatch"
code=$?
set -e
tail -n 25 "$STATE"/gpu_smoke-*.out 2>/dev/null || true
echo "gpu_smoke.sh: job exit $code; state in $STATE"
exit $code
