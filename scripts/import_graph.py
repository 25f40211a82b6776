"""Print bat's import graph figures: phase modules importing the orchestrator, package cycles, module cycles.

Counts every runtime `import bat.X` / `from bat.X import ...` (module top or inside functions; imports under
`if TYPE_CHECKING:` are not runtime imports and are left out), grouped by top-level package of `bat/`.
Usage: python scripts/import_graph.py [REPO_ROOT]; exit 1 when a cycle or an upward phase import exists.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PHASE_PACKAGES = ("bank", "leakage", "train", "rollout", "verify", "evaluate", "curriculum")


def runtime_imports(path: Path, submodules: bool = False) -> list[tuple[int, str]]:
    """(line, module) of every `bat...` import in the file that runs at import or call time; with `submodules`,
    `from bat.x import y` also yields `bat.x.y` (which is a module when y is one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, node.module)]
            if submodules:
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, m) for line, m in found if m.startswith("bat.")]


def package_graph(root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """Package -> packages it imports, and the phase modules' imports of `bat.orchestrate` (file:line: module)."""
    edges: dict[str, set[str]] = {}
    upward = []
    for path in sorted((root / "bat").rglob("*.py")):
        rel = path.relative_to(root)
        package = rel.with_suffix("").parts[1]
        for line, module in runtime_imports(path):
            target = module.split(".")[1]
            if rel.name == "phase.py" and package in PHASE_PACKAGES and target == "orchestrate":
                upward.append(f"{rel}:{line}: {module}")
            if target != package:
                edges.setdefault(package, set()).add(target)
    return edges, upward


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Groups of packages that import each other, directly or through others (strongly connected, size >= 2)."""

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reachable = {p: reach(p) for p in edges}
    groups = {frozenset(q for q in reachable if q in reachable[p] and p in reachable.get(q, ())) | {p} for p in edges}
    return sorted(sorted(g) for g in groups if len(g) > 1)


def module_graph(root: Path) -> dict[str, set[str]]:
    """Module -> `bat` modules it imports at runtime (a `from bat.x import name` counts as an import of `bat.x`)."""
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in (root / "bat").rglob("*.py")
    }
    return {
        name: {
            m
            for _, m in runtime_imports(path, submodules=True)
            if m in modules and m != name and not name.startswith(m + ".")
        }
        for name, path in modules.items()
        if path.name != "__init__.py"
    }


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    edges, upward = package_graph(root)
    groups = cycles(edges)
    print(f"phase modules importing bat.orchestrate: {len(upward)} import lines")
    for line in upward:
        print(f"  {line}")
    print(f"package cycles: {len(groups)} group(s) {groups}")
    module_groups = cycles(module_graph(root))
    print(f"module cycles: {len(module_groups)} group(s) {module_groups}")
    return 1 if upward or groups or module_groups else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
