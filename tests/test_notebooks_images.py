"""Every figure a notebook promises is drawn as a picture when the notebook runs headless.

A code cell tagged ``figure`` must leave an ``image/png`` output that is not blank. The notebooks
run with ``MPLBACKEND=Agg``, as on a machine without a display (CI), where ``plt.show()`` and a
bare ``Figure`` draw nothing unless the notebook turns inline figures on.

Each notebook with a tagged cell is executed here once; ``tests/conftest.py`` keeps nbmake
from executing it a second time in the same run.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FIGURE_TAG = "figure"
# A cell whose code shows a figure: pyplot's show, the graph drawing, the evaluation plots.
DRAWS = re.compile(r"\bplt\.show\(|\bdraw_graph\(|\b\w+_figure\(")


def figure_cells(notebook: dict) -> list[int]:
    return [
        index
        for index, cell in enumerate(notebook["cells"])
        if cell["cell_type"] == "code" and FIGURE_TAG in cell.get("metadata", {}).get("tags", [])
    ]


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


FIGURE_NOTEBOOKS = [path for path in NOTEBOOKS if figure_cells(read(path))]


def test_every_cell_that_draws_is_tagged_figure():
    untagged = [
        f"{path.name} cell {index}"
        for path in NOTEBOOKS
        for index, cell in enumerate(read(path)["cells"])
        if cell["cell_type"] == "code"
        and DRAWS.search("".join(cell["source"]))
        and index not in figure_cells(read(path))
    ]
    assert untagged == []
    assert len(FIGURE_NOTEBOOKS) >= 5


def png_outputs(cell: dict) -> list[bytes]:
    return [
        base64.b64decode(output["data"]["image/png"])
        for output in cell.get("outputs", [])
        if output["output_type"] in ("display_data", "execute_result")
        and "image/png" in output.get("data", {})
    ]


@pytest.mark.parametrize("notebook", FIGURE_NOTEBOOKS, ids=[p.stem for p in FIGURE_NOTEBOOKS])
def test_notebook_runs_headless_and_shows_every_promised_figure(notebook, monkeypatch):
    import matplotlib.image

    monkeypatch.setenv("MPLBACKEND", "Agg")
    executed = nbformat.read(notebook, as_version=4)
    NotebookClient(
        executed, timeout=300, resources={"metadata": {"path": str(notebook.parent)}}
    ).execute()

    for index in figure_cells(executed):
        pictures = png_outputs(executed["cells"][index])
        assert pictures, f"{notebook.name} cell {index} showed no picture"
        for picture in pictures:
            pixels = matplotlib.image.imread(io.BytesIO(picture), format="png")
            assert pixels.shape[0] >= 100 and pixels.shape[1] >= 100
            assert pixels.std() > 0, f"{notebook.name} cell {index} showed a blank picture"
