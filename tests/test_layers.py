"""The package's floors: ``core`` imports nothing of bourse outside itself, and no two
packages import each other, directly or round a loop (an import inside a function counts:
it is a dependency all the same)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import bourse

ROOT = Path(bourse.__file__).parent


def imports() -> dict[str, set[str]]:
    """Each module (dotted name) -> the bourse modules it imports, anywhere in it."""
    found: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names if a.name.startswith("bourse")}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module.startswith("bourse"):
                names.add(node.module)
        found[name] = names
    return found


def package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def test_core_is_the_ground_floor() -> None:
    outside = {(module, target) for module, targets in imports().items()
               if package(module) == "bourse.core" for target in targets
               if package(target) != "bourse.core"}
    assert outside == set()


def test_no_two_packages_depend_on_each_other() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports().items():
        for target in targets:
            if package(target) != package(module) and package(target) != "bourse":
                graph[package(module)].add(package(target))
    cycles = [cycle for cycle in (_cycle_from(graph, start) for start in sorted(graph)) if cycle]
    assert cycles == []


def _cycle_from(graph: dict[str, set[str]], start: str) -> list[str]:
    """A path from ``start`` back to itself, if there is one."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return []
