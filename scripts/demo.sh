#!/usr/bin/env bash
# The README's main command: set everything up and run the embedded default (local executor, the pretrained
# SmolLM2-135M-Instruct policy on CPU) with visible progress. Re-running resumes: finished phases are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/bat run --config "${BAT_CONFIG:-configs/local.yaml}" --state "${BAT_STATE:-state/local}" "$@"
