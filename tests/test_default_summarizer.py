"""The default summarizer: the user's chat model writes the summaries (or ``summary_model=``),
validated, with the offline extractive summarizer taking over; offline fakes keep the extractive
one. The real ``ChatOpenAI`` client talks to a loopback server that answers summary requests and
conversation requests apart."""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import fake_providers as fp
import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import (
    FakeChatModel,
    FakeListChatModel,
    FakeMessagesListChatModel,
    GenericFakeChatModel,
    ParrotFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from ctx_langgraph import (
    ContextConfig,
    ContextManagementMiddleware,
    ExtractiveSummarizer,
    LLMSummarizer,
    SQLiteHistoryStore,
    add_context_management,
    create_context_agent,
)
from ctx_langgraph.budget import TiktokenCounter
from ctx_langgraph.compaction.summarizers import (
    DEFAULT_INSTRUCTIONS,
    chat_model_of,
    default_summarizer,
    is_offline_model,
    resolve_summary_model,
)
from ctx_langgraph.errors import ContextManagementError, SummaryModelError
from ctx_langgraph.eval.replay import ReplayModel, Script
from ctx_langgraph.history import HistoryStore
from ctx_langgraph.testing import MeteringChatModel, scripted_summary_reply, tool_agent_reply
from ctx_langgraph.usage import UsageLedger

PATH = "/v1/chat/completions"
IDS = itertools.count(1)
COUNTER = TiktokenCounter("gpt-4o")
CONFIG = ContextConfig(
    context_window=3_000, output_reserve=500, keep_recent_tokens=300, summary_max_tokens=400
)
FILLER = " ".join(f"word{i}" for i in range(60))
EXTRACTIVE = ExtractiveSummarizer().id
GARBAGE = "Sure! The user and the assistant talked about several things."


# ----------------------------------------------------------------------------- the provider


def is_summary_request(request: dict[str, Any]) -> bool:
    messages = request.get("messages") or []
    return bool(messages) and str(messages[0].get("content", "")).startswith(
        DEFAULT_INSTRUCTIONS[:60]
    )


@dataclass
class Provider:
    """Answers the conversation with a short reply and a summary request as ``summaries`` says:
    ``scripted`` (a valid summary of the listed events), ``garbage`` (prose), or ``slow``
    (a valid one after ``delay_s``)."""

    server: fp.ProviderReplay
    summaries: str = "scripted"
    delay_s: float = 0.0
    models: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.server.answer[PATH] = self.reply

    def reply(self, request: dict[str, Any]) -> dict[str, Any]:
        used = COUNTER.count_text(json.dumps(request["messages"]))
        self.models.append(str(request.get("model")))
        text = "Noted."
        if is_summary_request(request):
            if self.summaries == "slow":
                time.sleep(self.delay_s)
            prompt = HumanMessage(request["messages"][-1]["content"])
            text = GARBAGE if self.summaries == "garbage" else scripted_summary_reply([prompt]).text
        usage = {"prompt_tokens": used, "completion_tokens": 5, "total_tokens": used + 5}
        return fp.chat_completion(f"cmpl-{next(IDS)}", usage, text=text)

    def summary_requests(self) -> list[dict[str, Any]]:
        return [body for path, body in self.server.requests if is_summary_request(body)]

    def fail_next(self, count: int) -> None:
        """The next ``count`` requests are refused with a server error."""
        for _ in range(count):
            self.server.json(PATH, {"error": {"message": "overloaded", "type": "server"}}, 500)


@pytest.fixture
def provider() -> Any:
    with fp.serve() as server:
        yield Provider(server)


def openai(provider: Provider, model: str = "gpt-4o") -> ChatOpenAI:
    return ChatOpenAI(
        model=model, base_url=provider.server.url + "/v1", api_key="test-key", max_retries=0
    )


def history(turns: int) -> list[BaseMessage]:
    """A conversation over the usable window: the first compaction must make it fit."""
    out: list[BaseMessage] = []
    for n in range(turns):
        out.append(HumanMessage(f"Order ORD-{1000 + n}: {FILLER}", id=f"h{n}"))
        out.append(AIMessage(f"Noted order ORD-{1000 + n}.", id=f"a{n}"))
    return out


def over_the_window() -> dict[str, Any]:
    """A first turn over the usable window (19 x 142 tokens > 2,500): it compacts at once."""
    return {"messages": [*history(19), HumanMessage("Next?", id="q")]}


async def call(graph: Any, mode: str, inputs: dict[str, Any], run: dict[str, Any]) -> Any:
    return graph.invoke(inputs, run) if mode == "sync" else await graph.ainvoke(inputs, run)


def run_of(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


# ----------------------------------------------------------------------------- choosing


class HomeMadeModel(BaseChatModel):
    """A chat model of the user's own: real, as far as the package can tell."""

    model_name: str = "home-made-1"

    @property
    def _llm_type(self) -> str:
        return "home-made"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])


class MarkedModel(HomeMadeModel):
    ctx_offline_model: ClassVar[bool] = True


FAKES = [
    MeteringChatModel(replies=["ok"]),
    ReplayModel(Script()),
    FakeListChatModel(responses=["ok"]),
    FakeMessagesListChatModel(responses=[AIMessage("ok")]),
    GenericFakeChatModel(messages=iter(["ok"])),
    ParrotFakeChatModel(),
    FakeChatModel(),
    MarkedModel(),
]


@pytest.mark.parametrize("fake", FAKES, ids=lambda fake: type(fake).__name__)
def test_offline_fakes_keep_the_extractive_summarizer(fake: BaseChatModel):
    assert is_offline_model(fake)
    assert isinstance(default_summarizer(fake), ExtractiveSummarizer)
    assert isinstance(default_summarizer(fake.bind(stop=["."])), ExtractiveSummarizer)


def test_a_real_chat_model_writes_the_summaries_by_default(provider: Provider):
    model = openai(provider)
    chosen = default_summarizer(model, config=CONFIG)
    assert isinstance(chosen, LLMSummarizer) and chosen.model is model
    assert chosen.id == "llm:gpt-4o"
    assert chosen.window_tokens == CONFIG.resolve(model).usable  # the agent's own budget
    # a model bound with tools summarizes without them
    bound = default_summarizer(model.bind_tools([tool_agent_reply]).with_retry(), config=CONFIG)
    assert isinstance(bound, LLMSummarizer) and bound.model is model
    home_made = default_summarizer(HomeMadeModel(), config=CONFIG)
    assert isinstance(home_made, LLMSummarizer) and home_made.id == "llm:home-made-1"
    assert not is_offline_model(model) and not is_offline_model(HomeMadeModel())


def test_no_model_or_a_non_model_keeps_the_extractive_summarizer():
    assert isinstance(default_summarizer(None), ExtractiveSummarizer)
    assert isinstance(default_summarizer(lambda messages: "hi"), ExtractiveSummarizer)
    assert chat_model_of(None) is None and not is_offline_model(None)


def test_summary_model_wins_over_the_agent_model_and_has_its_own_window(provider: Provider):
    agent, cheaper = openai(provider, "gpt-4o"), openai(provider, "gpt-4o-mini")
    chosen = default_summarizer(agent, summary_model=cheaper, config=CONFIG)
    assert isinstance(chosen, LLMSummarizer) and chosen.model is cheaper
    assert chosen.window_tokens == 128_000  # gpt-4o-mini's profile, not the agent's budget
    # an offline fake given as summary_model is used: it was asked for
    fake = MeteringChatModel(replies=[scripted_summary_reply])
    assert default_summarizer(None, summary_model=fake).id == "llm:gpt-4o"


def test_a_spec_string_without_its_key_fails_naming_the_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(SummaryModelError, match="OPENAI_API_KEY is not set") as raised:
        default_summarizer(None, summary_model="openai:gpt-4o-mini")
    assert raised.value.key == "OPENAI_API_KEY" and raised.value.spec == "openai:gpt-4o-mini"
    assert isinstance(raised.value, ContextManagementError) and isinstance(raised.value, ValueError)
    assert "summarizer=ExtractiveSummarizer()" in str(raised.value)
    # the provider inferred from a bare model name, as init_chat_model infers it
    with pytest.raises(SummaryModelError, match="ANTHROPIC_API_KEY"):
        resolve_summary_model("claude-3-5-haiku-latest")
    # the middleware takes create_agent's model spec: the error names that argument
    with pytest.raises(SummaryModelError, match=r"^model='openai:gpt-4o' cannot be used"):
        ContextManagementMiddleware(sqlite_memory_store(), model="openai:gpt-4o", config=CONFIG)


def test_a_spec_string_that_cannot_be_made_fails_clearly(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(SummaryModelError, match="Unable to infer model provider") as raised:
        resolve_summary_model("nosuch:model-x")
    assert raised.value.key is None and raised.value.__cause__ is not None
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")  # the key is there, the package is not
    with pytest.raises(SummaryModelError, match="langchain-google-genai"):
        resolve_summary_model("google_genai:gemini-2.0-flash")
    with pytest.raises(TypeError, match="summary_model must be a chat model"):
        resolve_summary_model(42)  # type: ignore[arg-type]


def sqlite_memory_store() -> HistoryStore:
    store = SQLiteHistoryStore.from_path(":memory:")
    store.setup()
    return store


# ----------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_create_context_agent_summarizes_with_its_own_model(
    provider: Provider, store: HistoryStore, mode: str
):
    graph = create_context_agent(
        openai(provider), store=store, config=CONFIG, lookup_tool=False
    ).compile(checkpointer=InMemorySaver())
    out = await call(graph, mode, over_the_window(), run_of("own"))
    assert out["messages"][-1].text == "Noted."
    compaction = out["context"]["report"]["compaction"]
    assert (compaction["status"], compaction["summarizer"]) == ("committed", "llm:gpt-4o")
    assert "fallback" not in compaction
    active = store.get_active("own")
    assert active is not None and active.summarizer_id == "llm:gpt-4o"
    assert re.search(r"ORD-10\d\d \[seq \d+\]", active.summary_text)  # the model's summary
    calls = provider.summary_requests()  # (in ordered batches that fit the agent's window)
    assert calls and all(c["model"] == "gpt-4o" and "tools" not in c for c in calls)
    assert all(c["max_completion_tokens"] <= CONFIG.summary_max_tokens for c in calls)
    by_purpose = {t.key["purpose"]: t for t in UsageLedger(store).totals("own", by=["purpose"])}
    assert by_purpose["summary"].counts["output"] == 5 * len(calls)  # booked as summary calls


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_summary_model_writes_the_summaries_instead(
    provider: Provider, store: HistoryStore, mode: str
):
    graph = create_context_agent(
        openai(provider, "gpt-4o"),
        store=store,
        config=CONFIG,
        summary_model=openai(provider, "gpt-4o-mini"),
        lookup_tool=False,
    ).compile(checkpointer=InMemorySaver())
    out = await call(graph, mode, over_the_window(), run_of("cheap"))
    assert out["context"]["report"]["compaction"]["summarizer"] == "llm:gpt-4o-mini"
    assert {r["model"] for r in provider.summary_requests()} == {"gpt-4o-mini"}
    assert provider.models[-1] == "gpt-4o"  # the answer, by the agent's model
    assert store.get_active("cheap").summarizer_id == "llm:gpt-4o-mini"


def test_a_summary_model_spec_is_made_without_network(
    provider: Provider, store: HistoryStore, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", provider.server.url + "/v1")
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    requests_before = len(provider.server.requests)
    builder = create_context_agent(
        MeteringChatModel(replies=["Noted."]),
        store=store,
        config=CONFIG,
        summary_model="openai:gpt-4o-mini",
        lookup_tool=False,
    )
    assert len(provider.server.requests) == requests_before  # made, not called
    out = builder.compile().invoke(over_the_window(), run_of("spec"))
    assert out["context"]["report"]["compaction"]["summarizer"] == "llm:gpt-4o-mini"
    assert {r["model"] for r in provider.summary_requests()} == {"gpt-4o-mini"}


def test_an_explicit_summarizer_wins(provider: Provider, store: HistoryStore):
    graph = create_context_agent(
        openai(provider),
        store=store,
        config=CONFIG,
        summarizer=ExtractiveSummarizer(),
        summary_model=openai(provider, "gpt-4o-mini"),
        lookup_tool=False,
    ).compile()
    out = graph.invoke(over_the_window(), run_of("x"))
    assert out["context"]["report"]["compaction"]["summarizer"] == EXTRACTIVE
    assert provider.summary_requests() == []


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_fake_model_keeps_the_extractive_summarizer_end_to_end(
    store: HistoryStore, mode: str
):
    graph = create_context_agent(
        MeteringChatModel(replies=["Noted."]), store=store, config=CONFIG, lookup_tool=False
    ).compile()
    out = await call(graph, mode, over_the_window(), run_of("fake"))
    assert out["context"]["report"]["compaction"]["summarizer"] == EXTRACTIVE
    assert store.get_active("fake").summarizer_id == EXTRACTIVE


# ----------------------------------------------------------------------------- the fallback


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("failure", ["raises", "garbage", "slow"])
async def test_a_failing_llm_summary_falls_back_and_the_turn_goes_on(
    provider: Provider, store: HistoryStore, mode: str, failure: str
):
    config = ContextConfig(
        context_window=3_000,
        output_reserve=500,
        keep_recent_tokens=300,
        summary_max_tokens=400,
        compaction_attempts=2,
        compaction_timeout_s=0.5,
    )
    if failure == "raises":
        provider.fail_next(2)  # both attempts: the first requests are the summary calls
    else:
        provider.summaries, provider.delay_s = failure, 1.5
    graph = create_context_agent(
        openai(provider), store=store, config=config, lookup_tool=False
    ).compile(checkpointer=InMemorySaver())
    inputs = over_the_window()  # over the window
    out = await call(graph, mode, inputs, run_of(failure))
    assert out["messages"][-1].text == "Noted."  # the thread goes on
    compaction = out["context"]["report"]["compaction"]
    assert compaction["status"] == "committed"
    assert (compaction["summarizer"], compaction["fallback"]) == (EXTRACTIVE, EXTRACTIVE)
    why = " ".join(compaction["problems"])
    assert "llm:gpt-4o failed and the request would not fit" in why
    expected = {
        "raises": "Error code: 500",
        "garbage": "missing section",
        "slow": "TimeoutError",
    }
    assert expected[failure] in why, why
    active = store.get_active(failure)
    assert active is not None and active.summarizer_id == EXTRACTIVE
    assert out["context"]["backoff"]["summarizer"]["failures"] == 1
    if failure == "slow":
        time.sleep(provider.delay_s)  # the abandoned summary call ends before the store closes


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_garbage_llm_summary_within_the_window_waits_then_the_fallback_covers(
    provider: Provider, store: HistoryStore, mode: str
):
    """Within the usable window a failed compaction leaves the view whole and backs off; when
    the request would not fit, the extractive summarizer covers the span at once."""
    provider.summaries = "garbage"
    config = ContextConfig(
        context_window=3_000,
        output_reserve=500,
        keep_recent_tokens=300,
        summary_max_tokens=400,
        compaction_attempts=1,
        compaction_backoff_s=3_600.0,
    )
    graph = create_context_agent(
        openai(provider), store=store, config=config, lookup_tool=False
    ).compile(checkpointer=InMemorySaver())
    run = run_of("wait")
    statuses = []
    for turn in range(40):
        out = await call(graph, mode, {"messages": [HumanMessage(f"t{turn} {FILLER}")]}, run)
        assert out["messages"][-1].text == "Noted."
        compaction = out["context"].get("report", {}).get("compaction") or {}
        statuses.append((compaction.get("status"), compaction.get("summarizer")))
        if compaction.get("status") == "committed":
            assert "llm:gpt-4o is backing off" in " ".join(compaction["problems"])
            break
    assert ("failed", None) in statuses  # tried once within the window, then backed off
    assert statuses[-1] == ("committed", EXTRACTIVE)
    assert len(provider.summary_requests()) == 1
    assert store.get_active("wait").summarizer_id == EXTRACTIVE


# ----------------------------------------------------------------------------- other wiring


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_middleware_summarizes_with_the_agent_model(
    provider: Provider, store: HistoryStore, mode: str
):
    model = openai(provider)
    middleware = ContextManagementMiddleware(store, model=model, config=CONFIG, lookup_tool=False)
    agent = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    out = await call(agent, mode, over_the_window(), run_of("mw"))
    assert out["messages"][-1].text == "Noted."
    assert out["context"]["report"]["compaction"]["summarizer"] == "llm:gpt-4o"
    assert store.get_active("mw").summarizer_id == "llm:gpt-4o"
    assert provider.summary_requests()


def test_the_middleware_takes_summary_model_and_keeps_fakes_offline(
    provider: Provider, store: HistoryStore
):
    fake = MeteringChatModel(replies=["Noted."])
    middleware = ContextManagementMiddleware(
        store,
        model=fake,
        config=CONFIG,
        summary_model=openai(provider, "gpt-4o-mini"),
        lookup_tool=False,
    )
    agent = create_agent(fake, tools=[], middleware=[middleware])
    out = agent.invoke(over_the_window(), run_of("mws"))
    assert out["context"]["report"]["compaction"]["summarizer"] == "llm:gpt-4o-mini"
    offline = ContextManagementMiddleware(store, model=fake, config=CONFIG, lookup_tool=False)
    out = create_agent(fake, tools=[], middleware=[offline]).invoke(
        over_the_window(), run_of("mwf")
    )
    assert out["context"]["report"]["compaction"]["summarizer"] == EXTRACTIVE


def user_graph(model: BaseChatModel) -> StateGraph[Any, Any, Any, Any]:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_edge(START, "agent")
    return builder


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_add_context_management_defaults(provider: Provider, store: HistoryStore, mode: str):
    """With ``model=`` the model summarizes; without it, the extractive summarizer, unless
    ``summary_model=`` names one."""
    model = openai(provider)
    inputs = over_the_window()
    cases = [
        ("with-model", {"model": model}, "llm:gpt-4o"),
        ("no-model", {}, EXTRACTIVE),
        ("summary-model", {"summary_model": openai(provider, "gpt-4o-mini")}, "llm:gpt-4o-mini"),
    ]
    for thread, options, expected in cases:
        builder = add_context_management(
            user_graph(model), model_node="agent", store=store, config=CONFIG, **options
        )
        out = await call(builder.compile(), mode, inputs, run_of(thread))
        assert out["messages"][-1].text == "Noted."
        assert store.get_active(thread).summarizer_id == expected, thread
