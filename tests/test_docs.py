"""Docstring examples and the README's Python examples are executed, so they stay true."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import ctx_langgraph

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(
    info.name for info in pkgutil.walk_packages(ctx_langgraph.__path__, prefix="ctx_langgraph.")
)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_docstring_examples_exist_on_the_main_entry_points():
    finder = doctest.DocTestFinder()
    from ctx_langgraph.history import HistoryStore, Scope, SQLiteHistoryStore

    for obj in (
        HistoryStore.append,
        HistoryStore.search,
        HistoryStore.create_candidate,
        Scope,
        SQLiteHistoryStore,
    ):
        assert any(test.examples for test in finder.find(obj)), obj


README_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_the_readme_has_python_examples():
    assert len(README_BLOCKS) >= 10


@pytest.mark.parametrize(
    "block", README_BLOCKS, ids=[f"block{n}" for n in range(len(README_BLOCKS))]
)
def test_each_readme_python_example_runs_on_its_own(block):
    """A reader copies one block, not the page: each runs in a fresh namespace."""
    namespace: dict[str, object] = {"__name__": "readme"}
    exec(compile(block, "README.md", "exec"), namespace)


def test_readme_quickstart_has_exactly_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```bash\n(.*?)```", quickstart, flags=re.S)
    commands = [
        line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()
    ]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci and "CTX_REQUIRE_POSTGRES=1" in ci
