"""A small agent run in a subprocess by the crash-recovery tests: it can SIGKILL itself at a
chosen step of the compaction commit protocol."""

from __future__ import annotations

import os
import signal
import sys

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from ctx_langgraph.budget import TiktokenCounter, make_budget_node, make_budget_router
from ctx_langgraph.compaction.node import make_compact_node
from ctx_langgraph.config import ContextConfig
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.state import ContextState, unpack
from ctx_langgraph.testing import MeteringChatModel

CONFIG = ContextConfig(
    context_window=2_000,
    output_reserve=400,
    trigger=0.8,
    target=0.5,
    keep_recent_tokens=300,
    summary_max_tokens=500,
    tool_output_cap_tokens=None,
)
COUNTER = TiktokenCounter("gpt-4o")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def build(store, saver, kill_at):
    if kill_at in ("after_candidate", "after_commit"):
        method = "create_candidate" if kill_at == "after_candidate" else "commit_candidate"
        original = getattr(store, method)

        def then_die(*args, **kwargs):
            result = original(*args, **kwargs)
            die()
            return result

        setattr(store, method, then_die)
    model = MeteringChatModel(
        replies=[lambda m: AIMessage(f"Answer about ORD-{len(m):04d}, confirmed.")]
    )

    def call_model(state):
        if (
            kill_at == "after_state"
            and unpack(state.get("context")).get("compaction", {}).get("status") == "committed"
        ):
            die()  # the compacted state was checkpointed before this node ran
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(ContextState)
    builder.add_node("ctx_budget", make_budget_node(store, config=CONFIG, counter=COUNTER))
    builder.add_node("ctx_compact", make_compact_node(store, config=CONFIG, counter=COUNTER))
    builder.add_node("model", call_model)
    builder.add_edge(START, "ctx_budget")
    builder.add_conditional_edges(
        "ctx_budget", make_budget_router("model"), ["ctx_compact", "model"]
    )
    builder.add_edge("ctx_compact", "ctx_budget")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=saver)


def main() -> None:
    folder, kill_at, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = SQLiteHistoryStore.from_path(os.path.join(folder, "history.sqlite"))
    store.setup()
    with SqliteSaver.from_conn_string(os.path.join(folder, "checkpoints.sqlite")) as saver:
        graph = build(store, saver, kill_at)
        run = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}
        for turn in range(first, last):
            graph.invoke(
                {
                    "messages": [
                        HumanMessage(
                            f"Question {turn}: status of order ORD-{turn:04d}?", id=f"q{turn}"
                        )
                    ]
                },
                run,
            )
    store.close()


if __name__ == "__main__":
    main()
