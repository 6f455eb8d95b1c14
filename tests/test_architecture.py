"""The shape of the package, checked: layers one way (the import-linter contract), no import
cycle, modules one can read in a sitting, functions one can read on a screen, and the layer
picture in docs/architecture.md that matches the contract."""

from __future__ import annotations

import ast
import configparser
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ctx_langgraph"
BIN = Path(sys.executable).parent

MAX_FUNCTION_LINES = 80

# Functions allowed over MAX_FUNCTION_LINES, each with the reason (empty when none is).
LONG_FUNCTIONS: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_tiktoken_cache" not in p.parts)


def _contract_layers() -> list[list[str]]:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    layers = config["importlinter:contract:layers"]["layers"]
    return [
        [name.strip() for name in line.replace("|", ":").split(":") if name.strip()]
        for line in layers.strip().splitlines()
    ]


def test_lint_imports_passes():
    """The import-linter contracts (layers, private modules, acyclic siblings) hold."""
    result = subprocess.run(
        [str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_cycle_in_the_package():
    graph = grimp.build_graph("ctx_langgraph", include_external_packages=False)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    assert cycles == []


def test_every_module_says_what_it_is_about():
    """Modules are cut by concept, not by size: each opens with the one thing it is about."""
    silent = [
        str(path.relative_to(ROOT))
        for path in _modules()
        if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()
    ]
    assert silent == []


def test_no_function_over_the_line_limit():
    long = {}
    for path in _modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                name = f"{path.relative_to(ROOT)}:{node.name}"
                if lines > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS:
                    long[name] = lines
    assert long == {}


def test_listed_long_functions_are_still_long():
    """An exception that no longer applies is dropped from the list."""
    for name in LONG_FUNCTIONS:
        path, function = name.split(":")
        tree = ast.parse((ROOT / path).read_text())
        sizes = [
            (node.end_lineno or node.lineno) - node.lineno + 1
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function
        ]
        assert sizes and max(sizes) > MAX_FUNCTION_LINES, name


def test_architecture_doc_lists_the_contract_layers_in_order():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    positions = []
    for layer in _contract_layers():
        for module in layer:
            assert f"`{module}`" in doc, f"{module} is a layer of the contract but not in the doc"
        positions.append(min(doc.index(f"`{module}`") for module in layer))
    assert positions == sorted(positions), "the doc lists the layers in another order"


@pytest.mark.parametrize("name", ["README.md"])
def test_readme_links_the_architecture(name):
    assert "docs/architecture.md" in (ROOT / name).read_text()


def test_every_module_is_in_a_layer():
    """Only the package facades (re-exporting ``__init__`` modules) are outside the layers."""
    layers = [module for layer in _contract_layers() for module in layer]
    graph = grimp.build_graph("ctx_langgraph", include_external_packages=False)
    outside = [
        module
        for module in sorted(graph.modules)
        if not any(module == layer or module.startswith(layer + ".") for layer in layers)
    ]
    facades = [
        m for m in outside if (PACKAGE.parent / m.replace(".", "/") / "__init__.py").exists()
    ]
    assert outside == facades


def test_the_budget_report_types_every_field_of_the_estimate():
    """``context["budget"]`` spreads ``BudgetEstimate.to_json()``: its TypedDict names each key."""
    import dataclasses

    from ctx_langgraph.budget.estimate import BudgetEstimate
    from ctx_langgraph.state import BudgetReport

    typed = set(BudgetReport.__annotations__)
    fields = {field.name for field in dataclasses.fields(BudgetEstimate)}
    assert fields <= typed, sorted(fields - typed)
