#!/usr/bin/env bash
# The README's main command: set everything up and run the embedded default (local executor, the pretrained
# SmolLM2-135M-Instruct policy on CPU) with visible progress. Re-running resumes: finished phases are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
# the demo's engine is `hf`: the vLLM environment (~3.4 GB, a few minutes) is set up by `make test` or on request
BAT_SKIP_VLLM=${BAT_SKIP_VLLM:-1} scripts/bootstrap.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/bat run --config "${BAT_CONFIG:-configs/local.yaml}" --state "${BAT_STATE:-state/local}" "$@"
