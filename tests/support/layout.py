"""helpers/ as a newcomer meets it: grouped by topic, imports that stand on few floors, no cycle,
no private name crossing from one module into another (tests/test_layout.py holds these)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "helpers"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of helpers/, by dotted name."""
    return {module_name(p): p for p in sorted(HELPERS.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The helpers module that `name` (a module or a name inside one) lives in."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> list[tuple[str, str | None]]:
    """(helpers module imported, name taken from it or None) for every import in `module`,
    at its top or inside a function."""
    path = modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(_resolve(a.name), None) for a in node.names if a.name.startswith("helpers")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            if not base.startswith("helpers"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules():  # `from helpers import graph`: a module, not a name
                    found.append((sub, None))
                else:
                    found.append((_resolve(base), alias.name))
    return [(m, n) for m, n in found if m is not None and m != module]


def arrows() -> dict[str, set[str]]:
    """Module -> the helpers modules it imports (a package's __init__ counts as the package)."""
    return {m: {target for target, _ in imports(m)} for m in modules()}


def private_crossings() -> list[str]:
    """Every `from helpers.x import _name` between two modules."""
    return [
        f"{m} imports {name} from {target}"
        for m in modules()
        for target, name in imports(m)
        if name is not None and name.startswith("_") and not name.startswith("__")
    ]


def floors() -> dict[str, int]:
    """How high each module stands: 1 + the highest floor of what it imports (cycles raise)."""
    graph = arrows()
    floor: dict[str, int] = {}
    visiting: list[str] = []

    def visit(m: str) -> int:
        if m in floor:
            return floor[m]
        if m in visiting:
            cycle = visiting[visiting.index(m) :] + [m]
            raise ValueError("an import cycle: " + " -> ".join(cycle))
        visiting.append(m)
        floor[m] = 1 + max((visit(t) for t in graph[m]), default=0)
        visiting.pop()
        return floor[m]

    for m in graph:
        visit(m)
    return floor


def top_level_modules() -> list[str]:
    """The modules directly in helpers/ (its __init__ aside)."""
    return sorted(p.stem for p in HELPERS.glob("*.py") if p.stem != "__init__")


def subpackages() -> list[Path]:
    return sorted(p.parent for p in HELPERS.glob("*/__init__.py"))
