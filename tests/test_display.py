"""ctx_langgraph.display: the plain-text table and the offline picture of a graph."""

from __future__ import annotations

import io
import itertools
import socket

import matplotlib.image
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.runnables.graph import Edge, Graph, Node
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

import ctx_langgraph.display
from ctx_langgraph import ContextConfig, SQLiteHistoryStore, add_context_management
from ctx_langgraph.display import draw_graph, format_table
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply


def test_exported_members_are_pinned():
    assert sorted(ctx_langgraph.display.__all__) == ["draw_graph", "format_table"]


def test_format_table_aligns_numbers_right_and_text_left():
    assert format_table(["name", "n"], [["a", 1200], ["bb", 3]]).splitlines() == [
        "name |     n",
        "-----+------",
        "a    | 1,200",
        "bb   |     3",
    ]


# -- what a drawn graph contains ----------------------------------------------------------


def drawing(figure):
    """Node name -> (centre, box), the arrows, and the other texts of a drawn graph."""
    (ax,) = figure.axes
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    nodes = {}
    for text in ax.texts:
        if text.get_fontsize() != 10:  # the title, metadata and edge labels are not names
            continue
        x, y = text.get_position()
        for box in boxes:
            left, bottom = box.get_x(), box.get_y()
            if left < x < left + box.get_width() and bottom < y < bottom + box.get_height():
                assert text.get_text() not in nodes
                nodes[text.get_text()] = ((x, y), box)
    return nodes, arrows, ax


def overlaps(a, b) -> bool:
    return not (
        a.get_x() + a.get_width() <= b.get_x()
        or b.get_x() + b.get_width() <= a.get_x()
        or a.get_y() + a.get_height() <= b.get_y()
        or b.get_y() + b.get_height() <= a.get_y()
    )


def png_pixels(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return matplotlib.image.imread(io.BytesIO(buffer.getvalue()), format="png")


# -- the agent of the drop-in notebook ------------------------------------------------------


@tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status of an order by its id."""
    return f"Order {order_id}: shipped."


def agent_builder(tools):
    model = MeteringChatModel(replies=[tool_agent_reply]).bind_tools(tools)
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


@pytest.fixture
def wired_graph():
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    builder = agent_builder([get_order_status])
    add_context_management(
        builder,
        model_node="agent",
        store=store,
        config=ContextConfig(context_window=4_000),
        model=MeteringChatModel(replies=[tool_agent_reply]),
    )
    yield builder.compile()
    store.close()


def test_the_wired_agent_is_drawn_in_layers_with_every_node_and_edge(wired_graph):
    edges = wired_graph.get_graph().edges
    figure = draw_graph(wired_graph, highlight={"ctx_budget"}, title="wired")
    nodes, arrows, ax = drawing(figure)

    assert set(nodes) == set(wired_graph.get_graph().nodes)
    assert len(arrows) == len(edges)
    assert "wired" in [text.get_text() for text in ax.texts]
    y = {name: centre[1] for name, (centre, _) in nodes.items()}
    assert y["__start__"] > y["ctx_budget"] > y["agent"] > y["ctx_usage"] > y["tools"]
    assert y["ctx_budget"] > y["ctx_compact"] and y["ctx_usage"] > y["__end__"]
    for a, b in itertools.combinations(nodes.values(), 2):
        assert not overlaps(a[1], b[1])
    # conditional edges are dashed, the others solid
    styles = sorted(arrow.get_linestyle() == "-" for arrow in arrows)
    assert styles.count(False) == sum(edge.conditional for edge in edges) > 0
    # the added node is filled in another colour than the model node
    assert nodes["ctx_budget"][1].get_facecolor() != nodes["agent"][1].get_facecolor()
    # a tool node's tools are written under its name
    assert "tools: get_order_status" in [text.get_text() for text in ax.texts]


def test_a_compiled_graph_and_its_graph_draw_the_same(wired_graph):
    first, _, _ = drawing(draw_graph(wired_graph))
    second, _, _ = drawing(draw_graph(wired_graph.get_graph()))
    assert {name: centre for name, (centre, _) in first.items()} == {
        name: centre for name, (centre, _) in second.items()
    }


def test_drawing_needs_no_network(wired_graph, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    pixels = png_pixels(draw_graph(wired_graph))
    assert pixels.shape[0] > 100 and pixels.std() > 0


def test_a_notebook_shows_the_figure_as_png_without_an_inline_backend(wired_graph):
    """IPython's display machinery picks a PNG, even when no matplotlib backend registered one."""
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(draw_graph(wired_graph))
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"


def test_edge_labels_self_loops_and_unknown_nodes_are_drawn():
    builder = (
        StateGraph(MessagesState)
        .add_node("check", lambda state: {})
        .add_node("retry", lambda state: {})
        .add_edge(START, "check")
        .add_conditional_edges("check", lambda state: "ok", {"ok": END, "again": "retry"})
        .add_edge("retry", "retry")
    )
    graph = builder.compile().get_graph()
    graph.edges.append(Edge("retry", "elsewhere"))  # not in graph.nodes
    nodes, arrows, ax = drawing(draw_graph(graph))
    texts = [text.get_text() for text in ax.texts]
    assert {"ok", "again"} <= set(texts)
    assert "elsewhere" in nodes and len(arrows) == len(graph.edges)
    assert png_pixels(ax.figure).std() > 0


def test_an_empty_graph_draws_an_empty_picture():
    figure = draw_graph(Graph())
    nodes, arrows, _ = drawing(figure)
    assert nodes == {} and arrows == []
    assert png_pixels(figure).shape[0] > 0


# -- any graph ------------------------------------------------------------------------------

NAMES = [f"node_{i}" for i in range(8)]


@st.composite
def graphs(draw):
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True))
    edges = draw(
        st.lists(
            st.tuples(st.sampled_from(names), st.sampled_from(names), st.booleans()),
            max_size=16,
        )
    )
    return Graph(
        nodes={name: Node(name, name, None, None) for name in names},
        edges=[Edge(source, target, None, conditional) for source, target, conditional in edges],
    )


def acyclic(graph: Graph) -> bool:
    reach = {node: {e.target for e in graph.edges if e.source == node} for node in graph.nodes}
    for _ in graph.nodes:
        for node in reach:
            reach[node] |= set().union(*(reach[t] for t in reach[node]))
    return all(node not in reach[node] for node in reach)


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_any_graph_is_drawn_whole_without_overlaps_and_edges_point_down_unless_they_close_a_cycle(
    graph,
):
    figure = draw_graph(graph)
    nodes, arrows, ax = drawing(figure)

    assert set(nodes) == set(graph.nodes)
    assert len(arrows) == len(graph.edges)
    (x_low, x_high), (y_low, y_high) = ax.get_xlim(), ax.get_ylim()
    for _, box in nodes.values():
        assert x_low < box.get_x() and box.get_x() + box.get_width() < x_high
        assert y_low < box.get_y() and box.get_y() + box.get_height() < y_high
    for a, b in itertools.combinations(nodes.values(), 2):
        assert not overlaps(a[1], b[1])
    if acyclic(graph):
        for edge in graph.edges:
            assert nodes[edge.target][0][1] < nodes[edge.source][0][1]
