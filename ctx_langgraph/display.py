"""Show what an agent does, offline: plain-text tables (:func:`format_table`) and a picture of
a graph drawn with matplotlib, no network and no Graphviz (:func:`draw_graph`).

Examples:
    >>> print(format_table(["turn", "estimate"], [[1, 561], [2, 1204]]))
    turn | estimate
    -----+---------
       1 |      561
       2 |    1,204
"""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from io import BytesIO
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.runnables.graph import Edge, Graph

from ctx_langgraph.core.table import format_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["draw_graph", "format_table"]

_LAYER_HEIGHT = 1.0  # inches between the centres of two layers
_GAP = 0.45  # inches between two boxes of one layer
_NAME_CHAR = 0.085  # inches per character of a node name
_NOTE_CHAR = 0.062  # inches per character of a metadata line
_MARGIN = 0.35


class _HasGraph(Protocol):
    def get_graph(self) -> Graph: ...


@dataclass(frozen=True)
class _Layout:
    """The nodes by layer (row, from the top), and the indices of the edges that close a cycle."""

    layers: list[list[str]]
    back_edges: frozenset[int]


def _layout(nodes: Sequence[str], edges: Sequence[Edge]) -> _Layout:
    """Layer a directed graph: edges that close a cycle (found depth first) point up, each node
    sits a layer below its lowest predecessor, under their mean position."""
    index = {node: i for i, node in enumerate(nodes)}
    outgoing: dict[str, list[int]] = {node: [] for node in nodes}
    has_incoming = set()
    for i, edge in enumerate(edges):
        outgoing[edge.source].append(i)
        if edge.source != edge.target:
            has_incoming.add(edge.target)
    roots = [n for n in nodes if n not in has_incoming] + [n for n in nodes if n in has_incoming]

    back: set[int] = set()
    finished: list[str] = []
    state: dict[str, int] = {}  # 1: on the search path, 2: done
    for root in roots:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(outgoing[root]))]
        while stack:
            node, pending = stack[-1]
            for i in pending:
                target = edges[i].target
                if state.get(target) == 1:
                    back.add(i)
                elif target not in state:
                    state[target] = 1
                    stack.append((target, iter(outgoing[target])))
                    break
            else:
                state[node] = 2
                finished.append(node)
                stack.pop()

    depth = dict.fromkeys(nodes, 0)
    for node in reversed(finished):  # a topological order of the edges that point down
        for i in outgoing[node]:
            if i not in back:
                depth[edges[i].target] = max(depth[edges[i].target], depth[node] + 1)

    rows: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in nodes:
        rows[depth[node]].append(node)
    predecessors: dict[str, list[str]] = {node: [] for node in nodes}
    for i, edge in enumerate(edges):
        if i not in back:
            predecessors[edge.target].append(edge.source)
    position: dict[str, float] = {}
    for row in rows:

        def barycenter(node: str) -> tuple[float, int]:
            placed = [position[p] for p in predecessors[node] if p in position]
            return (sum(placed) / len(placed) if placed else float(index[node]), index[node])

        row.sort(key=barycenter)
        for rank, node in enumerate(row):
            position[node] = rank - (len(row) - 1) / 2
    return _Layout(rows, frozenset(back))


def _note(metadata: dict[str, Any] | None) -> str:
    """A node's metadata as short lines."""
    lines = []
    for key, value in (metadata or {}).items():
        shown = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        lines += textwrap.wrap(f"{str(key).strip('_')}: {shown}", 44) or [""]
    return "\n".join(lines)


@cache
def _picture_class() -> type[Figure]:
    from matplotlib.figure import Figure

    class GraphFigure(Figure):
        """A figure that shows itself as a PNG in IPython."""

        def _repr_png_(self) -> bytes:
            buffer = BytesIO()
            self.savefig(buffer, format="png")
            return buffer.getvalue()

    return GraphFigure


def draw_graph(
    graph: Graph | _HasGraph,
    *,
    highlight: Collection[str] = (),
    title: str | None = None,
) -> Figure:
    """Draw a graph's nodes and edges as a picture, offline: top-down layers, conditional edges
    dashed and labelled, a node's metadata under its name.

    Args:
        graph: A compiled LangGraph graph (anything with ``get_graph()``) or the
            ``langchain_core`` ``Graph`` it returns.
        highlight: Node ids to fill in a second colour.
        title: Written above the graph.

    Returns:
        A matplotlib ``Figure`` (not registered with ``pyplot``), shown as a PNG in a notebook.

    Raises:
        ImportError: matplotlib is not installed.

    Examples:
        >>> from langgraph.graph import END, START, MessagesState, StateGraph
        >>> builder = (
        ...     StateGraph(MessagesState)
        ...     .add_node("agent", lambda state: {})
        ...     .add_edge(START, "agent")
        ...     .add_edge("agent", END)
        ... )
        >>> figure = draw_graph(builder.compile(), highlight={"agent"})
        >>> sorted(text.get_text() for text in figure.axes[0].texts)
        ['__end__', '__start__', 'agent']
        >>> figure.savefig("graph.png")  # doctest: +SKIP
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    scene = _scene(graph if isinstance(graph, Graph) else graph.get_graph(), title)
    lanes = scene.lanes()
    x_low = min([scene.side(n, -1) for n in scene.centre] + [x for _, x in lanes.values()] + [-1.0])
    x_high = max([scene.side(n, 1) for n in scene.centre] + [x for _, x in lanes.values()] + [1.0])
    loops = any(edge.source == edge.target for edge in scene.graph.edges)
    x_low, x_high = x_low - _MARGIN, x_high + _MARGIN + (0.5 if loops else 0.0)
    y_low = (
        min([y - scene.size[n][1] / 2 for n, (_, y) in scene.centre.items()] + [-scene.top])
        - _MARGIN
    )

    figure = _picture_class()(figsize=(x_high - x_low, -y_low))
    FigureCanvasAgg(figure)
    ax = figure.add_axes((0, 0, 1, 1))
    ax.set_xlim(x_low, x_high)
    ax.set_ylim(y_low, 0)
    ax.set_axis_off()
    if title:
        ax.text(
            (x_low + x_high) / 2,
            -_MARGIN,
            title,
            ha="center",
            va="center",
            fontsize=11,
            weight="bold",
        )
    boxes = _draw_nodes(ax, scene, highlight)
    _draw_edges(ax, scene, boxes, lanes)
    return figure


@dataclass
class _Scene:
    """A graph placed on the page: each node's label, box size and centre (inches)."""

    graph: Graph
    names: dict[str, str]
    notes: dict[str, str]
    layout: _Layout
    depth: dict[str, int]
    top: float
    size: dict[str, tuple[float, float]]
    centre: dict[str, tuple[float, float]]

    def side(self, node: str, side: int) -> float:
        """The x of a node's left (-1) or right (1) side."""
        return self.centre[node][0] + side * self.size[node][0] / 2

    def lanes(self) -> dict[int, tuple[int, float]]:
        """The lane (side, x) of each edge that closes a cycle: up beside the layers it passes,
        on the side with fewer boxes to cross."""
        layers, depth = self.layout.layers, self.depth
        lanes: dict[int, tuple[int, float]] = {}
        used = {-1: 0, 1: 0}
        for i in sorted(self.layout.back_edges):
            edge = self.graph.edges[i]
            if edge.source == edge.target:
                continue
            rows = [(layers[depth[edge.source]], edge.source)]
            rows.append((layers[depth[edge.target]], edge.target))
            left = sum(row.index(node) for row, node in rows)
            right = sum(len(row) - 1 - row.index(node) for row, node in rows)
            side = -1 if left < right else 1
            passed = [
                node
                for d in range(depth[edge.target], depth[edge.source] + 1)
                for node in layers[d]
            ]
            extreme = max(side * self.side(node, side) for node in passed)
            lanes[i] = (side, side * (extreme + 0.3 + 0.22 * used[side]))
            used[side] += 1
        return lanes


def _scene(drawn: Graph, title: str | None) -> _Scene:
    names = {node_id: node.name or node_id for node_id, node in drawn.nodes.items()}
    notes = {node_id: _note(node.metadata) for node_id, node in drawn.nodes.items()}
    for edge in drawn.edges:
        for end in (edge.source, edge.target):
            names.setdefault(end, end)
            notes.setdefault(end, "")
    layout = _layout(list(names), drawn.edges)
    depth = {node: d for d, row in enumerate(layout.layers) for node in row}
    top = _MARGIN + (0.45 if title else 0.0) + 0.25
    size: dict[str, tuple[float, float]] = {}
    centre: dict[str, tuple[float, float]] = {}
    for row_depth, row in enumerate(layout.layers):
        for node in row:
            lines = notes[node].splitlines()
            text = max([len(names[node]) * _NAME_CHAR] + [len(t) * _NOTE_CHAR for t in lines])
            size[node] = (max(text + 0.3, 0.9), 0.42 + 0.14 * len(lines))
        x = -(sum(size[node][0] for node in row) + _GAP * (len(row) - 1)) / 2
        for node in row:
            centre[node] = (x + size[node][0] / 2, -(top + row_depth * _LAYER_HEIGHT))
            x += size[node][0] + _GAP
    return _Scene(drawn, names, notes, layout, depth, top, size, centre)


def _draw_nodes(ax: Any, scene: _Scene, highlight: Collection[str]) -> dict[str, Any]:
    """Each node as a rounded box with its name (and metadata below it); the boxes by node."""
    from matplotlib.patches import FancyBboxPatch

    boxes: dict[str, Any] = {}
    for node, (x, y) in scene.centre.items():
        box_width, box_height = scene.size[node]
        terminal = node in ("__start__", "__end__")
        face = {"__start__": "white", "__end__": "#bfb6fc"}.get(
            node, "#bfe3c0" if node in highlight else "#f2f0ff"
        )
        boxes[node] = FancyBboxPatch(
            (x - box_width / 2, y - box_height / 2),
            box_width,
            box_height,
            boxstyle=f"round,pad=0,rounding_size={box_height / 2 if terminal else 0.08}",
            facecolor=face,
            edgecolor="#5b4bb7",
            linewidth=1.2,
            zorder=2,
        )
        ax.add_patch(boxes[node])
        note = scene.notes[node]
        name_y = y + 0.07 * len(note.splitlines())
        ax.text(x, name_y, scene.names[node], ha="center", va="center", fontsize=10, zorder=3)
        if note:
            ax.text(
                x,
                name_y - 0.14,
                note,
                ha="center",
                va="top",
                fontsize=7.5,
                style="italic",
                color="#444444",
                zorder=3,
            )
    return boxes


def _draw_edges(
    ax: Any, scene: _Scene, boxes: dict[str, Any], lanes: dict[int, tuple[int, float]]
) -> None:
    """Each edge as an arrow (dashed when conditional), with its label when it has one."""
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path

    repeats: dict[tuple[str, str], int] = {}
    for i, edge in enumerate(scene.graph.edges):
        repeat = repeats.get((edge.source, edge.target), 0)
        repeats[(edge.source, edge.target)] = repeat + 1
        (x_a, y_a), (x_b, y_b) = scene.centre[edge.source], scene.centre[edge.target]
        style: dict[str, Any] = {
            "arrowstyle": "-|>",
            "mutation_scale": 12,
            "color": "#333333",
            "linewidth": 1.1,
            "linestyle": (0, (4, 3)) if edge.conditional else "-",
            "zorder": 1,
        }
        label_at = ((x_a + x_b) / 2, (y_a + y_b) / 2)
        if edge.source == edge.target:  # a loop on the node's right side
            x_side, half_height = scene.side(edge.source, 1), scene.size[edge.source][1] / 2
            arrow = FancyArrowPatch(
                (x_side, y_a + half_height / 2),
                (x_side, y_a - half_height / 2),
                connectionstyle=f"arc3,rad={-1.6 - 0.4 * repeat}",
                **style,
            )
            label_at = (x_side + 0.35, y_a)
        elif i in lanes:
            side, lane = lanes[i]
            route = [
                (scene.side(edge.source, side), y_a),
                (lane, y_a),
                (lane, y_b),
                (scene.side(edge.target, side), y_b),
            ]
            arrow = FancyArrowPatch(path=Path(route), **style)
            label_at = (lane, (y_a + y_b) / 2)
        else:
            bend = 0.2 if scene.depth[edge.target] - scene.depth[edge.source] > 1 else 0.0
            arrow = FancyArrowPatch(
                (x_a, y_a),
                (x_b, y_b),
                patchA=boxes[edge.source],
                patchB=boxes[edge.target],
                connectionstyle=f"arc3,rad={bend + 0.15 * repeat}",
                **style,
            )
        ax.add_patch(arrow)
        if edge.data is not None and str(edge.data) != edge.target:
            ax.text(
                *label_at,
                str(edge.data),
                ha="center",
                va="center",
                fontsize=7.5,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"},
                zorder=3,
            )
