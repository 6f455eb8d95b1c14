"""Examples of the compaction package's internal helpers (formerly their docstring examples)."""

from __future__ import annotations

import datetime as dt

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage, message_to_dict

from ctx_langgraph.compaction.draft import shorten
from ctx_langgraph.compaction.facts import (
    corrected,
    event_facts,
    fact_rank,
    merge_facts,
    sentences,
    stated_facts,
    statement_facts,
    tool_facts,
)
from ctx_langgraph.compaction.statements import statement_of, statement_rank
from ctx_langgraph.compaction.summarize import summarized_events
from ctx_langgraph.compaction.summary_lines import KeyStatement
from ctx_langgraph.history import SQLiteHistoryStore
from ctx_langgraph.history.types import HistoryEvent, KeyFact


def test_stated_facts_in_the_order_they_appear() -> None:
    facts = stated_facts("Refund INV-2023-0042 ($40.00) for Ann Lee", 3)
    assert [(f.kind, f.text) for f in facts] == [
        ("id", "INV-2023-0042"),
        ("amount", "$40.00"),
        ("name", "Ann Lee"),
    ]


def test_tool_facts_leave_log_noise_out() -> None:
    out = "2024-03-01T10:00:00Z INFO refund ORD-77 approved\nName  City  Plan\n"
    facts = tool_facts(out, 9, "run_command")
    assert [(f.kind, f.text, f.tool) for f in facts] == [("id", "ORD-77", "run_command")]


def test_event_facts_of_a_tool_result() -> None:
    out = ToolMessage("ORD-5 | Ann Lee | shipped", tool_call_id="c1", name="search")
    event = HistoryEvent(4, "m4", "main", "tool", "search", message_to_dict(out), out.text,
                         ("c1",), ("search",), 1, True, dt.datetime(2023, 5, 8))  # fmt: skip
    facts = event_facts(event)
    assert [(f.text, f.tool, f.day) for f in facts] == [("ORD-5", "search", "Mon 8 May 2023")]


def test_sentences() -> None:
    assert sentences("Use Postgres. Not MySQL!\nThanks") == [
        "Use Postgres.",
        "Not MySQL!",
        "Thanks",
    ]


def test_corrected_marks_what_a_new_value_replaces() -> None:
    text = "Correction: the order is B-2291, not A-1172."
    kept, stale = corrected(text, stated_facts(text, 5))
    assert [(f.text, f.replaces) for f in kept] == [("B-2291", "A-1172")]
    assert stale == {"A-1172"}


def test_fact_rank() -> None:
    facts = (
        KeyFact("B-2", 9, "id", replaces="A-1"),
        KeyFact("B-2", 9, "id"),
        KeyFact("B-2", 9, "id", tool="search"),
    )
    assert [fact_rank(f) for f in facts] == [7, 4, 2]


def test_merge_facts_keeps_the_best_ranked_earliest_mention() -> None:
    merged = merge_facts(
        [
            KeyFact("ORD-9", 2, "id", tool="search"),
            KeyFact("ORD-9", 5, "id"),
            KeyFact("ORD-9", 8, "id"),
        ]
    )
    assert [(f.source_seq, f.tool) for f in merged] == [(5, None)]


def test_statement_facts_of_a_correction() -> None:
    facts = statement_facts("Use B-2291, not A-1172.", 4)
    assert [(f.text, f.replaces) for f in facts] == [("B-2291", "A-1172")]


def test_statement_rank() -> None:
    def rank(text: str) -> int | None:
        return statement_rank(KeyStatement(text, 1, "user"))

    assert rank("Correction: the order is B-2291, not A-1172.") == 6
    assert rank("We will use Postgres.") == 4
    assert rank("I went to a support group yesterday.") == 4
    assert rank("Sounds good!") is None
    assert rank("Can you check where order ORD-7 is?") == 4
    assert rank("Where is it?") is None
    assert rank("My locker code is 4471, please keep it for later.") == 5


def test_statement_of_a_human_message() -> None:
    said = HumanMessage("My order id is ORD-7, please keep it.", name="Ann")
    event = HistoryEvent(3, "m3", "main", "human", "Ann", message_to_dict(said), said.text, (),
                         (), 1, True, dt.datetime(2023, 5, 8))  # fmt: skip
    text = "My order id is ORD-7, please keep it."
    assert statement_of(event) == (KeyStatement(text, 3, "Ann", "Mon 8 May 2023"), 5)


def test_shorten_cuts_at_a_word() -> None:
    assert shorten("Please refund order ORD-1042 for Ann Lee today", 30) == "Please refund order..."


def test_summarized_events_leave_system_messages_out() -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    store.append(
        "t",
        [
            SystemMessage("You are the billing assistant.", id="s"),
            HumanMessage("Refund ORD-7", id="h"),
        ],
    )
    assert [(e.seq, e.role) for e in summarized_events(store.read_events("t"))] == [(2, "human")]
