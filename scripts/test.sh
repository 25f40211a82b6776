#!/usr/bin/env bash
# The README's test command: set everything up (venv, Debian packages, a real local Slurm cluster) and run
# the whole suite. Extra arguments go to pytest. "No tests collected" is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/slurm_up.sh
# the vLLM tests run (not skip) wherever bootstrap installed vLLM's environment
[ -f "${BAT_VLLM_VENV:-.venv-vllm}/.bat-installed" ] && export BAT_REQUIRE_VLLM=1
export BAT_REQUIRE_SLURM=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# formatting and lint (rules and the reasons for each ignored one: pyproject.toml [tool.ruff])
.venv/bin/ruff format --check --quiet . || { echo "[test] ruff format: files need formatting (run .venv/bin/ruff format .)" >&2; exit 1; }
.venv/bin/ruff check --quiet . || { echo "[test] ruff check: lint errors above" >&2; exit 1; }
set +e
.venv/bin/pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "[test] no tests were collected: failing" >&2; exit 1; fi
exit "$rc"
