"""The phase I/O table is generated from the graph and the layout; the docs copy matches it; imports run one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from bat.cli.main import main
from bat.orchestrate.graph import PHASES, load_phase_fn
from bat.orchestrate.phase_table import BEGIN, END, block_of, render_phase_table
from bat.phase.order import PHASE_NAMES

ROOT = Path(__file__).resolve().parents[2]
PHASE_MODULES = ("bank", "leakage", "train", "rollout", "verify", "evaluate", "curriculum")


def test_docs_copy_of_the_phase_table_matches_the_code():
    assert block_of((ROOT / "docs" / "PHASES.md").read_text()) == render_phase_table()


def test_table_lists_every_phase_with_its_real_function_and_layout_files():
    table = render_phase_table()
    assert [line.split("|")[1].strip() for line in table.splitlines()[2:]] == list(PHASE_NAMES)
    for spec in PHASES.values():
        fn = load_phase_fn(spec.target)
        assert fn.__name__ == spec.target.split(":")[1] == f"run_{spec.name}"
    assert "`round_NN/rollout/shard_NNNN/DONE.json`" in table and "`bank/vNNNN/ADMITTED`" in table
    assert "`round_{NN+1}/plan.json`" in table


def test_phases_check_and_write(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(f"# x\n\n{BEGIN}\n| stale |\n{END}\ntail\n")
    assert main(["phases", "--check", str(doc)]) == 1
    assert main(["phases", "--write", str(doc)]) == 0
    assert main(["phases", "--check", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# x\n") and text.endswith(f"{END}\ntail\n") and "| stale |" not in text
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n")
    assert main(["phases", "--write", str(bare)]) == 2
    assert "no phase table markers" in capsys.readouterr().err
    assert bare.read_text() == "no markers\n"


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_phase_modules_and_the_contract_never_import_the_orchestrator():
    paths = [ROOT / "bat" / pkg / "phase.py" for pkg in PHASE_MODULES] + sorted((ROOT / "bat" / "phase").glob("*.py"))
    upward = {
        str(p.relative_to(ROOT)): sorted(m for m in _imported_modules(p) if m.startswith("bat.orchestrate"))
        for p in paths
    }
    assert {k: v for k, v in upward.items() if v} == {}


def test_no_package_import_cycles_and_no_upward_phase_imports():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "import_graph.py"), str(ROOT)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "phase modules importing bat.orchestrate: 0 import lines" in out.stdout
    assert "package cycles: 0 group(s)" in out.stdout
