"""The history lookup's queries: the store's ranking best first, each hit with its neighbouring
turns, several queries fused into one ranking, pages sized to the room left under the
compaction trigger, and a tool schema small enough to send on every request. Sync and async,
on every backend."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from typing_extensions import NotRequired, TypedDict

from ctx_langgraph import ContextConfig, ContextManagementMiddleware, create_context_agent
from ctx_langgraph.budget.counters import default_counter
from ctx_langgraph.history import HistoryEvent, HistoryStore, SQLiteHistoryStore
from ctx_langgraph.lookup import (
    DEFAULT_MAX_TOKENS,
    MAX_QUERIES,
    MIN_MAX_TOKENS,
    NOTICE,
    RANKED_ORDER,
    ROOM_MARGIN,
    make_history_lookup_tool,
)
from ctx_langgraph.lookup._ranked import fuse, passages
from ctx_langgraph.lookup._state import useful_page
from ctx_langgraph.testing import MeteringChatModel

COUNTER = default_counter("gpt-4o")
TOPICS = ("pottery", "camping", "painting", "adoption", "running", "violin")


def dialogue() -> list[BaseMessage]:
    """Sixty turns of two speakers: each topic comes up ten times, as a question and then
    an answer that does not repeat the topic's word."""
    messages: list[BaseMessage] = []
    for n in range(30):
        topic = TOPICS[n % len(TOPICS)]
        messages.append(HumanMessage(f"How is your {topic} going, round {n}?", id=f"q{n}"))
        messages.append(AIMessage(f"Great, I finished piece number {n} last week.", id=f"a{n}"))
    return messages


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def run_config(thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


async def invoke(tool: BaseTool, mode: str, args: dict[str, Any], thread: str = "t1") -> str:
    if mode == "sync":
        text = tool.invoke(args, config=run_config(thread))
    else:
        text = await tool.ainvoke(args, config=run_config(thread))
    assert isinstance(text, str)
    return text


async def page_of(
    tool: BaseTool, mode: str, args: dict[str, Any], max_tokens: int
) -> dict[str, Any]:
    text = await invoke(tool, mode, args)
    page = json.loads(text)
    assert page["notice"] == NOTICE
    assert COUNTER.count_text(text) <= max_tokens
    return page


async def all_pages(
    tool: BaseTool, mode: str, args: dict[str, Any], max_tokens: int
) -> list[list[dict[str, Any]]]:
    """Every page's records, following the cursors; each page's records in seq order."""
    page = await page_of(tool, mode, args, max_tokens)
    pages = [page["records"]]
    while page["next_cursor"]:
        page = await page_of(tool, mode, {"cursor": page["next_cursor"]}, max_tokens)
        pages.append(page["records"])
    for records in pages:
        seqs = [r["seq"] for r in records]
        assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
    return pages


def ranked_hits(
    store: HistoryStore, pages: list[list[dict[str, Any]]], ranking: list[str]
) -> list[str]:
    """The hits page after page, each page's in ``ranking``'s order (a page shows them by seq)."""
    return [h for records in pages for h in sorted(hits(store, records), key=ranking.index)]


def ids(store: HistoryStore, records: list[dict[str, Any]], thread: str = "t1") -> list[str]:
    """The event ids of records (a record shows its seq, not its id)."""
    by_seq = {event.seq: event.event_id for event in store.read_events(thread)}
    return [by_seq[record["seq"]] for record in records]


def hits(store: HistoryStore, records: list[dict[str, Any]]) -> list[str]:
    return ids(store, [record for record in records if record.get("hit")])


def marked(store: HistoryStore, records: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    return list(zip(ids(store, records), [r.get("hit", False) for r in records], strict=True))


# --------------------------------------------------------------------------- ranked pages


async def test_a_query_pages_through_the_store_ranking_with_each_hit_once(
    store: HistoryStore, mode: str
) -> None:
    store.append("t1", dialogue())
    tool = make_history_lookup_tool(store, max_tokens=400, counter=COUNTER)
    question = "How is the pottery going?"

    page = await page_of(tool, mode, {"query": question}, 400)
    assert page["order"] == RANKED_ORDER
    assert page["next_cursor"]
    pages = await all_pages(tool, mode, {"query": question}, 400)
    ranked = store.rank("t1", question, limit=100)
    ranking = [event.event_id for event in passages(ranked)]
    # the ranking, page after page (each page the next best), no hit twice
    assert ranked_hits(store, pages, ranking) == ranking
    assert sorted(ranking) == sorted(hit.event.event_id for hit in ranked)
    assert len(pages) > 2
    # the best question is on the first page, followed by its own answer; the turn before
    # it is not shown
    best = ranking[0]
    assert best.startswith("q")
    shown = marked(store, page["records"])
    at = shown.index((best, True))
    assert shown[at + 1] == ("a" + best[1:], False)
    assert (f"a{int(best[1:]) - 1}", False) not in shown


async def test_the_turn_after_a_hit_is_the_next_visible_one_and_never_the_current_turn(
    store: HistoryStore, mode: str
) -> None:
    store.append(
        "t1",
        [
            HumanMessage("First, the weather.", id="w1"),
            HumanMessage("The locker code is 4471.", id="code"),
            HumanMessage("This one is hidden.", id="hidden"),
            HumanMessage("Fine.", id="fine"),
            HumanMessage("The gate code is 9902.", id="gate"),
            AIMessage("Noted: locker code stored. " + "padding words " * 400, id="long"),
            HumanMessage("Thanks.", id="thanks"),
        ],
    )
    store.hide_events("t1", ["hidden"])
    tool = make_history_lookup_tool(store, max_tokens=300, counter=COUNTER)

    page = await page_of(tool, mode, {"query": "4471"}, 300)
    # the hidden event is skipped: the turn after is the next visible one; the turn before
    # is not shown
    assert marked(store, page["records"]) == [("code", True), ("fine", False)]
    # the long reply after a hit would not fit whole, so it is left out rather than cut
    page = await page_of(tool, mode, {"query": "9902"}, 300)
    assert marked(store, page["records"]) == [("gate", True)]
    # a hit may be cut; the turn after it never is
    page = await page_of(tool, mode, {"query": "padding"}, 300)
    [long] = [r for r in page["records"] if r["seq"] == 6]
    assert long["hit"] is True and "cut" in long
    assert long["cut"]["read_on"]["handle"] == "history:long"

    # inside a graph, the current turn (the question that asked, recorded by ctx_budget, and
    # the call) is neither a hit nor shown after one: the model has it
    question = HumanMessage("What was the 4471 code for?", id="question")
    store.delete_events("t1", ["fine", "gate", "long", "thanks"])
    store.append("t1", [question])  # the question comes right after the code
    state = {"messages": [question, lookup_reply("4471")]}
    [(page, _)] = await tool_pages(tool_graph(tool), mode, state)
    assert marked(store, page["records"]) == [("code", True)]


async def test_a_record_shown_beside_an_earlier_hit_is_marked_where_it_stands(
    store: HistoryStore, mode: str
) -> None:
    store.append(
        "t1",
        [
            HumanMessage("Where is the red kayak?", id="ask"),
            AIMessage("The red kayak is in the garage.", id="answer"),
            HumanMessage("Thanks!", id="thanks"),
            HumanMessage("Unrelated note.", id="note"),
            HumanMessage("The kayak paddle is broken.", id="paddle"),
        ],
    )
    tool = make_history_lookup_tool(store, max_tokens=1000, counter=COUNTER)
    page = await page_of(tool, mode, {"query": "red kayak"}, 1000)
    # the answer, shown after the question, is a hit too; the note before the paddle is not
    assert marked(store, page["records"]) == [
        ("ask", True),
        ("answer", True),
        ("thanks", False),
        ("paddle", True),
    ]
    assert page["next_cursor"] is None


async def test_several_queries_make_one_ranking_with_each_record_once(
    store: HistoryStore, mode: str
) -> None:
    store.append("t1", dialogue())
    tool = make_history_lookup_tool(store, max_tokens=500, counter=COUNTER)
    queries = ["pottery", "violin", "pottery"]  # a repeated search counts once

    pottery = [e.event_id for e in passages(store.rank("t1", "pottery", limit=60))]
    violin = [e.event_id for e in passages(store.rank("t1", "violin", limit=60))]
    fused = [event.event_id for event in fuse([_events(store, pottery), _events(store, violin)])]
    # reciprocal-rank fusion: the two searches' hits alternate, best first, the first
    # query's hit first at each rank
    assert fused[:4] == [pottery[0], violin[0], pottery[1], violin[1]]
    found = ranked_hits(store, await all_pages(tool, mode, {"query": queries}, 500), fused)
    assert found == fused and sorted(found) == sorted(pottery + violin)

    text = await invoke(tool, mode, {"query": ["pottery"] * (MAX_QUERIES + 1)})
    assert text.startswith(f"query lists {MAX_QUERIES + 1} searches; the limit is {MAX_QUERIES}")


def _events(store: HistoryStore, event_ids: list[str]) -> list[HistoryEvent]:
    events = [store.get_event("t1", event_id) for event_id in event_ids]
    return [event for event in events if event is not None]


def test_fusion_is_deterministic_and_keeps_each_event_once() -> None:
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        store.append("t1", [HumanMessage(f"event {name}", id=name) for name in "abcdef"])
        a, b, c, d, e, f = _events(store, list("abcdef"))
    # a: 1/61 + 1/62; b: 1/62 + 1/61 (its best rank is a's, from a later query); e: 1/61 ...
    fused = fuse([[a, b, c], [b, d], [e, a, f]])
    assert [x.event_id for x in fused] == ["a", "b", "e", "d", "c", "f"]
    assert [x.event_id for x in fuse([[a], [b]])] == ["a", "b"]  # a tie: the earlier query
    assert [x.event_id for x in fuse([[b], [a]])] == ["b", "a"]
    assert [x.event_id for x in fuse([[a, b, c]])] == ["a", "b", "c"]
    assert fuse([]) == []


async def test_a_cursor_of_an_earlier_version_is_refused_and_a_seq_cursor_still_reads(
    store: HistoryStore, mode: str
) -> None:
    def cursor(payload: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")

    store.append("t1", dialogue())
    tool = make_history_lookup_tool(store, max_tokens=400, counter=COUNTER)
    for earlier in (
        {"v": 1, "f": {"query": "pottery"}, "after": 4},
        {"v": 1, "f": {"query": "pottery going"}, "skip": 3},
    ):
        text = await invoke(tool, mode, {"cursor": cursor(earlier)})
        assert "made by an earlier version of this tool" in text
        assert "search again without the cursor" in text
    # a lookup without query kept its cursor: seq order from the seq after
    page = await page_of(tool, mode, {"cursor": cursor({"v": 1, "f": {}, "after": 58})}, 400)
    assert ids(store, page["records"]) == ["q29", "a29"]
    assert page["order"] == "oldest first"


# --------------------------------------------------------------------------- the room left


class ContextState(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    context: NotRequired[dict[str, Any]]


def tool_graph(tool: BaseTool) -> Any:
    builder = StateGraph(ContextState)
    builder.add_node("tools", ToolNode([tool]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile()


def lookup_reply(*queries: str) -> AIMessage:
    calls = [
        {"name": "history_lookup", "args": {"query": query}, "id": f"call-{n}"}
        for n, query in enumerate(queries)
    ]
    return AIMessage("", tool_calls=calls, id="reply")


async def tool_pages(
    graph: Any, mode: str, state: dict[str, Any]
) -> list[tuple[dict[str, Any], int]]:
    """The pages the tool node returned, each with its token count."""
    if mode == "sync":
        result = graph.invoke(state, run_config())
    else:
        result = await graph.ainvoke(state, run_config())
    messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    return [(json.loads(m.text), COUNTER.count_text(m.text)) for m in messages]


@pytest.fixture
async def long_history() -> AsyncIterator[SQLiteHistoryStore]:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    store.append("t1", dialogue())
    yield store
    await store.aclose()


def budget_state(reply: AIMessage, trigger: int, total: int) -> dict[str, Any]:
    return {"messages": [reply], "context": {"budget": {"trigger": trigger, "total": total}}}


async def test_a_page_takes_at_most_the_room_left_under_the_trigger(
    long_history: SQLiteHistoryStore, mode: str
) -> None:
    tool = make_history_lookup_tool(long_history, max_tokens=1200, counter=COUNTER)
    graph = tool_graph(tool)
    reply = lookup_reply("How is the painting going")
    spent = COUNTER.count_message(reply) + ROOM_MARGIN

    # plenty of room: the tool's own cap, not said on the page
    [(page, tokens)] = await tool_pages(graph, mode, budget_state(reply, 10_000, 2_000))
    assert "cap" not in page and 700 < tokens <= 1200

    # 700 tokens left under the trigger: the page takes that, less the reply and the margin
    [(page, tokens)] = await tool_pages(graph, mode, budget_state(reply, 10_000, 9_300))
    room = 700 - spent
    assert page["cap"] == f"{room} tokens: the room left in your context"
    assert room - 120 < tokens <= room and page["next_cursor"]

    # over the trigger already, or nearly: still one useful page, half the tool's cap (the
    # next model call compacts first)
    for total in (11_000, 9_800):
        [(page, tokens)] = await tool_pages(graph, mode, budget_state(reply, 10_000, total))
        assert page["cap"].startswith(f"{useful_page(1200)} tokens") and tokens <= 600
    assert useful_page(1200) == 600 and useful_page(500) == MIN_MAX_TOKENS

    # outside a graph with a budget: the tool's cap
    page = await page_of(tool, mode, {"query": "How is the painting going"}, 1200)
    assert "cap" not in page


async def test_parallel_lookups_share_the_room(long_history: SQLiteHistoryStore, mode: str) -> None:
    tool = make_history_lookup_tool(long_history, max_tokens=1200, counter=COUNTER)
    reply = lookup_reply("pottery", "violin")
    room = (1_400 - COUNTER.count_message(reply) - ROOM_MARGIN) // 2
    pages = await tool_pages(tool_graph(tool), mode, budget_state(reply, 10_000, 8_600))
    assert len(pages) == 2
    for page, tokens in pages:
        assert page["cap"] == f"{room} tokens: the room left in your context"
        assert tokens <= room


def context_agent(wiring: str, model: MeteringChatModel, store: HistoryStore) -> Any:
    """An agent with ``ctx_budget`` and the default lookup tool (1,500-token pages)."""
    config = ContextConfig(context_window=6_000, output_reserve=1_000)
    if wiring == "create_context_agent":
        return create_context_agent(model, store=store, config=config, counter=COUNTER).compile()
    middleware = ContextManagementMiddleware(store, model=model, config=config, counter=COUNTER)
    return create_agent(model, tools=[], middleware=[middleware])


@pytest.mark.parametrize("wiring", ["create_context_agent", "middleware"])
async def test_a_lookup_in_an_agent_does_not_push_the_next_request_over_the_trigger(
    mode: str, wiring: str
) -> None:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    trigger = ContextConfig(context_window=6_000, output_reserve=1_000).resolve().trigger
    filler = [HumanMessage("Some long notes about the garden. " * 60, id=f"n{n}") for n in range(4)]
    question = HumanMessage("How is the pottery going these days?", id="question")
    model = MeteringChatModel(replies=[lookup_reply("pottery going"), "It goes well."])
    agent = context_agent(wiring, model, store)
    state = {"messages": [*dialogue(), *filler, question]}  # recorded by the budget step
    cfg = {"configurable": {"thread_id": "agent"}}
    result = agent.invoke(state, cfg) if mode == "sync" else await agent.ainvoke(state, cfg)

    [page] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    shown = json.loads(page.text)
    assert shown["cap"].endswith("tokens: the room left in your context")
    cap = int(shown["cap"].split()[0])
    assert MIN_MAX_TOKENS < cap < DEFAULT_MAX_TOKENS and COUNTER.count_text(page.text) <= cap
    assert any(r.get("hit") for r in shown["records"])  # what matched, within the room
    budget = result["context"]["report"]["budget"]
    assert budget["decision"] == "proceed" and budget["total"] <= trigger  # no compaction
    assert "compaction" not in result["context"]["report"]
    assert result["messages"][-1].text == "It goes well."
    store.close()


# --------------------------------------------------------------------------- the schema


def test_the_tool_schema_costs_at_most_250_tokens() -> None:
    with SQLiteHistoryStore.from_path(":memory:") as store:
        store.setup()
        tool = make_history_lookup_tool(store)
        assert COUNTER.count_tools([tool]) <= 250
        properties = tool.tool_call_schema.model_json_schema()["properties"]
        assert sorted(properties) == [
            "cursor",
            "handle",
            "max_seq",
            "min_seq",
            "newest_first",
            "query",
            "role",
            "since",
            "tool_name",
            "until",
        ]
        # a string or a list of strings; nothing is required
        assert properties["query"]["anyOf"] == [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}},
        ]
        assert "required" not in tool.tool_call_schema.model_json_schema()


async def test_a_hit_too_long_for_the_page_is_shown_from_its_best_matching_line(
    store: HistoryStore, mode: str
) -> None:
    rows = [f"ACC-{n:05d},Kira Haas {n},Oslo,${n},{n % 90},team" for n in range(400)]
    rows.insert(333, "ACC-77777,Tomasz Ferreira,Porto,$5430.78,12,team")
    dump = "account,customer,city,outstanding_balance,days_overdue,plan\n" + "\n".join(rows)
    store.append(
        "t1",
        [
            HumanMessage("Export the overdue accounts, please.", id="ask"),
            AIMessage("", tool_calls=[{"name": "export", "args": {}, "id": "c1"}], id="call"),
            ToolMessage(dump, tool_call_id="c1", name="export", id="dump"),
            AIMessage("Exported 401 accounts.", id="done"),
        ],
    )
    tool = make_history_lookup_tool(store, max_tokens=400, counter=COUNTER)
    page = await page_of(tool, mode, {"query": "balance of Tomasz Ferreira from Porto"}, 400)
    [record] = [r for r in page["records"] if r.get("hit") and r["seq"] == 3]
    # the row the question is about opens the record, not the table's first rows
    assert record["text"].startswith("ACC-77777,Tomasz Ferreira,Porto,$5430.78")
    assert record["offset"] == dump.index("ACC-77777")
    assert record["cut"]["read_on"]["handle"].endswith("dump")
    # the text before the offset is there to read with the handle, from the start
    whole = json.loads(await invoke(tool, mode, {"handle": record["cut"]["read_on"]["handle"]}))
    assert whole["records"][0]["text"].startswith("account,customer,city")

    # a hit that fits the room is shown whole, from its start
    small = "account,customer\nACC-1,Tomasz Ferreira"
    store.append("t2", [HumanMessage(small, id="small")])
    text = await invoke(tool, mode, {"query": "Tomasz Ferreira"}, thread="t2")
    assert json.loads(text)["records"][0]["text"] == small
