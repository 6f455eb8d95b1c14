"""LangGraph Studio graph: watch compaction happen within a few turns.

The same agent as ``context_agent`` (``ctx_budget → model → ctx_usage → tools``, with
``ctx_compact``), with a window of 2,000 tokens, 600 of them reserved for the reply: the tool
schemas take about 300 of the rest, so six or seven short turns fill it, and from then on a
summary is rewritten every few turns. The model
is always the offline scripted one (``MeteringChatModel`` driven by ``tool_agent_reply``): no API
key, no network, and exact token usage.

Send a few messages ("Where is ORD-1042?", "My locker code is 4471", "Where is ORD-2051?", ...)
and look at:

- the graph view: ``ctx_budget`` routes to ``ctx_compact`` (instead of ``model``) once the
  estimate of the next request is over the trigger; ``ctx_compact`` goes back to ``ctx_budget``;
- ``context.budget``: ``input_tokens`` against ``trigger`` and ``usable``, and the ``decision``
  (``proceed`` or ``compact``);
- ``context.compaction``: ``status``, ``generation``, ``covered_through_seq``,
  ``summary_tokens``, ``removed_messages``; ``context.active_generation`` counts the summaries;
- ``messages``: the old turns replaced by one message with id ``ctx-summary`` (the summary),
  followed by the recent turns kept verbatim.

To compact on demand, below the trigger, submit the input
``{"context": {"compact": {"instructions": "keep the locker code"}}}`` with no message: the run
goes ``ctx_budget → ctx_compact → ctx_budget`` and ends there (``context.budget.decision`` is
``done``, no model call); ``context.compaction.requested`` shows the instructions, which the
summary version also records.

Then ask "Recall my locker code": the summarized words come back exactly through
``history_lookup``, from the history store (SQLite file ``CTX_HISTORY_DB``, default
``ctx-history.sqlite`` in the temp directory). Compiled without a checkpointer: ``langgraph dev``
supplies one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from langchain_core.tools import tool
from langgraph.graph import StateGraph

from ctx_langgraph import ContextConfig, SQLiteHistoryStore, create_context_agent
from ctx_langgraph.testing import MeteringChatModel, tool_agent_reply

CONFIG = ContextConfig(
    context_window=2_000,
    output_reserve=600,
    trigger=0.9,
    target=0.75,  # room for the tool schemas + a summary + the kept tail after a compaction
    keep_recent_tokens=300,
    summary_max_tokens=300,
    tool_output_cap_tokens=200,  # history_lookup pages are never capped: the tool bounds them
)


@tool
def get_order_status(order_id: str) -> str:
    """Current status and recent tracking scans of an order, by its id (like ORD-1042)."""
    scans = "\n".join(
        f"- day {day}: scanned at the {hub} hub"
        for day, hub in enumerate(
            ("Memphis TN", "Louisville KY", "Columbus OH", "Pittsburgh PA"), 1
        )
    )
    return f"Order {order_id}: in transit, delivery expected in 2 business days.\n{scans}"


def history_store() -> SQLiteHistoryStore:
    path = Path(
        os.environ.get("CTX_HISTORY_DB") or Path(tempfile.gettempdir()) / "ctx-history.sqlite"
    )
    store = SQLiteHistoryStore.from_path(path)
    store.setup()
    return store


def build_graph() -> StateGraph:
    return create_context_agent(
        MeteringChatModel(replies=[tool_agent_reply]),
        [get_order_status],
        store=history_store(),
        config=CONFIG,
    )


graph = build_graph().compile()
