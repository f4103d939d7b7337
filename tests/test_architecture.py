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


#: The layer order, bottom floor first: a package imports only from floors below its own (never sideways, never
#: up). The README's chart and its "Installed" list, and ``medlama``'s docstring, are drawn from this table.
LAYERS: list[tuple[str, dict[str, str]]] = [
    ("shared helpers", {"medlama.core": "settings, errors, atomic writes + locks, ownership, provenance, models"}),
    ("sources", {"medlama.loaders": "raw releases and corpora",
                 "medlama.metrics": "acc@k and UCM as evaluate modules",
                 "medlama.dataset_cards": "the cards' templates"}),
    ("datasets", {"medlama.datasets": "builders, cards, built folders"}),
    ("methods", {"medlama.probers": "the probing methods and what scores with a model (causal/ a sub-package)"}),
    ("the probe run", {"medlama.runs": "queries in, one probe run, its result, tables, plots and files"}),
    ("built on runs", {"medlama.trainers": "Contrastive-Probe rewiring and OptiPrompt (probing as they train)",
                       "medlama.analysis": "comparing runs: pairing, paired statistics",
                       "medlama.ucm_eval": "UCM: sets -> rank -> records",
                       "medlama.integrations": "MTEB, lm-eval and the trainer callback"}),
    ("workflows and outputs", {"medlama.recipe": "rewire -> probe -> report",
                               "medlama.figures": "the papers' figures and the sweep driver",
                               "medlama.reports": "the results page",
                               "medlama.annotation": "expert rating sheets and their scores",
                               "medlama.publishing": "pushes to the Hub"}),
    ("Python API", {"medlama.api": "medlama.probe, load_medlama, rewire, ucm, compare, ..."}),
    ("entry points", {"medlama": "the package (its API loaded on first use)",
                      "medlama.commands": "one module per command; flags from the settings dataclasses"}),
    ("command line", {"medlama.cli": "the medlama command"}),
    ("python -m", {"medlama.__main__": "python -m medlama"}),
]
FLOOR = {package: floor for floor, (_, packages) in enumerate(LAYERS) for package in packages}


def test_every_package_has_a_floor():
    assert sorted({_package(name) for name in MODULES}) == sorted(FLOOR)


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module -> target`` for each import of a package on the same floor or above the importer's."""
    return sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                  if _package(target) != _package(name) and FLOOR[_package(target)] >= FLOOR[_package(name)])


def test_imports_run_down_the_layers():
    assert _upward_imports(GRAPH) == []


def test_an_upward_import_is_found():
    graph = {"medlama.core.errors": {"medlama.runs.workflow"}, "medlama.runs.workflow": {"medlama.core.errors"},
             "medlama.trainers.loss": {"medlama.analysis.runs"}}
    assert _upward_imports(graph) == ["medlama.core.errors -> medlama.runs.workflow",
                                      "medlama.trainers.loss -> medlama.analysis.runs"]


def render_layers() -> str:
    """The README's chart of the layers, top floor first."""
    lines = []
    for floor, (title, packages) in reversed(list(enumerate(LAYERS))):
        for index, (package, job) in enumerate(packages.items()):
            lines.append(f"{f'{floor} {title}' if index == 0 else '':<26}{package:<24}{job}".rstrip())
    return "\n".join(lines)


def _readme_block(marker: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    begin, end = f"<!-- {marker}: begin -->", f"<!-- {marker}: end -->"
    assert begin in text and end in text, f"README.md has no {marker} block"
    return text.split(begin, 1)[1].split(end, 1)[0]


def test_the_readme_chart_is_the_layer_table():
    assert _readme_block("layers").strip().strip("`").strip() == render_layers()


def test_the_installed_list_and_the_package_docstring_name_every_part():
    import medlama

    parts = [package for _, packages in LAYERS for package in packages if package.count(".") == 1
             and package not in ("medlama.api", "medlama.cli", "medlama.commands", "medlama.__main__")]
    installed = _readme_block("installed")
    assert [part for part in parts if f"`{part}`" not in installed] == []
    assert [part for part in parts if f"``{part}``" not in (medlama.__doc__ or "")] == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: Every module held to the size limit: the package's, and the benchmarks'.
SIZED = {**{name: path for name, path in MODULES.items()},
         **{f"benchmarks.{path.stem}": path for path in sorted((REPO / "benchmarks").glob("*.py"))}}


@pytest.mark.parametrize("name", sorted(SIZED))
def test_module_size(name):
    assert len(SIZED[name].read_text(encoding="utf-8").splitlines()) <= MAX_LINES


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
