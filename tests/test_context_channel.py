"""The ``context`` channel stays small: the control state the next turn needs and one bounded
report, filed by one table; its size does not grow with the thread."""

from __future__ import annotations

import json
import typing

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctx_langgraph import ContextConfig, create_context_agent
from ctx_langgraph.state import (
    LAYOUT,
    ContextReport,
    FlatContext,
    merge_context,
    merge_facts,
    pack,
    unpack,
)
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply


def test_the_channel_has_at_most_twelve_keys_and_every_fact_a_place():
    keys = typing.get_type_hints(ContextReport)
    assert len(keys) <= 12
    facts = typing.get_type_hints(FlatContext)
    for fact in facts:  # every fact is filed under a key of the channel, or is one itself
        assert fact in LAYOUT or fact in keys, fact
    assert {group for group, _ in LAYOUT.values()} <= keys.keys()
    assert len({placed for placed in LAYOUT.values()}) == len(LAYOUT)  # no two facts collide


def test_pack_and_unpack_are_inverse_and_idempotent():
    flat = {
        "projection_epoch": 3,
        "branch": "main",
        "active_checkpoint_id": "c1",
        "budget": {"decision": "proceed"},
        "baseline": None,
        "compact": None,
    }
    packed = pack(flat)
    assert packed == {
        "view": {"epoch": 3},
        "branch": "main",
        "summary": {"checkpoint_id": "c1"},
        "report": {"budget": {"decision": "proceed"}},
        "baseline": None,
        "compact": None,
    }
    assert unpack(packed) == flat and unpack(flat) == flat
    assert pack(packed) == packed


def test_the_reducer_merges_grouped_keys_field_by_field_and_replaces_the_others():
    left = merge_context(None, {"projection_epoch": 1, "active_generation": 2, "request": {"a": 1}})
    right = merge_context(left, {"active_checkpoint_id": "c", "request": {"b": 2}})
    assert right["summary"] == {"generation": 2, "checkpoint_id": "c"}
    assert right["view"] == {"epoch": 1}
    assert right["request"] == {"b": 2}  # replaced whole, as before
    # a flat update of a fact replaces that fact only; None is a value, not a deletion
    assert merge_context(right, {"active_checkpoint_id": None})["summary"] == {
        "generation": 2,
        "checkpoint_id": None,
    }
    assert merge_facts(right, {"projection_epoch": 5})["projection_epoch"] == 5


def test_a_checkpoint_of_an_older_flat_channel_is_read_and_refiled():
    old = {"projection_epoch": 4, "active_generation": 1, "budget": {"decision": "proceed"}}
    merged = merge_context(old, {"covered_through_seq": 9})
    assert "projection_epoch" not in merged and merged["view"] == {"epoch": 4}
    assert merged["summary"] == {"generation": 1, "covered_through_seq": 9}


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}: " + "lorem ipsum " * 40


@pytest.mark.parametrize("turns", [40])
def test_the_channel_stays_bounded_over_a_compacting_thread(store, turns):
    model = MeteringChatModel(replies=[tool_agent_reply])
    graph = create_context_agent(
        model,
        [read_file],
        store=store,
        config=ContextConfig(context_window=4_000, output_reserve=500),
    ).compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "t"}}
    sizes, keys = [], set()
    for n in range(turns):
        ask = f"turn {n}: read file_{n}.txt and tell me " + "words " * 120
        out = graph.invoke({"messages": [HumanMessage(ask)]}, run)
        context = out["context"]
        keys |= context.keys()
        sizes.append(len(json.dumps(context, default=str)))
    assert len(keys) <= 12, keys
    assert unpack(out["context"])["active_generation"] >= 2  # it compacted, more than once
    # the size settles once every report has been written: the second half grows by nothing
    half = sizes[turns // 2 :]
    assert max(half) - min(half) <= 64, half
    assert max(sizes) < 4_096
