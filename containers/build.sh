#!/usr/bin/env bash
# Build the Apptainer image for bat phase jobs: containers/build.sh [OUTPUT.sif] (default containers/bat.sif).
# Needs `apptainer` (or `singularity`) and network access to the base image and package indexes; run it on a
# build/login node, then set orchestrate.container.enabled=true and orchestrate.container.image=<path>.
# BAT_ENGINE=vllm|sglang picks the serving engine baked into its own venv (default vllm); its version, torch and
# transformers are pinned per engine in bat.def. Check every pin first: python scripts/check_pins.py
# NOTE: not run on the development machines (Apptainer is not installable there).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
OUT=${1:-containers/bat.sif}
APPTAINER=${APPTAINER:-$(command -v apptainer || command -v singularity || true)}
case "${BAT_ENGINE:-vllm}" in vllm|sglang) ;; *) echo "build.sh: BAT_ENGINE=$BAT_ENGINE; valid: vllm, sglang" >&2; exit 2 ;; esac
if [ -n "${BAT_ENGINE_VERSION:-}" ]; then
  echo "build.sh: BAT_ENGINE_VERSION is gone: each engine's version is pinned with its torch and transformers in bat.def" >&2
  exit 2
fi
if [ -z "$APPTAINER" ]; then
  echo "build.sh: neither apptainer nor singularity is on PATH; install Apptainer (https://apptainer.org) first" >&2
  exit 2
fi
TMP_OUT="$OUT.tmp.$$"
trap 'rm -f "$TMP_OUT"' EXIT
"$APPTAINER" build --fakeroot --build-arg "engine=${BAT_ENGINE:-vllm}" \
  "$TMP_OUT" containers/bat.def
mv -f "$TMP_OUT" "$OUT"   # atomic: a half-built image never replaces a good one
trap - EXIT
echo "built $OUT ($(du -h "$OUT" | cut -f1)); enable with --set orchestrate.container.enabled=true --set orchestrate.container.image=$OUT"
