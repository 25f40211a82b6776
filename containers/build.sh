#!/usr/bin/env bash
# Build the Apptainer image for bat phase jobs: containers/build.sh [OUTPUT.sif] (default containers/bat.sif).
# Needs `apptainer` (or `singularity`) and network access to the base image and package indexes; run it on a
# build/login node, then set orchestrate.container.enabled=true and orchestrate.container.image=<path>.
# BAT_ENGINE=vllm|sglang and BAT_ENGINE_VERSION pick the serving engine baked into its own venv (default vllm 0.32.0).
# NOTE: not run on the development machines (Apptainer is not installable there).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
OUT=${1:-containers/bat.sif}
APPTAINER=${APPTAINER:-$(command -v apptainer || command -v singularity || true)}
if [ -z "$APPTAINER" ]; then
  echo "build.sh: neither apptainer nor singularity is on PATH; install Apptainer (https://apptainer.org) first" >&2
  exit 2
fi
TMP_OUT="$OUT.tmp.$$"
trap 'rm -f "$TMP_OUT"' EXIT
"$APPTAINER" build --fakeroot --build-arg "engine=${BAT_ENGINE:-vllm}" --build-arg "engine_version=${BAT_ENGINE_VERSION:-0.32.0}" \
  "$TMP_OUT" containers/bat.def
mv -f "$TMP_OUT" "$OUT"   # atomic: a half-built image never replaces a good one
trap - EXIT
echo "built $OUT ($(du -h "$OUT" | cut -f1)); enable with --set orchestrate.container.enabled=true --set orchestrate.container.image=$OUT"
