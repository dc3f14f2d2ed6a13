"""The package's modules import one another without a circle: the framework modules register
themselves in `sc._frameworks`, which `sc._core` asks, and neither imports the other."""

from __future__ import annotations

import ast
import pathlib

import pytest

import sc


def imports(path: pathlib.Path) -> set[str]:
    """The modules of the package that the module at `path` imports, at any depth of its code
    (a lazy import inside a function counts)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sc."):
            found.add(node.module.split(".")[1])
    return found


def test_no_import_circle():
    root = pathlib.Path(sc.__file__).parent
    graph = {p.stem: imports(p) for p in root.glob("*.py") if p.stem != "__init__"}
    graph = {m: {d for d in deps if d in graph} for m, deps in graph.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for d in graph[start]:
            if d == goal or (d not in seen and (seen.add(d) or reaches(d, goal, seen))):
                return True
        return False

    circles = [m for m in graph if reaches(m, m, set())]
    assert circles == [], f"modules in an import circle: {circles}: {graph}"


def test_frameworks_are_found_by_name():
    from sc import _frameworks

    assert _frameworks.framework("np") is _frameworks.framework("numpy")
    assert _frameworks.framework("np").name == "numpy"
    assert _frameworks.framework("pt").name == "torch"
    with pytest.raises(ValueError, match="framework must be"):
        _frameworks.framework("jax")
