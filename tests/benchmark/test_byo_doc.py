"""docs/byo-benchmark.md's minimal example, copied from the page: at most 150 lines, imports only the interface,
passes `bat benchmark check`, and teaches: the bootstrap and one RL round run on it with the tiny model."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from bat.cli.main import main
from bat.staged import registry

PAGE = Path(__file__).resolve().parents[2] / "docs" / "byo-benchmark.md"


def _example() -> str:
    section = PAGE.read_text().split("## A minimal complete example", 1)[1]
    match = re.search(r"^```python\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert match, "the section has no python block"
    return match.group(1)


def test_the_pages_example_is_small_and_imports_only_the_interface():
    code = _example()
    assert len(code.splitlines()) <= 150
    imported = {n.module for n in ast.walk(ast.parse(code)) if isinstance(n, ast.ImportFrom)}
    assert {m for m in imported if m and m.startswith("bat")} == {"bat.staged.interface"}


def _register(tmp_path) -> None:
    path = tmp_path / "wordsort.py"
    path.write_text(_example())
    spec = importlib.util.spec_from_file_location("wordsort", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry.register("wordsort", module.WordSort)


def test_the_pages_example_passes_the_check(tmp_path, capsys):
    _register(tmp_path)
    try:
        assert main(["benchmark", "list", "--json"]) == 0
        assert '"wordsort"' in capsys.readouterr().out
        assert main(["benchmark", "check", "wordsort"]) == 0, capsys.readouterr().err
    finally:
        registry.unregister("wordsort")
    assert "wordsort: conforms" in capsys.readouterr().out


@pytest.mark.slow
def test_the_pages_example_runs_a_round(tmp_path, plugin_smoke):
    """configs/smoke.yaml's sizes on the page's example, in-process (`debug` executor: the example is registered in
    this process only): synthesize to route, then round 1 (rollout, verify, grpo, evaluate, route)."""
    from bat.orchestrate import driver
    from bat.state.layout import RunLayout

    _register(tmp_path)
    try:
        cfg = plugin_smoke("debug", "wordsort")
        layout = RunLayout(tmp_path / "run")
        assert driver.run(cfg, layout) == 0
    finally:
        registry.unregister("wordsort")
    for phase in ("synthesize", "scan", "sft", "evaluate", "route"):
        assert (layout.phase_dir(0, phase) / "DONE.json").is_file(), phase
    for phase in ("rollout", "verify", "grpo", "evaluate", "route"):
        assert (layout.phase_dir(1, phase) / "DONE.json").is_file(), phase
    report = layout.report_md(1).read_text()
    assert all(f"| {stage} " in report for stage in cfg.stage_keys)
