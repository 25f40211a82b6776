"""The CPU numerics fingerprint: stable for one setting, and the pins reach a fresh process's kernels."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bat.perf.machine import cpu_facts
from bat.perf.numerics import fingerprint


def test_the_fingerprint_is_stable_and_depends_on_the_inputs():
    assert fingerprint() == fingerprint() and len(fingerprint()) == 16
    assert fingerprint(seed=1) != fingerprint()


@pytest.mark.skipif("avx2" not in cpu_facts()["flags"], reason="the pin selects AVX2 kernels")
def test_the_pin_selects_the_avx2_kernels_in_a_new_process():
    env = {**os.environ, "MKL_CBWR": "AVX2,STRICT", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run(
        [sys.executable, "-m", "bat.perf.numerics"], env=env, capture_output=True, text=True, check=True, timeout=300
    ).stdout
    first, second = out.splitlines()
    assert first.startswith("capability AVX2,") and "MKL_CBWR=AVX2,STRICT" in first
    assert second.startswith("fingerprint ") and len(second.split()[1]) == 16
