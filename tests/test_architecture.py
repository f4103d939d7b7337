"""The package's shape, as a newcomer relies on it: imports run one way with no cycle (an import inside a
function counts), no module over 450 lines, flags made from the settings dataclasses, argparse in the CLI only."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 450
MAX_HAND_WRITTEN_FLAGS = 45


def _modules() -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the installed package, by pyproject's package-dir map."""
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    modules = {}
    for package, folder in package_dir.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package or "medlama", *parts] if package else parts)] = path
    return modules


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (inside functions too)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            while parts and ".".join(parts) not in MODULES:
                parts.pop()
            if parts and ".".join(parts) != name:
                found.add(".".join(parts))
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _package(name: str) -> str:
    """A module's package: ``medlama.probers`` for ``medlama.probers.pools``; the top modules stand alone."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or MODULES[name].name == "__init__.py" else name


def test_no_import_cycle_between_modules():
    assert _cycles(GRAPH) == []


def test_no_import_cycle_between_packages():
    packages: dict[str, set[str]] = {}
    for name, targets in GRAPH.items():
        packages.setdefault(_package(name), set()).update(_package(t) for t in targets if _package(t) != _package(name))
    assert _cycles(packages) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size(name):
    assert len(MODULES[name].read_text(encoding="utf-8").splitlines()) <= MAX_LINES


def test_flags_come_from_the_settings_dataclasses():
    commands = REPO / "src" / "medlama" / "commands"
    calls = sum(len(re.findall(r"\badd_argument\(", path.read_text(encoding="utf-8"))) for path in commands.rglob("*.py"))
    assert calls <= MAX_HAND_WRITTEN_FLAGS


def test_argparse_and_commands_only_in_the_cli():
    for name, path in MODULES.items():
        if name.startswith("medlama.commands") or name == "medlama.cli":
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import argparse|from argparse )", text, re.M), name
        assert "medlama.commands" not in GRAPH[name] and not any(t.startswith("medlama.commands.") for t in GRAPH[name]), name


def _uncommented_function_imports(path: Path) -> list[str]:
    """``line: import`` of each import inside a function with no comment on its line, nor on the line above it
    (or above the run of import lines it belongs to): a deferred import says what deferring it buys."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    import_lines = {line for node in imports for line in range(node.lineno, node.end_lineno + 1)}
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or "#" in lines[node.lineno - 1]:
                continue
            above = node.lineno - 1
            while above in import_lines:
                above -= 1
            if not (above and lines[above - 1].strip().startswith("#")):
                found.append(f"{node.lineno}: {lines[node.lineno - 1].strip()}")
    return sorted(set(found))


def _is_metric_script(path: Path) -> bool:
    """The metric scripts ``evaluate`` loads by path (metrics/acc_at_k, metrics/ucm): modules of their own."""
    return path.parent.parent.name == "metrics" and path.parent.name in ("acc_at_k", "ucm")


@pytest.mark.parametrize("name", sorted(name for name, path in MODULES.items() if not _is_metric_script(path)))
def test_function_level_imports_say_why(name):
    assert _uncommented_function_imports(MODULES[name]) == []


def test_an_uncommented_function_import_is_found(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("def f():\n    # torch loads when f runs\n    import torch\n    import numpy\n\n"
                      "def g():\n    import json\n    return json\n")
    assert _uncommented_function_imports(module) == ["7: import json"]
