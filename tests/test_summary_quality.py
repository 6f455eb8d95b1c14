"""What a summary keeps under its cap: priorities, recency, days, verbatim key statements, and a
format that round-trips (docs/design.md §6)."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctx_langgraph.budget import ApproximateCounter, TiktokenCounter
from ctx_langgraph.compaction import (
    ExtractiveSummarizer,
    SummaryDocument,
    SummaryItem,
    SummaryRequest,
    validate_summary,
)
from ctx_langgraph.compaction.facts import (
    RANK_CORRECTION,
    RANK_STATED,
    RANK_TOOL,
    event_facts,
    fact_rank,
    tool_facts,
)
from ctx_langgraph.compaction.format import (
    SUMMARY_FORMAT_VERSION,
    KeyStatement,
    required_sections,
)
from ctx_langgraph.compaction.statements import MAX_STATEMENT_CHARS, statement_of
from ctx_langgraph.core.dates import day_label
from ctx_langgraph.errors import SummaryFormatError
from ctx_langgraph.history import HistoryEvent, KeyFact
from ctx_langgraph.history.rows import expand_record, message_to_row

TIKTOKEN = TiktokenCounter("gpt-4o")
APPROX = ApproximateCounter("claude-sonnet-4-5")
MONDAY = dt.datetime(2023, 5, 8, 9, 30, tzinfo=dt.timezone.utc)


def event(seq: int, message: BaseMessage, when: dt.datetime = MONDAY) -> HistoryEvent:
    """A history event as the store reads it back, at the conversation time ``when``."""
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
        created_at=when,
    )


def events_of(
    messages: list[BaseMessage], start: int = 1, when: dt.datetime = MONDAY
) -> list[HistoryEvent]:
    return [event(start + i, message, when) for i, message in enumerate(messages)]


def summarize(
    events: list[HistoryEvent],
    previous: SummaryDocument | None = None,
    cap: int = 4000,
    counter=TIKTOKEN,
) -> tuple[str, SummaryDocument]:
    covered = max([e.seq for e in events], default=0)
    if previous is not None:
        covered = max([covered, *(f.source_seq for f in previous.key_facts)])
    text = ExtractiveSummarizer().summarize(SummaryRequest(previous, events, covered, cap, counter))
    return text, SummaryDocument.parse(text)


def tool_turn(seq: int, name: str, output: str, call_id: str) -> list[HistoryEvent]:
    call = AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id}])
    return [event(seq, call), event(seq + 1, ToolMessage(output, tool_call_id=call_id, name=name))]


LOG_DUMP = "\n".join(
    f"2024-03-0{d}T10:{m:02d}:00.123Z INFO  worker.sync account=ACC-{d}{m:04d} status=ok "
    f"request_id=REQ{d}{m:05d}X"
    for d in range(1, 4)
    for m in range(10)
)
TABLE = (
    "Filesystem      Size  Used Avail Use% Mounted On\n"
    "/dev/sda1        50G   31G   19G  62% /srv\n"
    "Ticket     Status  Priority  Customer Name\n"
    "TCK-1001   open    high      Glass Harbor\n"
    "TCK-1002   open    high      North Quay\n"
)


# ----------------------------------------------------------------------------- priorities


def test_tool_log_noise_is_not_a_fact():
    stamped = "2024-03-01T10:00:00.123Z INFO refund approved for ORD-77\n"
    facts = {(f.kind, f.text) for f in tool_facts(stamped + TABLE, 9, "run_command")}
    assert ("id", "ORD-77") in facts
    assert not any(kind == "date" for kind, _ in facts)  # timestamps of log lines
    assert not any(kind == "name" for kind, _ in facts)  # table headers and cells
    assert tool_facts(LOG_DUMP, 9, "run_command") == []  # a dump's rows are data, not facts
    repeated = "status=ok host=web-1 /srv/app/app.yaml\n" * 3
    assert tool_facts(repeated, 9, "run_command") == []  # a value down a column


def test_someone_addressed_is_not_a_name_stated():
    chat = "Woah Joanna! I met Ann Lee at the Grand Canyon, thanks Caroline."
    facts = event_facts(event(1, HumanMessage(chat, name="Nate")))
    assert [(f.kind, f.text) for f in facts] == [("name", "Ann Lee"), ("name", "Grand Canyon")]
    assert event_facts(event(2, HumanMessage("Yeah Mel, Wow Caroline and Bye Nate."))) == []


def test_facts_rank_corrections_then_what_people_state_then_tools():
    events = [
        event(1, HumanMessage("Correction: my order is ORD-2291, not ORD-1172.")),
        event(2, HumanMessage("The invoice is INV-2023-0042.")),
        *tool_turn(3, "search_orders", "1 order matches: ORD-5555 | shipped", "c1"),
    ]
    _, document = summarize(events)
    ranks = {f.text: fact_rank(f) for f in document.key_facts}
    assert ranks == {
        "ORD-2291": RANK_CORRECTION,
        "INV-2023-0042": RANK_STATED,
        "ORD-5555": RANK_TOOL,
    }
    assert [f.tool for f in event_facts(events[-1])] == ["search_orders"]
    assert "- id (search_orders): ORD-5555 [seq 4, Mon 8 May 2023]" in document.render()


def test_tool_log_noise_never_displaces_a_user_stated_id():
    events, seq = [], 1
    for n in range(30):  # tool outputs full of values, before and after the user's id
        if n == 10:
            said = "The customer's account id is ACC-990011, keep it handy."
            events.append(event(seq, HumanMessage(said)))
            seq += 1
        output = LOG_DUMP if n % 3 == 0 else TABLE + f"ORD-{50000 + n} | total: ${n},100.00\n"
        events += tool_turn(seq, "run_command", output, f"c{n}")
        seq += 2
    text, document = summarize(events, cap=300)
    assert TIKTOKEN.count_text(text) <= 300
    assert "ACC-990011" in {f.text for f in document.key_facts}
    assert any(f.tool == "run_command" for f in document.key_facts)  # tool values rank below
    kinds = {(f.kind, f.tool) for f in document.key_facts}
    assert ("date", "run_command") not in kinds and ("name", "run_command") not in kinds


def test_a_newer_fact_beats_an_older_one_of_equal_priority_under_pressure():
    messages = [HumanMessage(f"Remember invoice INV-2023-{n:04d} please.") for n in range(1, 80)]
    _, document = summarize(events_of(messages), cap=350)
    kept = sorted(int(f.text[-4:]) for f in document.key_facts if f.text.startswith("INV-"))
    assert kept and kept == list(range(80 - len(kept), 80))  # the newest, none skipped


def test_a_correction_survives_50_generations_and_the_old_value_never_reads_as_current():
    first = events_of(
        [HumanMessage("Correction: the refund is on order ORD-82291, not ORD-11720.")]
    )
    text, document = summarize(first, cap=400)
    seq, rng = 2, random.Random(5)
    for generation in range(50):
        batch = []
        for _ in range(8):
            value = rng.randint(100000, 999999)
            batch.append(HumanMessage(f"Note that ticket TCK-{value} was opened for Ann Lee."))
            batch.append(AIMessage(f"Logged TCK-{value} with amount ${value // 100}.00."))
        when = MONDAY + dt.timedelta(days=generation)
        text, document = summarize(events_of(batch, seq, when), previous=document, cap=400)
        seq += len(batch)
        assert TIKTOKEN.count_text(text) <= 400
        [fact] = [f for f in document.key_facts if f.text == "ORD-82291"]
        assert (fact.replaces, fact.source_seq) == ("ORD-11720", 1)
        assert all(f.text != "ORD-11720" for f in document.key_facts)
        assert "ORD-11720" not in text or "(replaces ORD-11720)" in text or "not ORD-11720" in text


def test_the_kept_facts_never_flicker_between_generations():
    document, seq, seen_dropped = None, 1, set()
    rng = random.Random(11)
    previous_facts: set[str] = set()
    for _ in range(30):
        batch = [
            HumanMessage(f"Order ORD-{rng.randint(10000, 99999)} ships to Ana Diaz today.")
            for _ in range(6)
        ]
        _, document = summarize(events_of(batch, seq), previous=document, cap=320)
        seq += len(batch)
        facts = {f.text for f in document.key_facts}
        assert not facts & seen_dropped  # once dropped, a value never comes back
        seen_dropped |= previous_facts - facts
        previous_facts = facts


# ----------------------------------------------------------------------------- statements


def test_short_statements_are_quoted_verbatim_and_whole():
    said = "My flight lands at 10:40 on Friday, please keep it for later.\n  Gate B7."
    long_text = "I wrote the whole plan down: " + "step after step, " * 30 + "done."
    events = events_of(
        [HumanMessage(said), HumanMessage(long_text), AIMessage("Sure."), HumanMessage("ok")]
    )
    text, document = summarize(events)
    [statement] = document.statements
    assert (
        statement.text == "My flight lands at 10:40 on Friday, please keep it for later. Gate B7."
    )
    assert (statement.source_seq, statement.speaker) == (1, "user")
    assert f'"{statement.text}"' in text
    assert len(long_text) > MAX_STATEMENT_CHARS and "step after step" not in text.split("## Key")[1]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cap=st.integers(120, 900), seed=st.integers(0, 10**6))
def test_a_statement_is_in_the_summary_whole_or_not_at_all(cap, seed):
    rng = random.Random(seed)
    messages = [
        HumanMessage(
            f"Note {n}: "
            + f"I moved to Lisbon last week and my new desk is D-{rng.randint(100, 999)}. "
            * rng.randint(1, 4)
        )
        for n in range(12)
    ]
    events = events_of(messages)
    text, document = summarize(events, cap=cap)
    for quoted in document.statements:
        assert quoted.text == " ".join(events[quoted.source_seq - 1].text.split())
    for source in events:
        flat = " ".join(source.text.split())
        if f'"{flat}"' not in text:  # not quoted: no quote of a part of it either
            assert not re.search(r'"' + re.escape(flat[:40]), text)


def test_relative_times_stay_as_said_with_the_day_beside_them():
    tuesday = MONDAY + dt.timedelta(days=1)
    events = [
        event(1, HumanMessage("I went to a support group yesterday, it was powerful."), MONDAY),
        event(2, HumanMessage("Last week I finally signed up for pottery classes."), tuesday),
    ]
    text, document = summarize(events)
    assert [(s.text, s.day) for s in document.statements] == [
        ("I went to a support group yesterday, it was powerful.", "Mon 8 May 2023"),
        ("Last week I finally signed up for pottery classes.", "Tue 9 May 2023"),
    ]
    assert '"I went to a support group yesterday, it was powerful." [seq 1, Mon 8 May 2023]' in text


def test_statements_of_people_and_of_the_assistant():
    named = event(1, HumanMessage("I adopted a cat named Miso last weekend!", name="Caroline"))
    quoted, rank = statement_of(named)
    assert (quoted.speaker, rank) == ("Caroline", RANK_STATED)
    prose = event(2, AIMessage("Found it: the order is ORD-7781."))
    assert statement_of(prose)[0].speaker == "assistant"
    calls = event(3, AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c"}]))
    assert statement_of(calls) is None
    assert statement_of(event(4, ToolMessage("ORD-1 shipped", tool_call_id="c"))) is None


# ----------------------------------------------------------------------------- days


def test_items_facts_and_statements_show_their_day_once_per_run():
    tuesday = MONDAY + dt.timedelta(days=1)
    events = [
        event(1, HumanMessage("Invoice INV-2023-0001 is disputed, keep it in mind."), MONDAY),
        event(2, HumanMessage("Invoice INV-2023-0002 is paid."), MONDAY),
        event(3, HumanMessage("Never email the customer before noon."), tuesday),
        event(4, HumanMessage("Ticket TCK-4410 is open."), tuesday),
    ]
    text, document = summarize(events)
    assert {f.text: f.day for f in document.key_facts} == {
        "INV-2023-0001": "Mon 8 May 2023",
        "INV-2023-0002": "Mon 8 May 2023",
        "TCK-4410": "Tue 9 May 2023",
    }
    assert document.constraints == (
        SummaryItem("Never email the customer before noon.", (3,), day="Tue 9 May 2023"),
    )
    statements = text.split("## Key statements\n")[1].split("\n\n")[0].splitlines()
    assert [line.rsplit("[", 1)[1] for line in statements] == [
        "seq 1, Mon 8 May 2023]",
        "seq 2]",
        "seq 3, Tue 9 May 2023]",
        "seq 4]",
    ]
    assert SummaryDocument.parse(text) == document


def test_a_day_label_reads_the_events_own_time():
    late = dt.datetime(2023, 12, 31, 23, 59, tzinfo=dt.timezone.utc)
    [fact] = event_facts(event(7, HumanMessage("Order ORD-31337 is late."), late))
    assert fact.day == day_label(late) == "Sun 31 December 2023"


# ----------------------------------------------------------------------------- format


V1_SUMMARY = """# Context summary (format v1)

## Goal
- Refund order ORD-1042

## Constraints and preferences
- Use Postgres, not MySQL (supersedes: We must use MySQL) [seq 5]

## Done
- (none)

## Failed attempts
- lookup_order failed: timeout [seq 7]

## Decisions
- (none)

## Open questions
- (none)

## Next steps
- (none)

## Key facts
- id: ORD-1042 [seq 3]
- amount: $40.00 (replaces $400.00) [seq 6]"""


def test_an_old_format_summary_parses_and_merges():
    previous = SummaryDocument.parse(V1_SUMMARY)
    assert previous.version == 1 and previous.statements == ()
    assert [(f.text, f.day, f.tool) for f in previous.key_facts] == [
        ("ORD-1042", None, None),
        ("$40.00", None, None),
    ]
    later = events_of([HumanMessage("Ticket TCK-5501 is about the refund.")], start=8)
    text, document = summarize(later, previous=previous)
    assert text.startswith(f"# Context summary (format v{SUMMARY_FORMAT_VERSION})")
    facts = {f.text: f for f in document.key_facts}
    assert facts["ORD-1042"].source_seq == 3 and facts["$40.00"].replaces == "$400.00"
    assert facts["TCK-5501"].day == "Mon 8 May 2023"
    assert document.constraints[0].supersedes == "We must use MySQL"
    assert validate_summary(text, cap_tokens=4000, counter=TIKTOKEN, covered_through_seq=8) == []


def test_v1_needs_no_statements_section_but_v2_does():
    assert "Key statements" not in required_sections(1)
    assert "Key statements" in required_sections(2)
    v2 = V1_SUMMARY.replace("(format v1)", "(format v2)")
    with pytest.raises(SummaryFormatError, match="'Key statements'"):
        SummaryDocument.parse(v2)
    with pytest.raises(ValueError, match="format v9"):
        required_sections(9)


def test_a_statement_implies_the_facts_it_quotes():
    day = "Mon 8 May 2023"
    statement = KeyStatement("The order is ORD-7781 for Ann Lee.", 4, "user", day)
    listed = KeyFact("$12.00", 9, "amount", day=day)
    document = SummaryDocument(
        statements=(statement,),
        key_facts=(KeyFact("ORD-7781", 4, "id", "m4", day=day), listed),
    )
    assert document.listed_facts == (listed,)
    assert [f.text for f in document.key_facts] == ["$12.00", "ORD-7781", "Ann Lee"]
    assert document.key_facts[1].source_event_id == "m4"  # kept from the fact given
    assert "ORD-7781 [seq" not in document.render()
    parsed = SummaryDocument.parse(document.render())  # (the text carries no event ids)
    assert parsed.key_facts == tuple(replace(f, source_event_id=None) for f in document.key_facts)
    assert parsed.statements == document.statements


def test_bad_days_tools_and_statements_are_clear_errors():
    with pytest.raises(ValueError, match="not a day like"):
        SummaryItem("x", (1,), day="8/5/2023")
    with pytest.raises(ValueError, match="no source seq"):
        SummaryItem("x", day="Mon 8 May 2023")
    with pytest.raises(ValueError, match="not a name"):
        SummaryDocument(key_facts=(KeyFact("x", 1, tool="a tool (with) parens"),))
    with pytest.raises(ValueError, match="non-empty"):
        KeyStatement("  ", 1)
    text = SummaryDocument().render() + '\n\n## Key statements\n- user: "no seq here"'
    with pytest.raises(SummaryFormatError, match="no \\[seq N\\]") as caught:
        SummaryDocument.parse(text)
    assert caught.value.section == "Key statements"


def test_validate_checks_the_seqs_of_statements():
    document = SummaryDocument(statements=(KeyStatement("We ship on Friday.", 40, "user"),))
    problems = validate_summary(
        document.render(), cap_tokens=500, counter=TIKTOKEN, covered_through_seq=30
    )
    assert problems == [
        "key statement 'We ship on Friday.' cites seq 40, outside the covered range 1..30"
    ]


def test_key_fact_json_reads_stored_facts_without_the_new_fields():
    stored = {"text": "ORD-7", "source_seq": 3, "kind": "id", "source_event_id": "m3"}
    assert KeyFact.from_json(stored) == KeyFact("ORD-7", 3, "id", "m3")
    fact = KeyFact("ORD-7", 3, "id", "m3", "ORD-6", "Mon 8 May 2023", "search_orders")
    assert KeyFact.from_json(json.loads(json.dumps(fact.to_json()))) == fact


# ----------------------------------------------------------------------------- property

ONE_LINE = (
    st.text(
        alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")),
        min_size=1,
        max_size=30,
    )
    .map(lambda t: " ".join(t.split()))
    .filter(bool)
)
DAYS = st.none() | st.dates(dt.date(1990, 1, 1), dt.date(2100, 1, 1)).map(day_label)
STATEMENTS = st.builds(
    KeyStatement,
    ONE_LINE,
    st.integers(0, 10**6),
    st.sampled_from(["", "user", "assistant", "Caroline", "Ann Lee"]),
    DAYS,
)
DATED_FACTS = st.builds(
    KeyFact,
    st.from_regex(r"[A-Z]{2,4}-[0-9]{2,6}", fullmatch=True),
    st.integers(0, 10**6),
    st.sampled_from(["id", "amount", "path", "name"]),
    st.none(),
    st.none() | st.from_regex(r"[A-Z]{2}-[0-9]{2}", fullmatch=True),
    DAYS,
    st.none() | st.from_regex(r"[a-z][a-z_.-]{0,12}", fullmatch=True),
)
DATED_ITEMS = st.builds(
    SummaryItem,
    st.from_regex(r"[A-Za-z][A-Za-z ,.]{0,30}[a-z.]", fullmatch=True),
    st.lists(st.integers(0, 10**6), min_size=1, max_size=3).map(tuple),
    st.none(),
    DAYS,
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(DATED_ITEMS, max_size=4),
    st.lists(STATEMENTS, max_size=4),
    st.lists(DATED_FACTS, max_size=6),
)
def test_documents_with_days_statements_and_tools_round_trip(items, statements, facts):
    document = SummaryDocument(
        done=tuple(items), statements=tuple(statements), key_facts=tuple(facts)
    )
    text = document.render()
    assert SummaryDocument.parse(text) == document
    assert SummaryDocument.parse(text).render() == text


KINDS = ["said", "asked", "correction", "event", "ai", "tool", "dump", "error", "chat"]


def messages_from(kinds: list[str], rng: random.Random) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for n, kind in enumerate(kinds):
        value = rng.randint(1000, 99999)
        if kind == "said":
            out.append(HumanMessage(f"Account ACC-{value} for Ana Diaz owes ${value}.00."))
        elif kind == "asked":
            out.append(HumanMessage(f"Can you check where order ORD-{value} is?"))
        elif kind == "correction":
            out.append(HumanMessage(f"Correction: it is TCK-{value}, not TCK-{value + 1}."))
        elif kind == "event":
            out.append(HumanMessage("I went hiking with my sister yesterday.", name="Mel"))
        elif kind == "ai":
            out.append(AIMessage(f"I decided to use plan {n}. Next I will file INV-2023-{n:04d}."))
        elif kind in ("tool", "dump", "error"):
            call = f"c{n}"
            out.append(AIMessage("", tool_calls=[{"name": "run", "args": {"n": n}, "id": call}]))
            output = LOG_DUMP if kind == "dump" else TABLE + f"/srv/app/f{value}.yaml"
            status = "error" if kind == "error" else "success"
            out.append(ToolMessage(output, tool_call_id=call, name="run", status=status))
        else:
            out.append(HumanMessage("sounds good, thanks!"))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    length=st.integers(0, 90),
    cap=st.integers(220, 1500),
    counter=st.sampled_from([TIKTOKEN, APPROX]),
    cuts=st.lists(st.floats(0, 1), max_size=4),
)
def test_a_rolling_summary_always_parses_validates_and_fits_the_cap(
    seed, length, cap, counter, cuts
):
    rng = random.Random(seed)
    messages = messages_from(rng.choices(KINDS, k=length), rng)
    events = [event(n + 1, m, MONDAY + dt.timedelta(hours=7 * n)) for n, m in enumerate(messages)]
    bounds = sorted({int(len(events) * cut) for cut in cuts} | {len(events)})
    previous, start = None, 0
    for stop in bounds:
        request = SummaryRequest(previous, events[start:stop], stop, cap, counter)
        text = ExtractiveSummarizer().summarize(request)
        assert counter.count_text(text) <= cap
        assert (
            validate_summary(text, cap_tokens=cap, counter=counter, covered_through_seq=stop) == []
        )
        previous = SummaryDocument.parse(text)
        assert previous.render() == text
        start = stop


# ----------------------------------------------------------------------------- the store


async def test_summaries_of_stored_events_carry_their_days_into_the_checkpoint(api):
    tuesday = MONDAY + dt.timedelta(days=1)
    await api.append(
        "t", [HumanMessage("Order ORD-4410 is for Ann Lee.", id="u1")], created_at=MONDAY
    )
    await api.append(
        "t", [HumanMessage("Correction: use ORD-4411, not ORD-4410.", id="u2")], created_at=tuesday
    )
    snapshot = await api.snapshot("t", 2)
    request = SummaryRequest(None, snapshot.events, 2, 600, TIKTOKEN)
    summarizer = ExtractiveSummarizer()
    sync = api.mode == "sync"
    text = summarizer.summarize(request) if sync else await summarizer.asummarize(request)
    document = SummaryDocument.parse(text).with_event_ids(
        {e.seq: e.event_id for e in snapshot.events}
    )
    await api.create_candidate(snapshot, summary_text=text, key_facts=document.key_facts)
    [candidate] = [v for v in await api.list_versions("t") if v.status == "candidate"]
    facts = {f.text: f for f in candidate.key_facts}
    assert facts["ORD-4411"] == KeyFact("ORD-4411", 2, "id", "u2", "ORD-4410", "Tue 9 May 2023")
    assert "ORD-4410" not in facts and facts["Ann Lee"].day == "Mon 8 May 2023"
    # the statement quoting the retired value went with it
    assert [(s.source_seq, s.day) for s in document.statements] == [(2, "Tue 9 May 2023")]
