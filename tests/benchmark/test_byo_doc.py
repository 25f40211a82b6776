"""docs/byo-benchmark.md's minimal example, copied from the page: at most 150 lines, imports only the interface, and
passes `bat benchmark check`."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

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


def test_the_pages_example_passes_the_check(tmp_path, capsys):
    path = tmp_path / "wordsort.py"
    path.write_text(_example())
    spec = importlib.util.spec_from_file_location("wordsort", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry.register("wordsort", module.WordSort)
    try:
        assert main(["benchmark", "list", "--json"]) == 0
        assert '"wordsort"' in capsys.readouterr().out
        assert main(["benchmark", "check", "wordsort"]) == 0, capsys.readouterr().err
    finally:
        registry.unregister("wordsort")
    assert "wordsort: conforms" in capsys.readouterr().out
