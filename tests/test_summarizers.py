"""The structured summary format and the summarizers: round trips, validation, exact key facts,
corrections, caps, determinism, and the LLM summarizer's prompt, tags and output cap on the wire."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from dataclasses import replace
from typing import Any

import fake_providers as fp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_anthropic import ChatAnthropic
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI
from pydantic import PrivateAttr

from ctx_langgraph.budget import ApproximateCounter, TiktokenCounter
from ctx_langgraph.compaction import (
    REQUIRED_SECTIONS,
    SUMMARY_FORMAT_VERSION,
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    SummaryDocument,
    SummaryItem,
    SummaryRequest,
    validate_summary,
)
from ctx_langgraph.compaction.facts import fact_rank
from ctx_langgraph.compaction.format import NONE_MARKER, clean_text, required_sections
from ctx_langgraph.compaction.summary_lines import SEQ_GROUP as _SEQS
from ctx_langgraph.errors import ContextManagementError, SummaryFormatError
from ctx_langgraph.history import HistoryEvent, KeyFact, SQLiteHistoryStore
from ctx_langgraph.history.rows import expand_record, message_to_row
from ctx_langgraph.usage.callbacks import purpose_of

TIKTOKEN = TiktokenCounter("gpt-4o")
APPROX = ApproximateCounter("claude-sonnet-4-5")
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def event(seq: int, message: BaseMessage) -> HistoryEvent:
    """A history event as the store would read it back, built without a database."""
    row = message_to_row(message.model_copy(update={"id": message.id or f"m{seq}"}))
    return HistoryEvent(
        seq=seq,
        event_id=row.event_id,
        branch="main",
        role=row.role,
        name=row.name,
        content=expand_record(json.loads(row.content_json), row.text),
        text=row.text,
        tool_call_ids=row.tool_call_ids,
        tool_names=row.tool_names,
        revision=1,
        visible=True,
        created_at=T0,
    )


def events_of(messages: list[BaseMessage], start: int = 1) -> list[HistoryEvent]:
    return [event(start + i, message) for i, message in enumerate(messages)]


def request(events, previous=None, cap=4000, counter=TIKTOKEN, covered=None) -> SummaryRequest:
    covered = covered if covered is not None else (events[-1].seq if events else 0)
    return SummaryRequest(previous, events, covered, cap_tokens=cap, counter=counter)


def summarize(events, **kw) -> SummaryDocument:
    return SummaryDocument.parse(ExtractiveSummarizer().summarize(request(events, **kw)))


def facts_by_text(document: SummaryDocument) -> dict[str, KeyFact]:
    return {fact.text: fact for fact in document.key_facts}


# ----------------------------------------------------------------------------- format


def representable(text: str) -> bool:
    """Texts the format can carry exactly: one clean line, not a reserved marker."""
    return (
        bool(text)
        and clean_text(text) == text
        and text != NONE_MARKER
        and _SEQS.search(text) is None
        and "(supersedes:" not in text.lower()
    )


TEXT = st.text(
    alphabet=st.characters(
        codec="utf-8", categories=("L", "N", "P", "S", "Zs"), exclude_characters="\x85\xa0"
    ),
    min_size=1,
    max_size=40,
).filter(representable)
SEQS = st.lists(st.integers(0, 10**6), max_size=4).map(tuple)
ITEMS = st.lists(st.builds(SummaryItem, TEXT, SEQS, st.none() | TEXT), max_size=4).map(tuple)
KIND = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,10}( [A-Za-z0-9_-]{1,8})?", fullmatch=True)
FACTS = st.lists(st.builds(KeyFact, TEXT, st.integers(0, 10**6), KIND), max_size=5).map(tuple)
DOCUMENTS = st.builds(
    SummaryDocument,
    goal=st.just("") | TEXT,
    constraints=ITEMS,
    done=ITEMS,
    failed=ITEMS,
    decisions=ITEMS,
    open_questions=ITEMS,
    next_steps=ITEMS,
    key_facts=FACTS,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS)
def test_any_document_round_trips_through_render_and_parse(document):
    text = document.render()
    assert SummaryDocument.parse(text) == document
    assert SummaryDocument.parse(text).render() == text


def test_render_v2_has_every_heading_in_order_and_marks_empty_sections():
    text = SummaryDocument(version=2).render()
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert tuple(headings) == REQUIRED_SECTIONS
    assert text.startswith("# Context summary (format v2)\n")
    assert text.count(f"- {NONE_MARKER}") == len(REQUIRED_SECTIONS)
    assert SummaryDocument.parse(text) == SummaryDocument(version=2)


def test_render_leaves_out_empty_sections_and_keeps_the_order():
    document = SummaryDocument(
        goal="Ship it",
        decisions=(SummaryItem("Use Postgres", (4,)),),
        key_facts=(KeyFact("ORD-7", 2, "id"),),
    )
    text = document.render()
    assert text.startswith(f"# Context summary (format v{SUMMARY_FORMAT_VERSION})\n")
    assert re.findall(r"^## (.+)$", text, flags=re.M) == ["Goal", "Decisions", "Key facts"]
    assert NONE_MARKER not in text
    assert SummaryDocument.parse(text) == document
    assert SummaryDocument().render() == f"# Context summary (format v{SUMMARY_FORMAT_VERSION})"
    assert SummaryDocument.parse(SummaryDocument().render()) == SummaryDocument()
    # the sections it leaves out cost nothing: the same content renders shorter than in v2
    v2 = replace(document, version=2).render()
    assert TIKTOKEN.count_text(text) < TIKTOKEN.count_text(v2) - 20


def test_a_text_without_title_must_have_every_section():
    untitled = SummaryDocument(goal="g").render().split("\n", 1)[1]
    with pytest.raises(SummaryFormatError, match="missing section"):
        SummaryDocument.parse(untitled)


def test_render_formats_seqs_supersedes_and_facts():
    document = SummaryDocument(
        constraints=(SummaryItem("use Postgres, not MySQL", (55,), supersedes="use MySQL"),),
        done=(SummaryItem("refunded the order", (12, 40)),),
        key_facts=(KeyFact("INV-2023-0042", 12, "id", "m12"),),
    )
    text = document.render()
    assert "- use Postgres, not MySQL (supersedes: use MySQL) [seq 55]" in text
    assert "- refunded the order [seq 12, 40]" in text
    assert "- id: INV-2023-0042 [seq 12]" in text
    # the event id lives on the checkpoint, not in the text
    assert SummaryDocument.parse(text).key_facts == (KeyFact("INV-2023-0042", 12, "id"),)


def test_items_are_normalized_to_one_line_and_must_not_be_empty():
    assert SummaryItem("  two\n lines ", [3, 4]) == SummaryItem("two lines", (3, 4))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        SummaryItem(" \n ")
    with pytest.raises(ValueError, match="negative"):
        SummaryItem("x", (-1,))


def test_parse_tolerates_model_output():
    text = """Here is the updated summary:

    #  Context summary (format v1)
    ## goal:
      Book   a flight to Oslo
    **Constraints and preferences**
    * Window seat please
    + Use the corporate card (supersedes: use a personal card)   [seq 7,9]
    ## Done
    1. Searched flights [Seq: 3]
    2) Compared prices
    ### Failed attempts
    -   (none)
    ## Decisions
    ## Notes the model added
    - this section is not part of the format and is ignored
    ## Open questions
    Is a return flight needed?
    ## Next steps
    - (none)
    ## Key facts
    * date: 14 June 2023 [seq 4]
    - https://example.com/booking/7 (seq 5)
    - Customer email: ann@example.com [seq 2]
    """
    document = SummaryDocument.parse(text)
    assert document.goal == "Book a flight to Oslo"
    assert document.constraints == (
        SummaryItem("Window seat please"),
        SummaryItem("Use the corporate card", (7, 9), supersedes="use a personal card"),
    )
    assert document.done == (SummaryItem("Searched flights", (3,)), SummaryItem("Compared prices"))
    assert document.failed == document.decisions == document.next_steps == ()
    assert document.open_questions == (SummaryItem("Is a return flight needed?"),)
    assert document.key_facts == (
        KeyFact("14 June 2023", 4, "date"),
        KeyFact("https://example.com/booking/7", 5, "fact"),
        KeyFact("ann@example.com", 2, "Customer email"),
    )


LINES = st.lists(
    st.sampled_from([f"## {h}" for h in REQUIRED_SECTIONS] + ["# Context summary (format v1)"])
    | st.text(max_size=30).map(lambda t: "- " + t)
    | st.text(max_size=30),
    max_size=30,
)


@settings(max_examples=300)
@given(LINES)
def test_parse_raises_only_summary_format_errors(lines):
    try:
        document = SummaryDocument.parse("\n".join(lines))
    except SummaryFormatError:
        return
    assert SummaryDocument.parse(document.render()) == document


@pytest.mark.parametrize("missing", REQUIRED_SECTIONS)
def test_parse_names_the_missing_section(missing):
    text = SummaryDocument(goal="g", version=2).render().replace(f"## {missing}\n", "")
    with pytest.raises(SummaryFormatError, match=re.escape(repr(missing))) as caught:
        SummaryDocument.parse(text)
    assert caught.value.section == missing
    assert isinstance(caught.value, ContextManagementError) and isinstance(caught.value, ValueError)


def test_parse_lists_every_missing_section():
    with pytest.raises(SummaryFormatError) as caught:
        SummaryDocument.parse("## Goal\n- g\n## Done\n- (none)")
    message = str(caught.value)
    for heading in set(REQUIRED_SECTIONS) - {"Goal", "Done"}:
        assert repr(heading) in message


def test_parse_rejects_a_key_fact_without_seq_naming_the_line():
    text = SummaryDocument(key_facts=(KeyFact("A-1", 1, "id"),)).render()
    text += "\n- id: ORD-77"
    with pytest.raises(SummaryFormatError, match="ORD-77") as caught:
        SummaryDocument.parse(text)
    assert caught.value.line == len(text.splitlines())
    assert caught.value.section == "Key facts"


def test_a_runaway_bad_line_is_quoted_shortly():
    text = (
        SummaryDocument(version=2)
        .render()
        .replace("## Key facts\n- (none)", "## Key facts\n- " + "pad " * 500)
    )
    with pytest.raises(SummaryFormatError) as caught:
        SummaryDocument.parse(text)
    assert len(str(caught.value)) < 300


def test_parse_rejects_repeated_sections_and_other_versions():
    text = SummaryDocument(version=2).render()
    with pytest.raises(SummaryFormatError, match="'Done' appears twice"):
        SummaryDocument.parse(text + "\n## Done\n- again")
    future = SUMMARY_FORMAT_VERSION + 1
    with pytest.raises(
        SummaryFormatError, match=f"format v{future}; this version reads v1, v2, v3"
    ):
        SummaryDocument.parse(text.replace("(format v2)", f"(format v{future})"))


# ----------------------------------------------------------------------------- validation


def valid_text(version: int = SUMMARY_FORMAT_VERSION) -> str:
    return SummaryDocument(
        goal="Refund the order",
        done=(SummaryItem("Looked up the order", (3,)),),
        key_facts=(KeyFact("ORD-1", 2, "id"), KeyFact("$40.00", 9, "amount")),
        version=version,
    ).render()


def test_validate_accepts_a_good_summary():
    assert (
        validate_summary(valid_text(), cap_tokens=500, counter=TIKTOKEN, covered_through_seq=9)
        == []
    )


def test_validate_reports_empty_text():
    for text in ("", "  \n "):
        assert validate_summary(text, cap_tokens=500, counter=TIKTOKEN, covered_through_seq=9) == [
            "the summary is empty"
        ]


def test_validate_reports_the_real_length_over_the_cap():
    tokens = TIKTOKEN.count_text(valid_text())
    [problem] = validate_summary(
        valid_text(), cap_tokens=tokens - 1, counter=TIKTOKEN, covered_through_seq=9
    )
    assert f"{tokens:,} tokens" in problem and f"cap of {tokens - 1:,}" in problem
    assert (
        validate_summary(valid_text(), cap_tokens=tokens, counter=TIKTOKEN, covered_through_seq=9)
        == []
    )


def test_validate_reports_missing_sections_and_truncation():
    truncated = valid_text(version=2).split("## Next steps")[0]
    [problem] = validate_summary(truncated, cap_tokens=500, counter=TIKTOKEN, covered_through_seq=9)
    assert "'Next steps'" in problem and "'Key facts'" in problem


def test_validate_reports_key_facts_outside_the_covered_range():
    problems = validate_summary(
        valid_text(), cap_tokens=500, counter=TIKTOKEN, covered_through_seq=8
    )
    assert problems == ["key fact $40.00 cites seq 9, outside the covered range 1..8"]
    problems = validate_summary(
        valid_text(), cap_tokens=500, counter=TIKTOKEN, covered_through_seq=9, first_seq=3
    )
    assert problems == ["key fact ORD-1 cites seq 2, outside the covered range 3..9"]


def test_validate_reports_several_problems_at_once():
    problems = validate_summary(valid_text(), cap_tokens=5, counter=TIKTOKEN, covered_through_seq=1)
    assert len(problems) == 3  # length, and both facts beyond seq 1


# ----------------------------------------------------------------------------- extractive

PLANTED = {
    # seq: (text of the user message, [(kind, fact)])
    17: (
        "Please check invoice INV-2023-0042 and ticket #4711.",
        [("id", "INV-2023-0042"), ("id", "#4711")],
    ),
    41: (
        "The request id is 123e4567-e89b-12d3-a456-426614174000 and the booking ref is X7K2PQ.",
        [("id", "123e4567-e89b-12d3-a456-426614174000"), ("id", "X7K2PQ")],
    ),
    63: (
        "The refund is $1,250.00, the fee 19.99 EUR and the tip €5.",
        [("amount", "$1,250.00"), ("amount", "19.99 EUR"), ("amount", "€5")],
    ),
    88: (
        "It shipped on 2023-06-14, arrives 14 June, and the contract says June 14, 2023.",
        [("date", "2023-06-14"), ("date", "14 June"), ("date", "June 14, 2023")],
    ),
    121: (
        "The call was at 4:04 pm on 20 January, 2023.",
        [("date", "4:04 pm on 20 January, 2023")],
    ),
    150: (
        "The config is /etc/nginx/nginx.conf and the entry point src/app/main.py.",
        [("path", "/etc/nginx/nginx.conf"), ("path", "src/app/main.py")],
    ),
    199: (
        "The dashboard is https://example.com/orders/42?view=full and mail ann.lee@example.com.",
        [("url", "https://example.com/orders/42?view=full"), ("email", "ann.lee@example.com")],
    ),
    251: ("The account manager is Margaret Thompson.", [("name", "Margaret Thompson")]),
}
FILLER_HUMAN = [
    "can you look into this for me",
    "ok thanks, that helps a lot",
    "what about the other thing we discussed",
    "sounds good to me",
]
FILLER_AI = [
    "I looked into it and everything is in order.",
    "Sure, I can help with that.",
    "Here is what I found so far.",
]


def conversation(length: int = 300, seed: int = 7) -> list[BaseMessage]:
    """A long conversation with human turns, answers, tool calls and results; planted facts."""
    rng = random.Random(seed)
    messages: list[BaseMessage] = []
    while len(messages) < length:
        seq = len(messages) + 1
        if seq in PLANTED:
            messages.append(HumanMessage(PLANTED[seq][0]))
            continue
        kind = rng.choice(["human", "ai", "tool", "tool"])
        if kind == "tool" and seq + 1 not in PLANTED and len(messages) + 2 <= length:
            call_id = f"call_{seq}"
            messages.append(
                AIMessage(
                    "",
                    tool_calls=[{"name": "search_notes", "args": {"q": "status"}, "id": call_id}],
                )
            )
            messages.append(ToolMessage("no new notes", tool_call_id=call_id, name="search_notes"))
        elif kind == "human":
            messages.append(HumanMessage(rng.choice(FILLER_HUMAN)))
        else:
            messages.append(AIMessage(rng.choice(FILLER_AI)))
    return messages[:length]


def test_planted_facts_in_a_300_event_conversation_are_kept_exactly_with_their_seq():
    events = events_of(conversation())
    assert len(events) == 300
    document = ExtractiveSummarizer().summarize_document(request(events, cap=4000))
    ids = {event.seq: event.event_id for event in events}
    assert SummaryDocument.parse(document.render()).with_event_ids(ids) == document
    facts = {(fact.kind, fact.text): fact for fact in document.key_facts}
    for seq, (_, planted) in PLANTED.items():
        for kind, text in planted:
            fact = facts[(kind, text)]
            assert fact.source_seq == seq, (kind, text)
            assert fact.source_event_id == events[seq - 1].event_id
    assert TIKTOKEN.count_text(ExtractiveSummarizer().summarize(request(events, cap=4000))) <= 4000


def test_events_read_from_the_store_summarize_like_hand_built_ones():
    messages = conversation(60)
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        store.append(
            "t",
            [m.model_copy(update={"id": f"m{i + 1}"}) for i, m in enumerate(messages)],
            created_at=T0,
        )
        stored = store.read_events("t")
    built = events_of(messages)
    summarizer = ExtractiveSummarizer()
    assert summarizer.summarize(request(stored)) == summarizer.summarize(request(built))


def test_a_late_user_correction_supersedes_the_earlier_constraint():
    messages = [
        HumanMessage(
            "Please migrate the orders service. We must use MySQL for the orders database."
        ),
        HumanMessage("Never deploy on Fridays."),
        *conversation(40)[2:],
        HumanMessage("Actually, use Postgres for the orders database, not MySQL."),
    ]
    document = summarize(events_of(messages))
    texts = [item.text for item in document.constraints]
    assert "We must use MySQL for the orders database." not in texts
    assert "Never deploy on Fridays." in texts
    [correction] = [item for item in document.constraints if item.supersedes]
    assert correction.text == "Actually, use Postgres for the orders database, not MySQL."
    assert correction.supersedes == "We must use MySQL for the orders database."
    assert correction.source_seqs == (len(messages),)


@pytest.mark.parametrize(
    "correction",
    [
        "Correction: the report should go out weekly.",
        "Instead of daily reports, send weekly reports.",
        "Not daily reports but weekly ones.",
        "Change the report schedule to weekly.",
    ],
)
def test_correction_phrasings_supersede(correction):
    messages = [HumanMessage("Always send the report daily."), HumanMessage(correction)]
    document = summarize(events_of(messages))
    assert [(item.text, item.supersedes) for item in document.constraints] == [
        (correction, "Always send the report daily.")
    ]


def test_a_correction_in_a_later_span_supersedes_a_constraint_of_the_previous_summary():
    first = events_of([HumanMessage("We must use MySQL for everything in this project.")])
    previous = summarize(first)
    later = events_of([HumanMessage("Use Postgres instead of MySQL.")], start=2)
    document = summarize(later, previous=previous)
    assert [(i.text, i.supersedes) for i in document.constraints] == [
        ("Use Postgres instead of MySQL.", "We must use MySQL for everything in this project.")
    ]


def test_failed_tool_attempts_are_listed_with_why():
    messages = [
        HumanMessage("Find order ORD-1 for me please, it is urgent."),
        AIMessage("", tool_calls=[{"name": "lookup_order", "args": {"id": "ORD-1"}, "id": "c1"}]),
        ToolMessage(
            "upstream timeout after 30s", tool_call_id="c1", name="lookup_order", status="error"
        ),
        AIMessage("", tool_calls=[{"name": "search_db", "args": {"q": "ORD-1"}, "id": "c2"}]),
        ToolMessage(
            "rows: 0\nquery failed: permission denied", tool_call_id="c2", name="search_db"
        ),
        AIMessage("", tool_calls=[{"name": "read_cache", "args": {}, "id": "c3"}]),
        ToolMessage("ORD-1 status shipped", tool_call_id="c3", name="read_cache"),
    ]
    document = summarize(events_of(messages))
    assert [(item.text, item.source_seqs) for item in document.failed] == [
        ('lookup_order({"id": "ORD-1"}) failed: upstream timeout after 30s', (3,)),
        ('search_db({"q": "ORD-1"}) failed: query failed: permission denied', (5,)),
    ]
    assert (
        SummaryItem("read_cache: ORD-1 status shipped", (7,), day="Mon 1 January 2024")
        in document.done
    )


def test_decisions_next_steps_done_and_open_questions():
    messages = [
        HumanMessage("Which database should the new service use?"),
        AIMessage(
            "We decided to go with Postgres because it has JSONB. Next I will write the schema."
        ),
        HumanMessage("Is the migration reversible?"),
    ]
    document = summarize(events_of(messages))
    assert [i.text for i in document.decisions] == [
        "We decided to go with Postgres because it has JSONB."
    ]
    assert [i.text for i in document.next_steps] == ["Next I will write the schema."]
    assert [i.text for i in document.done] == [
        "We decided to go with Postgres because it has JSONB."
    ]
    # the first question was answered in the span; the last one was not
    assert [i.text for i in document.open_questions] == ["Is the migration reversible?"]
    assert document.goal == "Which database should the new service use?"


def test_merging_with_a_previous_summary_keeps_every_previous_key_fact():
    events = events_of(conversation())
    previous = summarize(events[:150], cap=3000)
    assert len(previous.key_facts) >= 10
    document = summarize(events[150:], previous=previous, cap=3000)
    for fact in previous.key_facts:
        assert fact in document.key_facts
    assert document.goal == previous.goal
    # the merged summary equals a summary of the whole span, as far as key facts go
    whole = summarize(events, cap=3000)
    assert {(f.kind, f.text, f.source_seq) for f in whole.key_facts} == {
        (f.kind, f.text, f.source_seq) for f in document.key_facts
    }


def test_under_a_tight_cap_the_newest_facts_of_equal_rank_survive_the_oldest_go_first():
    old = events_of([HumanMessage(f"Remember ticket OLD-{i}.") for i in range(1, 11)])
    previous = summarize(old)
    new = events_of(
        [HumanMessage(f"Also ticket NEW-{i} matters.") for i in range(1, 200)], start=11
    )
    text = ExtractiveSummarizer().summarize(request(new, previous=previous, cap=400))
    assert TIKTOKEN.count_text(text) <= 400
    document = SummaryDocument.parse(text)
    assert not [f for f in document.key_facts if f.text.startswith("OLD-")]  # oldest went first
    kept_new = sorted(int(f.text[4:]) for f in document.key_facts if f.text.startswith("NEW-"))
    assert kept_new == list(range(200 - len(kept_new), 200))  # the newest kept, none skipped
    assert len(kept_new) >= 10
    assert document.constraints == document.done == ()  # items went before facts


def test_facts_are_deduplicated_keeping_the_earliest_seq():
    messages = [HumanMessage("Order ORD-9 is late."), AIMessage("ORD-9 is on its way.")]
    previous = summarize(events_of(messages))
    later = events_of([HumanMessage("Any news on ORD-9?")], start=3)
    document = summarize(later, previous=previous)
    assert [(f.text, f.source_seq) for f in document.key_facts] == [("ORD-9", 1)]


def test_a_cap_below_an_empty_summary_is_an_error():
    with pytest.raises(ValueError, match="cap_tokens=5"):
        ExtractiveSummarizer().summarize(request(events_of(conversation(20)), cap=5))


EVENT_KINDS = ["human", "constraint", "question", "ai", "decision", "tool", "error", "facts"]


def messages_from(kinds: list[str], filler: str) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for index, kind in enumerate(kinds):
        text = filler
        if kind == "human":
            messages.append(
                HumanMessage(f"Let us work on task {index} with Dana Scully and {text}")
            )
        elif kind == "constraint":
            messages.append(HumanMessage(f"You must keep {text} in mind for step {index}."))
        elif kind == "question":
            messages.append(HumanMessage(f"Where is file {index}?"))
        elif kind == "ai":
            messages.append(AIMessage(f"Done with step {index}: {text}."))
        elif kind == "decision":
            messages.append(AIMessage(f"I decided to use plan {index}. Next I will check {text}."))
        elif kind in ("tool", "error"):
            call = f"c{index}"
            messages.append(
                AIMessage("", tool_calls=[{"name": "run", "args": {"n": index}, "id": call}])
            )
            status = "error" if kind == "error" else "success"
            messages.append(ToolMessage(f"result {index} {text}", tool_call_id=call, status=status))
        else:
            messages.append(
                HumanMessage(
                    f"Ref CASE-{index}, ${index},000.50 due 2024-0{index % 9 + 1}-1{index % 10} "
                    f"at /var/data/f{index}.csv https://x.example/{index}"
                )
            )
    return messages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    length=st.integers(0, 160),
    seed=st.integers(0, 2**32),
    filler=st.text(alphabet="abcdefgh ijklmnop", min_size=0, max_size=300),
    cap=st.integers(200, 2000),
    counter=st.sampled_from([TIKTOKEN, APPROX]),
    split=st.floats(0, 1),
)
def test_output_always_fits_the_cap_and_validates(length, seed, filler, cap, counter, split):
    kinds = random.Random(seed).choices(EVENT_KINDS, k=length)
    events = events_of(messages_from(kinds, filler))
    cut = int(len(events) * split)
    summarizer = ExtractiveSummarizer()
    first = request(events[:cut], cap=cap, counter=counter, covered=cut)
    previous = SummaryDocument.parse(summarizer.summarize(first))
    last = request(events[cut:], previous=previous, cap=cap, counter=counter, covered=len(events))
    text = summarizer.summarize(last)
    assert counter.count_text(text) <= cap
    assert (
        validate_summary(text, cap_tokens=cap, counter=counter, covered_through_seq=len(events))
        == []
    )
    # the oldest facts of a rank go first: no dropped fact is newer than a kept one of its rank
    # (a fact a kept statement quotes stays, whatever its age)
    untrimmed = summarizer.summarize(
        SummaryRequest(previous, last.events, len(events), 10**6, counter)
    )
    trimmed, every = SummaryDocument.parse(text), SummaryDocument.parse(untrimmed)
    quoted = set(trimmed.key_facts[len(trimmed.listed_facts) :])
    kept = {(f.kind, f.text) for f in trimmed.key_facts}
    for rank in {fact_rank(f) for f in every.key_facts}:
        same = [f for f in every.key_facts if fact_rank(f) == rank]
        dropped = [f.source_seq for f in same if (f.kind, f.text) not in kept]
        held = [f.source_seq for f in trimmed.key_facts if fact_rank(f) == rank and f not in quoted]
        assert not dropped or not held or max(dropped) <= min(held)


def test_extractive_summaries_are_deterministic():
    events = events_of(conversation())
    previous = summarize(events[:100])
    texts = {
        ExtractiveSummarizer().summarize(request(events[100:], previous=previous, cap=cap))
        for cap in (900, 900, 900)
    }
    assert len(texts) == 1
    rebuilt = events_of(conversation())[100:]
    assert ExtractiveSummarizer().summarize(request(rebuilt, previous=previous, cap=900)) in texts


async def test_async_extractive_equals_sync():
    events = events_of(conversation(50))
    summarizer = ExtractiveSummarizer()
    assert await summarizer.asummarize(request(events)) == summarizer.summarize(request(events))


def test_max_items_per_section_keeps_the_newest():
    messages = [HumanMessage(f"You must remember rule {i} always.") for i in range(1, 21)]
    document = SummaryDocument.parse(
        ExtractiveSummarizer(max_items_per_section=5).summarize(request(events_of(messages)))
    )
    assert [i.source_seqs for i in document.constraints] == [(16,), (17,), (18,), (19,), (20,)]


def test_summary_request_checks_its_span():
    events = events_of(conversation(5))
    with pytest.raises(ValueError, match="increasing seq order"):
        SummaryRequest(None, [events[1], events[0]], 5, 100, TIKTOKEN)
    with pytest.raises(ValueError, match="beyond covered_through_seq"):
        SummaryRequest(None, events, 3, 100, TIKTOKEN)
    with pytest.raises(ValueError, match="cap_tokens must be positive"):
        SummaryRequest(None, events, 5, 0, TIKTOKEN)


def test_summarizers_satisfy_the_protocol():
    extractive = ExtractiveSummarizer()
    llm = LLMSummarizer(RecordingChatModel(reply="x"), window_tokens=8000)
    assert isinstance(extractive, Summarizer) and isinstance(llm, Summarizer)
    assert (extractive.id, extractive.window_tokens) == ("extractive-v1", None)
    assert (llm.id, llm.window_tokens) == ("llm:recording-1", 8000)


# ----------------------------------------------------------------------------- LLM


class RecordingChatModel(BaseChatModel):
    """Replies with a fixed text and records the messages, kwargs, tags and metadata of each call."""

    reply: str
    model_name: str = "recording-1"
    _calls: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    @property
    def calls(self) -> list[dict[str, Any]]:
        return self._calls

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls.append(
            {
                "messages": messages,
                "kwargs": kwargs,
                "tags": run_manager.tags if run_manager else [],
                "metadata": run_manager.metadata if run_manager else {},
            }
        )
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])


class KwargsRefusingChatModel(RecordingChatModel):
    """A fake whose ``_generate`` takes no extra keyword arguments."""

    def _generate(self, messages, stop=None, run_manager=None):  # type: ignore[override]
        return super()._generate(messages, stop, run_manager)


class StartRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.starts: list[tuple[list[str], dict[str, Any]]] = []

    def on_chat_model_start(self, serialized, messages, *, tags=None, metadata=None, **kwargs):
        self.starts.append((list(tags or []), dict(metadata or {})))


def llm_request(cap=700):
    events = events_of(
        [
            HumanMessage("Refund order ORD-1042, please."),
            AIMessage(
                "", tool_calls=[{"name": "lookup_order", "args": {"id": "ORD-1042"}, "id": "c1"}]
            ),
            ToolMessage("timeout", tool_call_id="c1", name="lookup_order", status="error"),
            AIMessage("The lookup timed out.\nI will retry."),
        ],
        start=11,
    )
    previous = SummaryDocument(
        goal="Help the customer with billing",
        constraints=(SummaryItem("Reply in English", (2,)),),
        key_facts=(KeyFact("ann@example.com", 3, "email"),),
    )
    return SummaryRequest(previous, events, 14, cap_tokens=cap, counter=TIKTOKEN)


def test_llm_prompt_has_the_format_the_previous_summary_and_every_event_with_its_seq():
    model = RecordingChatModel(reply=valid_text())
    req = llm_request()
    assert LLMSummarizer(model).summarize(req) == valid_text()
    [call] = model.calls
    system, user = call["messages"]
    assert isinstance(system, SystemMessage) and isinstance(user, HumanMessage)
    # the prompt spells out every section of the format version it asks for
    version = int(re.search(r"\(format v(\d+)\)", system.text).group(1))
    for heading in required_sections(version):
        assert f"## {heading}" in system.text
    assert "(supersedes:" in system.text and "[seq N]" in system.text
    assert req.previous is not None and req.previous.render() in user.text
    # each event's header carries its seq and its day, as the summary cites them
    assert re.search(
        r"^\[seq 11, (Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{1,2} [A-Z][a-z]+ \d{4}\] human: "
        r"Refund order ORD-1042, please\.$",
        user.text,
        re.M,
    )
    day = re.search(r"^\[seq 11, ([^\]]+)\]", user.text, re.M).group(1)
    assert f'[seq 12, {day}] ai: lookup_order({{"id":"ORD-1042"}})' in user.text
    assert f"[seq 13, {day}] tool (lookup_order) [status: error]: timeout" in user.text
    assert f"[seq 14, {day}] ai: The lookup timed out.\n  I will retry." in user.text
    assert "through seq 14" in user.text and "at most 700 tokens" in user.text


def test_llm_call_binds_the_output_cap_and_is_tagged_as_summary():
    model = RecordingChatModel(reply=valid_text())
    LLMSummarizer(model).summarize(llm_request(cap=700))
    LLMSummarizer(model, max_output_tokens=300).summarize(llm_request(cap=700))
    first, second = model.calls
    assert first["kwargs"]["max_tokens"] == 700 and second["kwargs"]["max_tokens"] == 300
    assert "ctx:summary" in first["tags"] and first["metadata"]["ctx_purpose"] == "summary"


def test_llm_call_keeps_the_callers_run_config_and_the_ledger_sees_a_summary():
    model = RecordingChatModel(reply=valid_text())
    recorder = StartRecorder()
    summarizer = LLMSummarizer(model)
    node = RunnableLambda(lambda _: summarizer.summarize(llm_request()))
    node.invoke(
        None, config={"callbacks": [recorder], "metadata": {"thread_id": "t-9"}, "tags": ["node"]}
    )
    [(tags, metadata)] = recorder.starts
    assert metadata["thread_id"] == "t-9" and "node" in tags
    assert purpose_of(tags, metadata, "answer") == "summary"


async def test_llm_async_call_is_capped_and_tagged():
    model = RecordingChatModel(reply=f"```markdown\n{valid_text()}\n```")
    assert await LLMSummarizer(model).asummarize(llm_request(cap=500)) == valid_text()
    [call] = model.calls
    assert call["kwargs"]["max_tokens"] == 500 and "ctx:summary" in call["tags"]


def test_llm_falls_back_when_the_model_takes_no_max_tokens(caplog):
    model = KwargsRefusingChatModel(reply=valid_text())
    assert LLMSummarizer(model).summarize(llm_request()) == valid_text()
    assert "does not take max_tokens" in caplog.text


def test_llm_does_not_validate_its_output():
    assert LLMSummarizer(RecordingChatModel(reply="not a summary")).summarize(llm_request()) == (
        "not a summary"
    )


def test_chat_anthropic_sends_the_cap_as_max_tokens():
    with fp.serve() as server:
        server.json(
            "/v1/messages",
            fp.anthropic_message(
                "msg_s", {"input_tokens": 900, "output_tokens": 120}, text=valid_text()
            ),
        )
        model = ChatAnthropic(
            model="claude-sonnet-4-5", base_url=server.url, api_key="test-key", max_retries=0
        )
        summarizer = LLMSummarizer(model)
        assert summarizer.id == "llm:claude-sonnet-4-5"
        assert summarizer.summarize(llm_request(cap=640)) == valid_text()
    [(path, body)] = server.requests
    assert path == "/v1/messages" and body["max_tokens"] == 640
    system = body["system"] if isinstance(body["system"], str) else body["system"][0]["text"]
    assert "## Key facts" in system and "[seq 11, " in body["messages"][0]["content"]


def test_chat_openai_sends_the_cap_as_max_completion_tokens():
    with fp.serve() as server:
        server.json(
            "/v1/chat/completions",
            fp.chat_completion(
                "c_s",
                {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020},
                text=valid_text(),
            ),
        )
        model = ChatOpenAI(
            model="gpt-4o-2024-08-06",
            base_url=server.url + "/v1",
            api_key="test-key",
            max_retries=0,
        )
        assert LLMSummarizer(model).summarize(llm_request(cap=640)) == valid_text()
    [(_, body)] = server.requests
    assert body["max_completion_tokens"] == 640 and "max_tokens" not in body


# ----------------------------------------------------------------------------- instructions


def _decisions_and_chatter() -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        HumanMessage("We decided the API design uses cursor pagination, not offsets.")
    ]
    for n in range(40):
        messages.append(HumanMessage(f"I went to the market on day {n} and bought {n} apples."))
        messages.append(AIMessage(f"Noted, day {n}."))
    return messages


def test_instructions_raise_the_parts_they_name_under_the_cap():
    events = events_of(_decisions_and_chatter())
    plain = ExtractiveSummarizer().summarize(request(events, cap=250))
    steered_request = replace(
        request(events, cap=250), instructions="keep the API design decisions"
    )
    steered = ExtractiveSummarizer().summarize(steered_request)
    assert "cursor pagination" not in plain  # the newest chatter wins the cap on its own
    assert "cursor pagination" in steered  # the part the instructions name outranks it
    assert TIKTOKEN.count_text(steered) <= 250
    # instructions that name nothing change nothing
    unrelated = replace(request(events, cap=250), instructions="zebra xylophone")
    assert ExtractiveSummarizer().summarize(unrelated) == plain


def test_a_chat_model_reads_the_instructions_in_its_prompt_after_the_rules():
    events = events_of(_decisions_and_chatter()[:5])
    llm = LLMSummarizer(RecordingChatModel(reply="x"))
    plain = llm.messages_for(request(events))
    steered = llm.messages_for(replace(request(events), instructions="  keep API decisions "))
    assert "<focus>" not in plain[-1].text
    assert "<focus>\nkeep API decisions\n</focus>" in steered[-1].text
    assert steered[0].text == plain[0].text  # the format and rules are unchanged
    blank = llm.messages_for(replace(request(events), instructions="   "))
    assert "<focus>" not in blank[-1].text


def test_instructions_must_be_text():
    with pytest.raises(TypeError, match="instructions must be text"):
        SummaryRequest(None, [], 0, 100, TIKTOKEN, instructions=["keep it"])  # type: ignore[arg-type]
