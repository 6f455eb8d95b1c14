"""Each notebook runs once per test run.

``tests/test_notebooks_images.py`` executes every notebook that has a cell tagged ``figure`` and
checks its pictures; when its case for a notebook is selected, nbmake's item for the same
notebook is deselected. Run alone (``pytest notebooks/01_drop_in.ipynb``), nbmake runs it as usual.
"""

from __future__ import annotations

from pathlib import Path

import pytest

IMAGE_TEST = "test_notebooks_images.py"


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    executed = {
        Path(item.callspec.params["notebook"]).resolve()
        for item in items
        if item.path.name == IMAGE_TEST and hasattr(item, "callspec")
    }
    duplicates = [
        item
        for item in items
        if getattr(item, "nbmake", False) and Path(item.path).resolve() in executed
    ]
    if duplicates:
        config.hook.pytest_deselected(items=duplicates)
        items[:] = [item for item in items if item not in duplicates]
