"""Make MKL's conditional numerical reproducibility (`MKL_CBWR`) hold on x86 CPUs of any vendor.

MKL reads `MKL_CBWR=AVX2,STRICT` (a pinned code branch: the same results on every CPU with AVX2) only where its
vendor check reports an Intel CPU; elsewhere (AMD EPYC, measured) it ignores the branch and runs its generic path,
so a checkpoint built under the pin on an AMD machine differs in its last bits from one built on an Intel machine.
The vendor check is MKL's own exported function `mkl_serv_intel_cpu_true` (in torch's `libtorch_cpu.so`, which links
MKL); a two-function shared library loaded first (`LD_PRELOAD`) answers it with "Intel", and MKL then runs the
pinned branch's kernels on the AMD CPU as it does on an Intel one (`python -m bat.perf.numerics` prints the same
fingerprint). On an Intel CPU the answer is what MKL found anyway, so the shim changes nothing there.

`shim_path()` is where the library is built (inside the Python environment, beside its packages); `ensure_shim()`
compiles it with the C compiler (`cc`, or `$CC`) when it is missing and returns its path, or None with the reason
when no compiler is at hand. `python -m bat.orchestrate.mkl_vendor` builds it and prints the path (scripts/bootstrap.sh
runs it). Reads and writes only that library and its C source beside it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SHIM_SOURCE = """\
/* MKL's vendor check, answered "Intel" so that MKL_CBWR's pinned branch applies on every x86 vendor. */
int mkl_serv_intel_cpu_true(void) { return 1; }
int mkl_serv_intel_cpu(void) { return 1; }
"""
"""The library's whole source: the two MKL service functions that report whether the CPU is an Intel one."""

UNPINNED_BRANCHES = ("AUTO", "COMPATIBLE", "OFF")
"""`MKL_CBWR` values that pin no instruction-set branch (COMPATIBLE is vendor-neutral by itself)."""


def shim_path() -> Path:
    """Where the shim library lives: `<sys.prefix>/lib/bat-native/libmkl_any_vendor.so`."""
    return Path(sys.prefix) / "lib" / "bat-native" / "libmkl_any_vendor.so"


BRANCH_OVERRIDES = ("MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE")
"""Variables that move MKL off a pinned `MKL_CBWR` branch when a job inherits them (measured: an inherited
`MKL_ENABLE_INSTRUCTIONS=AVX512` turns `AVX2,STRICT` into the AVX-512 kernels); a pinned job unsets them."""

BRANCH_COMPANIONS = {"MKL_DYNAMIC": "FALSE", "OMP_DYNAMIC": "FALSE"}
"""What MKL's reproducibility conditions add to a pinned branch: no run-time change of the thread count."""


def branch_pin_lines(env: dict[str, str]) -> list[str]:
    """Shell lines that make a pinned branch (`pins_a_branch(env)`) independent of the inherited environment: unset
    `BRANCH_OVERRIDES` and export `BRANCH_COMPANIONS`, each unless `env` sets it itself; [] for an unpinned `env`."""
    if not pins_a_branch(env):
        return []
    unset = [name for name in BRANCH_OVERRIDES if name not in env]
    lines = [f"unset {' '.join(unset)}"] if unset else []
    return lines + [f"export {name}={value}" for name, value in BRANCH_COMPANIONS.items() if name not in env]


def pins_a_branch(env: dict[str, str]) -> bool:
    """True when `env` sets `MKL_CBWR` to an instruction-set branch (e.g. `AVX2,STRICT`), which needs the shim on a
    CPU that is not Intel's."""
    value = env.get("MKL_CBWR", "").split(",")[0].strip().upper()
    return bool(value) and value not in UNPINNED_BRANCHES


def ensure_shim(path: Path | None = None) -> tuple[Path | None, str]:
    """Build the shim at `path` (default `shim_path()`) unless it is there; returns (path, "") or (None, why not)."""
    path = path or shim_path()
    source = path.with_suffix(".c")
    if path.is_file() and source.is_file() and source.read_text() == SHIM_SOURCE:
        return path, ""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        return None, "no C compiler (cc, gcc or $CC) to build it"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        tmp_source, tmp_lib = Path(tmp) / source.name, Path(tmp) / path.name
        tmp_source.write_text(SHIM_SOURCE)
        done = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(tmp_lib), str(tmp_source)], capture_output=True, text=True
        )
        if done.returncode != 0:
            return None, f"{compiler} failed: {done.stderr.strip()[:400]}"
        os.replace(tmp_lib, path)  # the library first: a present source then always names a built library
        os.replace(tmp_source, source)
    return path, ""


def main() -> int:
    path, why = ensure_shim()
    if path is None:
        print(f"bat.orchestrate.mkl_vendor: could not build the MKL vendor shim: {why}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
