"""`bat/state` owns every file name under a run and an experiment: no other module spells one of them."""

import ast
from pathlib import Path

import bat

ROOT = Path(bat.__file__).parent


def _state_names() -> set[str]:
    """String values of the module-level `*_NAME`, `*_FILE` and `*_FILES` constants of `bat/state`."""
    names: set[str] = set()
    for path in (ROOT / "state").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = node.targets[0].id
                if target.endswith(("_NAME", "_FILE", "_FILES")):
                    for value in ast.walk(node.value):
                        if isinstance(value, ast.Constant) and isinstance(value.value, str) and "." in value.value:
                            names.add(value.value)
    return names


def test_state_file_names_are_spelled_only_in_bat_state():
    names = _state_names()
    assert {"transcripts.jsonl", "experiment_arm.json", "prior_records.jsonl", "bat_export.json"} <= names
    spelled = []
    for path in ROOT.rglob("*.py"):
        if path.parent.name == "state" and path.parent.parent == ROOT:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                spelled.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.value!r}")
    assert not spelled, "state file names spelled outside bat/state:\n" + "\n".join(spelled)
