"""Stage names come from the benchmark: no module of bat outside a benchmark plug-in spells a built-in stage key.

The scan parses every module under bat/ (the plug-in packages bat/benchmark/ and bat/benchmarks/ excepted) and
reports each string literal that is a built-in stage key ("S1" .. "S5") and each f-string that builds one ("S{i}"),
as file:line. Prose in docstrings and comments may name stages; literals may not. `ALLOWED` lists the places that
may still spell them, each with its reason.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ("bat/benchmark/", "bat/benchmarks/")
"""The benchmark plug-in packages: the built-in benchmark declares its stages there (`bat.benchmarks.builtin_spec`, as plain data)."""
ALLOWED: dict[str, str] = {}
"""Path prefix -> why literals there are not (yet) reported."""
TRACKS_ALLOWED = {
    **ALLOWED,
    "bat/perf/": "benches of the built-in benchmark: their CLI defaults name built-in tracks",
    "bat/policy/corpus.py": "words of the tiny tokenizer's training text, not track names",
}
"""Path prefix -> why built-in track names spelled there are not reported."""
STAGE_KEY = re.compile(r"S[1-5]")
PREFIX = re.compile(r"(^|[^A-Za-z0-9_])S$")


def spelled(source: str) -> list[int]:
    """Lines of `source` holding a built-in stage key as a string literal, or an f-string piece `S{...}`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and STAGE_KEY.fullmatch(node.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.JoinedStr):
            for part, after in itertools.pairwise(node.values):
                built = isinstance(part, ast.Constant) and isinstance(after, ast.FormattedValue)
                if built and PREFIX.search(str(part.value)):
                    lines.append(node.lineno)
    return sorted(set(lines))


def track_literals(source: str, tracks: set[str]) -> list[int]:
    """Lines of `source` holding one of `tracks` as a string literal."""
    found = {n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and n.value in tracks}
    return sorted(found)


def findings(scan=spelled, allowed_prefixes=ALLOWED) -> tuple[list[str], list[str]]:
    """(reported file:line places, allowed file:line places) of `scan` over bat/ outside the plug-in packages."""
    reported, allowed = [], []
    for path in sorted((ROOT / "bat").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(PLUGINS):
            continue
        hits = [f"{rel}:{line}" for line in scan(path.read_text(encoding="utf-8"))]
        (allowed if rel.startswith(tuple(allowed_prefixes)) else reported).extend(hits)
    return reported, allowed


def test_the_scan_finds_literals_and_built_keys_but_not_prose():
    source = 'A = "S3"\nB = {"S1": 1}\nC = f"S{i}"\nD = "the S3 row"\n"""S1-S5 in a docstring."""\nE = f"{x}S"\n'
    assert spelled(source) == [1, 2, 3]


def test_no_module_outside_a_benchmark_plugin_spells_a_stage_key():
    reported, _ = findings()
    assert not reported, (
        "built-in stage keys spelled outside the benchmark plug-ins (take them from the configured stages, "
        "`config.stage_keys`, or the benchmark's `stages()`):\n" + "\n".join(reported)
    )


def test_no_module_outside_a_benchmark_plugin_spells_a_builtin_track():
    """Built-in track names as literals ("report" left out: it is also an ordinary word, e.g. `bat report`)."""
    from bat.benchmark.builtin_spec import TRACKS

    tracks = set(TRACKS) - {"report"}
    reported, _ = findings(lambda source: track_literals(source, tracks), TRACKS_ALLOWED)
    assert not reported, "built-in track names spelled outside the benchmark plug-ins:\n" + "\n".join(reported)


def test_the_allow_list_names_places_that_exist():
    missing = [prefix for prefix in TRACKS_ALLOWED if not (ROOT / prefix).exists()]
    assert not missing, f"ALLOWED names paths that do not exist: {missing}"


def test_the_builtin_declares_its_names_once_and_its_modules_agree():
    from bat.benchmark import builtin_spec
    from bat.benchmark.tracks import TRACKS
    from bat.config.root import BatConfig

    assert builtin_spec.TRACKS == TRACKS
    assert tuple(builtin_spec.CONTRACT) == builtin_spec.STAGE_KEYS == BatConfig().stage_keys
    assert BatConfig().curriculum.gate.late_stages == builtin_spec.STAGE_KEYS[2:]


def test_the_builtin_declaration_and_the_config_import_in_either_order():
    """Config reads the built-in declaration on first use, never while it is imported, so a fresh process may import
    either first (tool functions in the sandbox import only their own module)."""
    import subprocess
    import sys

    for module in ("bat.benchmarks.builtin_spec", "bat.benchmark.builtin_spec", "bat.benchmark.contract", "bat.config"):
        done = subprocess.run(
            [sys.executable, "-c", f"import {module}; from bat.config import BatConfig; BatConfig()"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"import {module} first: {done.stderr[-800:]}"
