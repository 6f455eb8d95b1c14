"""The context strategies under comparison, each a real LangGraph agent around the same replay.

- ``full``: every message, every call (the price of sending everything; it stops fitting the
  window at some point, which ``over_window_calls`` counts);
- ``last_n``: LangChain's ``trim_messages`` (the newest messages that fit the usable window);
- ``summary_only``: ours with (almost) no recent tail: the summary and the current turn;
- ``summary_tail``: ours, summary + recent tail;
- ``summary_tail_lookup``: ours with the history lookup tool;
- ``langmem``: langmem's ``SummarizationNode`` wired as its docs wire it;
- ``langchain``: ``create_agent`` + LangChain's ``SummarizationMiddleware``.

Summarizing peers get :class:`~ctx_langgraph.eval.replay.ExtractiveChatModel` (offline), so
everyone summarizes with the same ability; budgets come from one :class:`ContextConfig`.

Each strategy is one entry of :data:`STRATEGY_SPECS` (:class:`StrategySpec`): how its agent is
built, and for ours the extra keyword arguments its lookup tool and its agent get, so a variant
(a lookup with another index, say) is registered by adding one entry.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.messages.utils import trim_messages
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

from ctx_langgraph.budget.counters import REPLY_PRIMING, TokenCounter
from ctx_langgraph.compaction.extractive import ExtractiveSummarizer
from ctx_langgraph.compaction.protocol import Summarizer
from ctx_langgraph.compaction.summarizers import LLMSummarizer
from ctx_langgraph.config import ContextConfig, ResolvedBudget
from ctx_langgraph.eval.embedding_stats import CountingEmbeddings
from ctx_langgraph.eval.replay import (
    LOOKUP_TOOL,
    CountingChatModel,
    CountingSummarizer,
    ExtractiveChatModel,
    ReplayModel,
    Script,
    SummarizerStats,
)
from ctx_langgraph.history import HistoryStore, SQLiteHistoryStore
from ctx_langgraph.history.index import IndexConfig
from ctx_langgraph.integration import create_context_agent
from ctx_langgraph.lookup import DEFAULT_MAX_TOKENS, make_history_lookup_tool
from ctx_langgraph.view.markers import is_summary

__all__ = [
    "LOOKUP_STRATEGIES",
    "OURS",
    "STRATEGIES",
    "STRATEGY_METHODS",
    "STRATEGY_SPECS",
    "AgentOptions",
    "Family",
    "Strategy",
    "StrategyDescription",
    "StrategySpec",
    "build_strategy",
    "claimed_by_prefix",
    "describe_strategy",
    "eval_config",
    "is_summary_message",
    "strategy_spec",
    "summary_messages",
    "unknown_strategies",
]

Family = Literal["plain", "ours", "langmem", "langchain"]
"""How a strategy's agent is built: a plain message graph (``full``, ``last_n``), ours
(:func:`~ctx_langgraph.create_context_agent`), langmem's node, or LangChain's middleware."""

AgentOptions = Mapping[str, Any] | Callable[[HistoryStore], Mapping[str, Any]]
"""Extra keyword arguments for one of our agents' builders: a mapping, or a function of the
run's history store that returns one (an index built from the store, say)."""


@dataclass(frozen=True)
class StrategySpec:
    """One strategy under comparison: how its agent is built and what it is, in one entry of
    :data:`STRATEGY_SPECS`.

    A variant of one of ours is one more entry with its own options, as
    ``summary_tail_lookup_segments`` is: ``summary_tail_lookup`` whose agent builds the segment
    index (``config_options={"segment_events": 40}``) and whose lookup searches it
    (``lookup_options={"segments": True}``).

    ``config_options`` replace fields of the run's :class:`~ctx_langgraph.ContextConfig`;
    ``lookup_options`` go to :func:`~ctx_langgraph.lookup.make_history_lookup_tool` and
    ``agent_options`` to :func:`~ctx_langgraph.create_context_agent`, after the harness's own
    arguments (so a variant may replace one of them, ``prompt`` or ``config`` say). The lookup
    tool keeps its name: the question-phase reader calls ``history_lookup``.
    """

    family: Family
    method: str
    """How the model input is built, in one phrase (the report's strategy table)."""
    lookup: bool = False
    """Our agent gets the history lookup tool (and the question-phase reader uses it)."""
    recent_tail: bool = True
    """Ours keeps a recent tail (``False``: the summary and the current turn only)."""
    trim: bool = False
    """A plain graph trims to the usable window with ``trim_messages``."""
    lookup_options: AgentOptions = field(default_factory=dict)
    agent_options: AgentOptions = field(default_factory=dict)
    config_options: Mapping[str, Any] = field(default_factory=dict)
    index: bool = False
    """Our history store gets a vector index of the local model
    (:class:`~ctx_langgraph.embeddings.MiniLMEmbeddings`), so the lookup searches by words and
    meaning (hybrid)."""


SEGMENT_EVENTS = 40
"""Events per segment of ``summary_tail_lookup_segments``'s index (a LoCoMo session is 18-40)."""

STRATEGY_SPECS: dict[str, StrategySpec] = {
    "full": StrategySpec("plain", "every message, every call"),
    "last_n": StrategySpec(
        "plain",
        "LangChain's trim_messages: the newest messages that fit the usable window",
        trim=True,
    ),
    "summary_only": StrategySpec(
        "ours",
        "ours: the summary and the current turn, (almost) no recent tail",
        recent_tail=False,
    ),
    "summary_tail": StrategySpec("ours", "ours: the summary and the recent tail"),
    "summary_tail_lookup": StrategySpec(
        "ours", "ours: the summary, the recent tail and the history lookup tool", lookup=True
    ),
    "summary_tail_lookup_segments": StrategySpec(
        "ours",
        "ours: summary_tail_lookup, and the lookup also searches a segment index (a summary "
        "per 40 events or session, never in the prompt)",
        lookup=True,
        lookup_options={"segments": True},
        config_options={"segment_events": SEGMENT_EVENTS},
    ),
    "summary_tail_lookup_hybrid": StrategySpec(
        "ours",
        "ours: summary_tail_lookup, and the lookup searches by meaning too (hybrid: words and "
        "a local embedding model, fused by reciprocal rank)",
        lookup=True,
        index=True,
    ),
    "langmem": StrategySpec("langmem", "langmem's SummarizationNode, wired as its docs wire it"),
    "langchain": StrategySpec("langchain", "create_agent with LangChain's SummarizationMiddleware"),
}
"""Every strategy the harness can run, in report order (``--strategies all`` runs them all)."""

STRATEGIES = tuple(STRATEGY_SPECS)
"""The names of every strategy the evaluation can run, in report order."""
OURS = frozenset(name for name, spec in STRATEGY_SPECS.items() if spec.family == "ours")
LOOKUP_STRATEGIES = frozenset(name for name, spec in STRATEGY_SPECS.items() if spec.lookup)
"""The strategies whose agent has the history lookup tool (and whose reader uses it)."""
STRATEGY_METHODS: dict[str, str] = {name: spec.method for name, spec in STRATEGY_SPECS.items()}
"""How each strategy builds the model input, in one phrase (the report's strategy table)."""


def strategy_spec(name: str) -> StrategySpec:
    """The entry of strategy ``name`` in :data:`STRATEGY_SPECS`.

    Raises:
        ValueError: no strategy has that name.
    """
    spec = STRATEGY_SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGY_SPECS)}")
    return spec


def unknown_strategies(names: Sequence[str]) -> list[str]:
    """The names in ``names`` that :data:`STRATEGY_SPECS` does not know."""
    return [name for name in names if name not in STRATEGY_SPECS]


_LANGMEM_SERDE = ("langmem.short_term.summarization", "RunningSummary")
_LC_SUMMARY_SOURCE = "summarization"


def eval_config(window: int) -> ContextConfig:
    """One budget for every strategy at a window: 1/8 reserved for output, compaction above 80%
    of the rest down to 50%, a recent tail of half the target and a summary cap of a third."""
    reserve = max(256, window // 8)
    target = int(0.5 * (window - reserve))
    return ContextConfig(
        context_window=window,
        output_reserve=reserve,
        trigger=0.8,
        target=0.5,
        keep_recent_tokens=target // 2,
        summary_max_tokens=max(64, target // 3),
    )


@dataclass
class Strategy:
    """A compiled agent for one strategy, with the replay model and what to measure."""

    name: str
    graph: Any
    script: Script
    summarizer_stats: SummarizerStats
    store: HistoryStore | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    tools: tuple[str, ...] = ()
    """The names of the tools the agent is given, in order."""
    embeddings: CountingEmbeddings | None = None
    """The vector index's model, counted (strategies with an index)."""

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


def summary_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The summary messages in a request, whoever wrote them (ours, langmem's, LangChain's)."""
    return [m for m in messages if is_summary_message(m)]


def is_summary_message(message: BaseMessage) -> bool:
    if is_summary(message):
        return True
    if isinstance(message, SystemMessage) and message.text.startswith(
        "Summary of the conversation so far:"
    ):
        return True
    return message.additional_kwargs.get("lc_source") == _LC_SUMMARY_SOURCE


def _count_messages(counter: TokenCounter) -> Callable[[Any], int]:
    """A ``token_counter`` for LangChain's and langmem's trimming: our counter, message by
    message."""

    def count(messages: Any) -> int:
        return sum(counter.count_message(m) for m in messages)

    return count


def _names(tools: Sequence[BaseTool]) -> tuple[str, ...]:
    return tuple(tool.name for tool in tools)


def _messages_graph(model_node: Callable[[Any], dict[str, Any]], tools: Sequence[BaseTool]) -> Any:
    builder: Any = StateGraph(MessagesState)
    builder.add_node("model", model_node)
    builder.add_edge(START, "model")
    if tools:
        builder.add_node("tools", ToolNode(list(tools)))
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "model")
    return builder.compile(checkpointer=InMemorySaver())


class _LangmemState(MessagesState):
    context: dict[str, Any]


class _LangmemInput(TypedDict):
    summarized_messages: list[AnyMessage]
    context: dict[str, Any]


def build_strategy(
    name: str,
    *,
    tools: Sequence[BaseTool],
    window: int,
    counter: TokenCounter,
    retrieval_tokens: int = DEFAULT_MAX_TOKENS,
    reader: BaseChatModel | None = None,
    summary_model: BaseChatModel | None = None,
    workdir: Path | None = None,
) -> Strategy:
    """A fresh agent for strategy ``name`` (see :data:`STRATEGIES`), replaying with its own
    :class:`Script`. Our strategies keep their history in a SQLite file under ``workdir``.

    Summaries come from the offline extractive summarizer (ours directly, the peers through
    :class:`ExtractiveChatModel`), or, with ``summary_model``, from that chat model for everyone
    (ours through :class:`~ctx_langgraph.LLMSummarizer`)."""
    spec = strategy_spec(name)
    config = eval_config(window)
    budget = config.resolve()
    script = Script(lookup=spec.lookup, reader=reader)
    model = ReplayModel(script)
    bound = model.bind_tools(list(tools)) if tools else model
    if spec.family == "plain":
        return _plain(name, spec, bound, tools, budget, counter, script)
    if spec.family == "ours":
        inner: Summarizer = (
            ExtractiveSummarizer() if summary_model is None else LLMSummarizer(summary_model)
        )
        built = _OursBuild(config, counter, retrieval_tokens, workdir, inner)
        return _ours(name, spec, model, tools, script, built)
    summarizer: ExtractiveChatModel | CountingChatModel = (
        ExtractiveChatModel(counter=counter, cap_tokens=config.summary_max_tokens)
        if summary_model is None
        else CountingChatModel(inner=summary_model, counter=counter)
    )
    if spec.family == "langmem":
        return _langmem(name, bound, tools, config, budget, counter, script, summarizer)
    return _langchain(name, model, tools, budget, counter, script, summarizer)


def _plain(
    name: str,
    spec: StrategySpec,
    bound: Any,
    tools: Sequence[BaseTool],
    budget: ResolvedBudget,
    counter: TokenCounter,
    script: Script,
) -> Strategy:
    schemas = list(tools)

    overhead = (counter.count_tools(schemas) if schemas else 0) + REPLY_PRIMING

    def request_tokens(messages: Any) -> int:  # as the request will be metered
        return overhead + sum(counter.count_message(m) for m in messages)

    def call_model(state: MessagesState) -> dict[str, Any]:
        messages: list[Any] = list(state["messages"])
        if spec.trim:
            messages = trim_messages(
                messages,
                max_tokens=budget.usable,
                token_counter=request_tokens,
                strategy="last",
                start_on="human",
                include_system=True,
            )
        return {"messages": [bound.invoke(messages)]}

    graph = _messages_graph(call_model, tools)
    return Strategy(name, graph, script, SummarizerStats(), tools=_names(tools))


@dataclass(frozen=True)
class _OursBuild:
    """What every one of our agents is built with, whatever the variant."""

    config: ContextConfig
    counter: TokenCounter
    retrieval_tokens: int
    workdir: Path | None
    inner: Summarizer


def local_index() -> tuple[IndexConfig, CountingEmbeddings]:
    """The vector index of ``summary_tail_lookup_hybrid``: the local MiniLM model (the
    ``embeddings`` extra), 384 dimensions, its work counted."""
    from ctx_langgraph.embeddings import MiniLMEmbeddings

    counted = CountingEmbeddings(MiniLMEmbeddings())
    return {"embed": counted, "dims": MiniLMEmbeddings.dims}, counted


def _options(options: AgentOptions, store: HistoryStore) -> dict[str, Any]:
    """A variant's extra keyword arguments (a mapping, or made from the run's store)."""
    return dict(options(store) if callable(options) else options)


def _without_tail(config: ContextConfig) -> ContextConfig:
    return ContextConfig(
        context_window=config.context_window,
        output_reserve=config.output_reserve,
        trigger=config.trigger,
        target=config.target,
        keep_recent_tokens=1,
        tail_fills_target=False,
        summary_max_tokens=config.summary_max_tokens,
    )


def _ours(
    name: str,
    spec: StrategySpec,
    model: ReplayModel,
    tools: Sequence[BaseTool],
    script: Script,
    built: _OursBuild,
) -> Strategy:
    config = built.config if spec.recent_tail else _without_tail(built.config)
    config = replace(config, **spec.config_options)
    closers: list[Callable[[], None]] = []
    workdir = built.workdir
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="ctx-eval-")
        workdir = Path(tmp.name)
        closers.append(tmp.cleanup)
    index, embeddings = local_index() if spec.index else (None, None)
    store = SQLiteHistoryStore.from_path(workdir / f"{name}.sqlite", index=index)
    store.setup()
    closers.append(store.close)
    summarizer = CountingSummarizer(built.inner, built.counter)
    lookup: Any = False
    if spec.lookup:
        lookup = make_history_lookup_tool(
            store,
            **{
                "max_tokens": built.retrieval_tokens,
                "counter": built.counter,
                **_options(spec.lookup_options, store),
            },
        )
    arguments: dict[str, Any] = {
        "store": store,
        "config": config,
        "summarizer": summarizer,
        "lookup_tool": lookup,
        "counter": built.counter,
    }
    builder = create_context_agent(
        model, list(tools), **{**arguments, **_options(spec.agent_options, store)}
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    strategy = Strategy(name, graph, script, summarizer.stats, store)
    strategy.embeddings = embeddings
    strategy.closers.extend(closers[::-1])
    strategy.tools = _names([*tools, *([lookup] if lookup else [])])
    return strategy


def _langmem(
    name: str,
    bound: Any,
    tools: Sequence[BaseTool],
    config: ContextConfig,
    budget: ResolvedBudget,
    counter: TokenCounter,
    script: Script,
    summarizer: ExtractiveChatModel | CountingChatModel,
) -> Strategy:
    with warnings.catch_warnings():  # langmem imports names LangGraph has deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        from langmem.short_term import SummarizationNode  # type: ignore[import-untyped]

    def call_model(state: _LangmemInput) -> dict[str, Any]:
        running = state.get("context", {}).get("running_summary")
        if running is not None:
            script.claimed = frozenset(running.summarized_message_ids)
        return {"messages": [bound.invoke(state["summarized_messages"])]}

    builder: Any = StateGraph(_LangmemState)
    builder.add_node(
        "summarize",
        SummarizationNode(
            model=summarizer,
            token_counter=_count_messages(counter),
            max_tokens=budget.target,
            max_tokens_before_summary=budget.trigger,
            max_summary_tokens=config.summary_max_tokens,
        ),
    )
    builder.add_node("model", call_model)
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "model")
    if tools:
        builder.add_node("tools", ToolNode(list(tools)))
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "summarize")
    serde = JsonPlusSerializer(allowed_msgpack_modules=[_LANGMEM_SERDE])
    graph = builder.compile(checkpointer=InMemorySaver(serde=serde))
    return Strategy(name, graph, script, summarizer.stats, tools=_names(tools))


def _langchain(
    name: str,
    model: ReplayModel,
    tools: Sequence[BaseTool],
    budget: ResolvedBudget,
    counter: TokenCounter,
    script: Script,
    summarizer: ExtractiveChatModel | CountingChatModel,
) -> Strategy:
    middleware = SummarizationMiddleware(
        model=summarizer,
        trigger=("tokens", budget.trigger),
        keep=("tokens", budget.keep_recent_tokens),
        token_counter=_count_messages(counter),
    )
    graph = create_agent(
        model, tools=list(tools), middleware=[middleware], checkpointer=InMemorySaver()
    )
    return Strategy(name, graph, script, summarizer.stats, tools=_names(tools))


def claimed_by_prefix(messages: Sequence[BaseMessage], history: Sequence[str]) -> frozenset[str]:
    """What a summary that replaced the oldest messages claims: every history message before
    the first one still in the request (LangChain's middleware keeps no other record)."""
    present = {m.id for m in messages if not is_summary_message(m)}
    claimed: list[str] = []
    for message_id in history:
        if message_id in present:
            break
        claimed.append(message_id)
    return frozenset(claimed)


class StrategyDescription(TypedDict):
    """What a strategy is, for ``metrics.json`` and the report's strategy table."""

    method: str
    """How the model input is built (:attr:`StrategySpec.method`)."""
    tools: list[str]
    """The tools the agent has, by name."""
    question_phase: str
    """How the reader queries when the questions are asked."""


def describe_strategy(
    name: str, *, tools: Sequence[str], reader: str, retrieval_tokens: int
) -> StrategyDescription:
    """What strategy ``name`` is: its context method, its agent's tools, and what the reader
    (``"scripted"`` or a model's name) does at question time: a strategy with the lookup tool
    (:attr:`StrategySpec.lookup`) makes one lookup call per question with the question's text
    as the query (pages of at most ``retrieval_tokens``), as :class:`Script` does, then
    answers; the others answer from the input as the strategy built it.

    Examples:
        >>> describe_strategy("summary_tail_lookup", tools=["search", "history_lookup"],
        ...                   reader="scripted", retrieval_tokens=1000)["question_phase"]
        'one scripted history_lookup call per question (query: the question text; a page of at most 1,000 tokens), then the scripted reader answers with a placeholder'
        >>> describe_strategy("full", tools=[], reader="scripted",
        ...                   retrieval_tokens=1000)["question_phase"]
        'the scripted reader answers with a placeholder from the input as built; no tool call'
    """
    scripted = reader == "scripted"
    who = "the scripted reader" if scripted else reader
    answers = "answers with a placeholder" if scripted else "answers"
    phase = f"{who} {answers} from the input as built; no tool call"
    spec = strategy_spec(name)
    if spec.lookup:
        phase = (
            f"one scripted {LOOKUP_TOOL} call per question (query: the question text; a page "
            f"of at most {retrieval_tokens:,} tokens), then {who} {answers}"
        )
    return StrategyDescription(method=spec.method, tools=list(tools), question_phase=phase)
