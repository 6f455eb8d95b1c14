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


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
"""The README and every page of the documentation site (docs/, built by mkdocs.yml)."""


def _python_blocks(page: Path) -> list[str]:
    """The page's Python examples: fenced ``python`` blocks, at any indentation (inside a list
    or an admonition too), dedented."""
    blocks = []
    for match in re.finditer(
        r"^([ \t]*)```python[^\n]*\n(.*?)^\1```", page.read_text(), flags=re.S | re.M
    ):
        indent, body = match.group(1), match.group(2)
        blocks.append(
            "".join(
                line[len(indent) :] if line.startswith(indent) else line
                for line in body.splitlines(True)
            )
        )
    return blocks


BLOCKS = [
    (page.relative_to(ROOT).as_posix(), n, block)
    for page in PAGES
    for n, block in enumerate(_python_blocks(page))
]
README_BLOCKS = [block for name, _, block in BLOCKS if name == "README.md"]


def test_the_readme_and_the_site_have_python_examples():
    assert len(README_BLOCKS) >= 1
    assert len(BLOCKS) >= 40


@pytest.mark.parametrize("page, n, block", BLOCKS, ids=[f"{page}:{n}" for page, n, _ in BLOCKS])
def test_each_python_example_runs_on_its_own(page, n, block, tmp_path, monkeypatch):
    """A reader copies one block, not the page: each runs in a fresh namespace (in a scratch
    directory, so files it writes go nowhere)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_example"}
    exec(compile(block, f"{page} (python block {n})", "exec"), namespace)


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
