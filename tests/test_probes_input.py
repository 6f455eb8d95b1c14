"""Hostile input at the public entry points: usage payloads, retention policies, thread exports.

Each entry point either does its job or raises its one typed error naming what is wrong; never a
stray ``TypeError``/``KeyError`` from deep inside, never a value stored that breaks a later call.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import math
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, get_args

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from psycopg import sql
from thread_api import threads_of

from ctx_langgraph.errors import DocumentError, ScopeError, UsageParseError
from ctx_langgraph.history import (
    HistoryStore,
    KeyFact,
    PostgresHistoryStore,
    Scope,
    SQLiteHistoryStore,
)
from ctx_langgraph.retention import RetentionPolicy, decide, parse_age
from ctx_langgraph.retention.policy import _Row
from ctx_langgraph.storage.statements import Stmt
from ctx_langgraph.threads import delete_thread, export_thread, import_thread
from ctx_langgraph.usage import NormalizedUsage, UsageLedger, normalize_usage
from ctx_langgraph.usage.types import COUNT_FIELDS, Provider

# ============================================================================ normalize_usage

USAGE_KEYS = [
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "completion_tokens_details",
    "input_tokens_details",
    "output_tokens_details",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "thinking_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "cache_creation",
    "ephemeral_5m_input_tokens",
    "ephemeral_1h_input_tokens",
    "input_token_details",
    "output_token_details",
    "cache_read",
    "priority_cache_read",
    "reasoning",
    "prompt_token_count",
    "promptTokenCount",
    "candidates_token_count",
    "cached_content_token_count",
    "thoughts_token_count",
    "tool_use_prompt_token_count",
    "server_tool_use",
    "usage",
    "usage_metadata",
    "usageMetadata",
    "token_usage",
    "object",
    "type",
    "status",
    "output",
    "id",
    "model",
    "model_name",
    "model_provider",
    "model_version",
    "response_id",
    "responseId",
]
KINDS = ["response", "chat.completion", "chat.completion.chunk", "message", "completed"]
PROVIDER_NAMES = ["openai", "anthropic", "google", "gemini", "langchain", "azure", "mistralai"]

odd_numbers = st.sampled_from(
    [math.nan, math.inf, -math.inf, 1e400, -1e400, -0.0, 2.0**70, 1e12 + 0.5, 10**12 + 1, -1]
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    odd_numbers,
    st.text(max_size=8),
    st.sampled_from(USAGE_KEYS + KINDS + PROVIDER_NAMES),
    st.binary(max_size=4),
)
dict_keys = st.one_of(
    st.sampled_from(USAGE_KEYS),
    st.text(max_size=6),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.tuples(st.integers(), st.text(max_size=2)),
)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(dict_keys, inner, max_size=6),
    ),
    max_leaves=12,
)
# payloads shaped like the real ones, so the deep paths (details, streaming kinds) are reached
counts_like = st.dictionaries(
    st.sampled_from(USAGE_KEYS), st.one_of(scalars, json_like), max_size=8
)
payloads = st.one_of(
    json_like,
    counts_like,
    st.fixed_dictionaries(
        {"object": st.sampled_from(KINDS), "usage": st.one_of(counts_like, json_like)},
        optional={
            "type": st.sampled_from(KINDS),
            "model": json_like,
            "id": json_like,
            "status": json_like,
            "output": json_like,
        },
    ),
    *(
        st.fixed_dictionaries(
            {key: counts_like},
            optional={
                "model_version": json_like,
                "response_id": json_like,
                "responseId": json_like,
            },
        )
        for key in ("usage_metadata", "usageMetadata")
    ),
)
providers = st.one_of(st.none(), st.sampled_from(PROVIDER_NAMES), json_like)
metadata_like = st.one_of(
    json_like,
    st.fixed_dictionaries(
        {},
        optional={
            "model_provider": st.one_of(st.sampled_from(PROVIDER_NAMES), json_like),
            "model_name": json_like,
            "model": json_like,
            "id": json_like,
            "usage": st.one_of(counts_like, json_like),
            "token_usage": st.one_of(counts_like, json_like),
        },
    ),
)
FUZZ = settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def normalized_or_refused(call: Callable[[], NormalizedUsage]) -> NormalizedUsage | None:
    """The result, checked, or None when the payload was refused with ``UsageParseError``."""
    try:
        usage = call()
    except UsageParseError as exc:
        assert exc.field and str(exc)
        return None
    assert isinstance(usage, NormalizedUsage)
    for name in COUNT_FIELDS:
        value = getattr(usage, name)
        assert value is None or (type(value) is int and value >= 0), (name, value)
    assert usage.model is None or isinstance(usage.model, str), usage.model
    assert usage.response_id is None or isinstance(usage.response_id, str), usage.response_id
    assert usage.provider in get_args(Provider)
    return usage


@FUZZ
@given(payload=payloads, provider=providers)
def test_any_payload_normalizes_or_is_refused_with_usage_parse_error(payload, provider):
    normalized_or_refused(lambda: normalize_usage(payload, provider=provider))


def ai_message(chunk: bool, usage_metadata: Any, response_metadata: Any) -> AIMessage:
    kind = AIMessageChunk if chunk else AIMessage
    try:
        return kind(
            content="ok", usage_metadata=usage_metadata, response_metadata=response_metadata
        )
    except Exception:  # pydantic refused it: a message built around validation, as some code does
        return kind.model_construct(
            content="ok", usage_metadata=usage_metadata, response_metadata=response_metadata
        )


@FUZZ
@given(
    usage_metadata=st.one_of(st.none(), counts_like, json_like),
    response_metadata=metadata_like,
    chunk=st.booleans(),
    provider=st.one_of(st.none(), st.sampled_from(PROVIDER_NAMES[:5])),
)
def test_any_ai_message_normalizes_or_is_refused_with_usage_parse_error(
    usage_metadata, response_metadata, chunk, provider
):
    message = ai_message(chunk, usage_metadata, response_metadata)
    normalized_or_refused(lambda: normalize_usage(message, provider=provider))


class _RaisingAttributes:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name} here")


class _FailingDump:
    to_dict = 5  # not callable

    def model_dump(self) -> dict[str, Any]:
        raise ValueError("cannot dump")


class _ListDump:
    def model_dump(self) -> list[int]:
        return [1, 2]


class _FailingMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("unreadable")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("unreadable")

    def __len__(self) -> int:
        return 1


@dataclass
class _UsageRecord:
    input_tokens: int = 5
    output_tokens: int = 2


VALID_OPENAI = {"prompt_tokens": 10, "completion_tokens": 2}
VALID_LANGCHAIN = {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}

REFUSED_USAGE: list[tuple[str, Callable[[], Any], str]] = [
    ("non-string keys", lambda: normalize_usage({1: 2, "a": 3}), "usage"),
    ("int and tuple keys", lambda: normalize_usage({(1,): 2, 3: 4}), "usage"),
    ("provider is an int", lambda: normalize_usage(VALID_OPENAI, provider=5), "provider"),
    ("provider is a dict", lambda: normalize_usage(VALID_OPENAI, provider={"a": 1}), "provider"),
    ("provider is a list", lambda: normalize_usage(VALID_OPENAI, provider=["openai"]), "provider"),
    ("provider is bytes", lambda: normalize_usage(VALID_OPENAI, provider=b"openai"), "provider"),
    (
        "message model_provider is an int",
        lambda: normalize_usage(AIMessage("x", response_metadata={"model_provider": 5})),
        "response_metadata.model_provider",
    ),
    (
        "message model_provider is a list",
        lambda: normalize_usage(
            AIMessage("x", usage_metadata=VALID_LANGCHAIN, response_metadata={"model_provider": []})
        ),
        "response_metadata.model_provider",
    ),
    (
        "message response_metadata is not a mapping",
        lambda: normalize_usage(AIMessageChunk.model_construct(content="x", response_metadata=5)),
        "response_metadata",
    ),
    (
        "message response_metadata cannot be read",
        lambda: normalize_usage(
            AIMessage.model_construct(content="x", response_metadata=_FailingMapping())
        ),
        "response_metadata",
    ),
    (
        "message usage_metadata cannot be read",
        lambda: normalize_usage(
            AIMessage.model_construct(
                content="x", response_metadata={}, usage_metadata=_FailingMapping()
            )
        ),
        "usage_metadata",
    ),
    (
        "message usage_metadata is a list",
        lambda: normalize_usage(
            AIMessage.model_construct(content="x", response_metadata={}, usage_metadata=[1])
        ),
        "usage_metadata",
    ),
    ("attributes raise", lambda: normalize_usage(_RaisingAttributes()), "usage"),
    ("model_dump raises", lambda: normalize_usage(_FailingDump()), "usage"),
    ("model_dump gives a list", lambda: normalize_usage(_ListDump()), "usage"),
    ("unreadable mapping", lambda: normalize_usage(_FailingMapping()), "usage"),
    (
        "unreadable details",
        lambda: normalize_usage({"prompt_tokens": 5, "prompt_tokens_details": _FailingMapping()}),
        "prompt_tokens_details",
    ),
    ("a dataclass", lambda: normalize_usage(_UsageRecord()), "usage"),
    ("None", lambda: normalize_usage(None), "usage"),
    ("nested lists", lambda: normalize_usage([[1, [2]], {"a": [3]}]), "usage"),
    ("nan count", lambda: normalize_usage({"prompt_tokens": math.nan}), "prompt_tokens"),
    ("inf count", lambda: normalize_usage({"prompt_tokens": math.inf}), "prompt_tokens"),
    ("1e400 count", lambda: normalize_usage({"prompt_tokens": 1e400}), "prompt_tokens"),
    ("huge int count", lambda: normalize_usage({"prompt_tokens": 2**200}), "prompt_tokens"),
    ("negative count", lambda: normalize_usage({"prompt_tokens": -3}), "prompt_tokens"),
    ("bool count", lambda: normalize_usage({"prompt_tokens": True}), "prompt_tokens"),
    (
        "bool in details",
        lambda: normalize_usage(
            {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": False}}
        ),
        "cached_tokens",
    ),
]


@pytest.mark.parametrize(
    ("call", "field"), [c[1:] for c in REFUSED_USAGE], ids=[c[0] for c in REFUSED_USAGE]
)
def test_malformed_usage_is_refused_with_usage_parse_error_naming_the_field(call, field):
    with pytest.raises(UsageParseError) as info:
        call()
    assert info.value.field.endswith(field), info.value.field
    assert field.split(".")[-1] in str(info.value)


MODEL_NAMES: list[tuple[str, Callable[[], NormalizedUsage], str | None]] = [
    (
        "message model_name is a dict",
        lambda: normalize_usage(
            AIMessage(
                "x", usage_metadata=VALID_LANGCHAIN, response_metadata={"model_name": {"a": 1}}
            )
        ),
        None,
    ),
    (
        "message model_name is a dict, model a string",
        lambda: normalize_usage(
            AIMessage(
                "x",
                usage_metadata=VALID_LANGCHAIN,
                response_metadata={"model_name": {"a": 1}, "model": "gpt-4.1"},
            )
        ),
        "gpt-4.1",
    ),
    (
        "message id is a list",
        lambda: normalize_usage(
            AIMessage("x", usage_metadata=VALID_LANGCHAIN, response_metadata={"model": [1]})
        ),
        None,
    ),
    (
        "response model is a dict",
        lambda: normalize_usage({"object": "chat.completion", "model": {}, "usage": VALID_OPENAI}),
        None,
    ),
    (
        "gemini model_version is a list",
        lambda: normalize_usage(
            {"usage_metadata": {"prompt_token_count": 3}, "model_version": ["g"], "responseId": 7}
        ),
        None,
    ),
]


@pytest.mark.parametrize(
    ("call", "model"), [c[1:] for c in MODEL_NAMES], ids=[c[0] for c in MODEL_NAMES]
)
def test_a_model_name_that_is_not_a_string_is_never_stored(call, model):
    usage = normalized_or_refused(call)
    assert usage is not None and usage.model == model
    assert usage.response_id is None or isinstance(usage.response_id, str)
    json.dumps(usage.to_json())  # what the ledger stores stays plain JSON


def test_valid_payloads_with_odd_extra_keys_still_normalize():
    usage = normalize_usage({"prompt_tokens": 10, "completion_tokens": 2, 1: "x", None: []})
    assert (usage.provider, usage.input_total, usage.output) == ("openai", 10, 2)
    usage = normalize_usage({**VALID_LANGCHAIN, (1, 2): 3}, provider="anthropic")
    assert (usage.provider, usage.input_total) == ("anthropic", 7)


# ============================================================================ RetentionPolicy

BAD_KEEP_LAST = [
    math.nan,
    math.inf,
    -math.inf,
    1.5,
    2.0,
    0.0,
    True,
    False,
    "3",
    None,
    b"3",
    [3],
    Decimal("2"),
    Fraction(2, 1),
    3 + 0j,
    0,
    -1,
    -(10**20),
]
BAD_KEEP_WITHIN = [
    math.nan,
    math.inf,
    3600,
    3600.0,
    True,
    "7d",
    dt.timedelta(0),
    dt.timedelta(microseconds=-1),
    dt.timedelta(days=-1),
    dt.timedelta.min,
    dt.datetime(2026, 1, 1),
    [dt.timedelta(days=1)],
]
POLICY_FIELDS = [("keep_last", value) for value in BAD_KEEP_LAST] + [
    ("keep_within", value) for value in BAD_KEEP_WITHIN
]


@pytest.mark.parametrize(("field", "value"), POLICY_FIELDS, ids=lambda v: repr(v)[:30])
def test_every_policy_field_refuses_a_bad_value_naming_field_and_value(field, value):
    with pytest.raises((TypeError, ValueError)) as info:
        RetentionPolicy(**{field: value})
    assert field in str(info.value) and repr(value) in str(info.value)
    good = RetentionPolicy(keep_last=3)
    with pytest.raises((TypeError, ValueError)):
        dataclasses.replace(good, **{field: value})


@pytest.mark.parametrize(
    ("every", "error"),
    [
        (float("nan"), TypeError),
        (1.5, TypeError),
        (2.0, TypeError),
        (True, TypeError),
        ("3", TypeError),
        (None, TypeError),
        (0, ValueError),
        (-4, ValueError),
    ],
    ids=repr,
)
def test_a_retention_hook_counts_runs_in_ints_only(every, error):
    from langgraph.checkpoint.memory import InMemorySaver

    from ctx_langgraph.retention import AsyncRetentionHook, CheckpointRetention, RetentionHook

    retention = CheckpointRetention(InMemorySaver(), RetentionPolicy(keep_last=3))
    for hook in (RetentionHook, AsyncRetentionHook):
        with pytest.raises(error, match="every"):
            hook(retention, every=every)


def test_good_policy_values_are_kept_as_given():
    import numpy as np

    assert RetentionPolicy(keep_last=10**30).keep_last == 10**30
    numpy_count = RetentionPolicy(keep_last=np.int64(3))
    assert numpy_count.keep_last == 3 and type(numpy_count.keep_last) is int
    assert RetentionPolicy(keep_within=dt.timedelta.max).keep_within == dt.timedelta.max


def _row(checkpoint_id: str) -> _Row:
    return _Row("", checkpoint_id, None, 10, 0, 0, False, None, False)


def test_a_window_longer_than_the_calendar_keeps_every_checkpoint():
    from langgraph.checkpoint.base.id import uuid6

    rows = [_row(str(uuid6())) for _ in range(4)]
    now = dt.datetime.now(dt.timezone.utc)
    decisions = decide("t", rows, RetentionPolicy(keep_last=1, keep_within=dt.timedelta.max), now)
    assert all(d.kept and "keep_within" in d.reasons for d in decisions)
    naive = decide(
        "t",
        rows,
        RetentionPolicy(keep_last=1, keep_within=dt.timedelta(hours=1)),
        now.replace(tzinfo=None),
    )
    assert all("keep_within" in d.reasons for d in naive)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("99999999999999999999d", ValueError),
        ("٣d", ValueError),
        ("3.5d", ValueError),
        ("-3d", ValueError),
        (5, TypeError),
        (None, TypeError),
    ],
    ids=repr,
)
def test_parse_age_refuses_what_is_no_age(text, error):
    with pytest.raises(error, match="age"):
        parse_age(text)


# ============================================================================ import_thread

TABLES = (
    "ctx_threads",
    "ctx_branches",
    "ctx_events",
    "ctx_event_revisions",
    "ctx_event_edits",
    "ctx_checkpoints",
    "ctx_usage_calls",
    "ctx_usage_totals",
)


def _dump_tables():
    rows = {}
    for table in TABLES:
        rows[table] = yield Stmt(f"SELECT * FROM {table}", (), "all")
    return rows


def stored_rows(store: HistoryStore) -> dict[str, list[str]]:
    """Every row of every table of the store, to compare a store before and after."""
    dumped = store.db._execute(_dump_tables(), write=False)
    return {table: sorted(repr(tuple(row)) for row in rows) for table, rows in dumped.items()}


def build_thread(store: HistoryStore) -> dict[str, Any]:
    """A small thread with a tool call, an active summary with a key fact, a branch that
    inherits it, a revision, a hidden event and a ledger call; exported through JSON."""
    store.append(
        "t",
        [
            HumanMessage("where is order A-1042?", id="m1"),
            AIMessage(
                "",
                id="m2",
                tool_calls=[{"name": "lookup_order", "args": {"order": "A-1042"}, "id": "c1"}],
            ),
            ToolMessage("A-1042 shipped", tool_call_id="c1", name="lookup_order", id="m3"),
            AIMessage("It shipped.", id="m4"),
            *(HumanMessage(f"message {n}", id=f"m{n}") for n in range(5, 9)),
        ],
    )
    snap = store.snapshot("t", 4)
    candidate = store.create_candidate(
        snap,
        summary_text="Order A-1042 shipped.",
        key_facts=[KeyFact("A-1042", source_seq=1, kind="identifier", source_event_id="m1")],
        metadata={"by": "test"},
    )
    store.commit_candidate(candidate)
    store.create_branch(Scope("t", branch="b"), "main", 6)
    store.append(Scope("t", branch="b"), [HumanMessage("on branch b", id="b1")])
    store.append("t", [HumanMessage("message 7, edited", id="m7")])
    store.hide_events("t", ["m8"])
    usage = normalize_usage({"prompt_tokens": 9, "completion_tokens": 3})
    UsageLedger(store).record("openai:r1", usage, scope="t")
    return json.loads(json.dumps(export_thread(store, "t")))


def _pg_database(server_dsn: str) -> tuple[str, Callable[[], None]]:
    name = f"ctx_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def drop() -> None:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    return psycopg.conninfo.make_conninfo(server_dsn, dbname=name), drop


@pytest.fixture(
    scope="module",
    params=["sqlite_file", "sqlite_memory", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(store, document): one store per backend for the whole table. The thread the document
    was exported from is deleted again, so an import that got past the checks would succeed and
    show; every refused import must leave the store exactly as it is."""
    drop: Callable[[], None] | None = None
    if request.param == "sqlite_file":
        store: HistoryStore = SQLiteHistoryStore.from_path(
            Path(tmp_path_factory.mktemp("probes")) / "history.sqlite"
        )
    elif request.param == "sqlite_memory":
        store = SQLiteHistoryStore.from_path(":memory:")
    else:
        dsn, drop = _pg_database(request.getfixturevalue("pg_server_dsn"))
        store = PostgresHistoryStore.from_conn_string(dsn)
    store.setup()
    try:
        document = build_thread(store)
        delete_thread(store, "t", ledger=True)
        yield store, document
    finally:
        store.close()
        if drop is not None:
            drop()


def at(document: dict[str, Any], part: str, **match: Any) -> int:
    """The index of the one item of ``document[part]`` whose fields equal ``match``."""
    [index] = [
        i for i, item in enumerate(document[part]) if all(item[k] == v for k, v in match.items())
    ]
    return index


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], str]:
    """A tampering that sets one field given by a path (``events[3].seq``) and names it."""

    def tamper(document: dict[str, Any]) -> str:
        target: Any = document
        steps = path.replace("[", ".[").split(".")
        for step in steps[:-1]:
            target = target[int(step[1:-1])] if step.startswith("[") else target[step]
        last: Any = int(steps[-1][1:-1]) if steps[-1].startswith("[") else steps[-1]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value
        return path

    return tamper


_DELETE = object()


def _main(document: dict[str, Any]) -> int:
    return at(document, "branches", branch="main")


def _branch_b(document: dict[str, Any]) -> int:
    return at(document, "branches", branch="b")


def _event(document: dict[str, Any], branch: str, seq: int) -> int:
    return at(document, "events", branch=branch, seq=seq)


def _on_event(branch: str, seq: int, key: str, value: Any) -> Callable[[dict[str, Any]], str]:
    def tamper(document: dict[str, Any]) -> str:
        return _set(f"events[{_event(document, branch, seq)}].{key}", value)(document)

    return tamper


def _on_branch(
    which: Callable[[dict[str, Any]], int], key: str, value: Any
) -> Callable[[dict[str, Any]], str]:
    def tamper(document: dict[str, Any]) -> str:
        return _set(f"branches[{which(document)}].{key}", value)(document)

    return tamper


def _head_below_events(document: dict[str, Any]) -> str:
    document["branches"][_main(document)]["head_seq"] = 7  # main's events run to seq 8
    return f"events[{_event(document, 'main', 8)}].seq"


def _duplicate_seq(document: dict[str, Any]) -> str:
    index = _event(document, "main", 5)
    document["events"][index]["seq"] = 4
    return f"events[{index}].seq"


def _duplicate_event_id(document: dict[str, Any]) -> str:
    index = _event(document, "main", 5)
    event = document["events"][index]
    event["event_id"] = event["message"]["data"]["id"] = "m4"
    return f"events[{index}].event_id"


def _event_id_not_the_message_id(document: dict[str, Any]) -> str:
    index = _event(document, "main", 3)
    document["events"][index]["event_id"] = "someone-else"
    return f"events[{index}].message.data.id"


def _message_of_unknown_type(document: dict[str, Any]) -> str:
    index = _event(document, "main", 1)
    document["events"][index]["message"]["type"] = "alien"
    return f"events[{index}].message"


def _message_content_not_text(document: dict[str, Any]) -> str:
    index = _event(document, "main", 4)
    document["events"][index]["message"]["data"]["content"] = 42
    return f"events[{index}].message"


def _own_event_before_the_fork(document: dict[str, Any]) -> str:
    index = _event(document, "b", 7)
    document["events"][index]["seq"] = 3
    return f"events[{index}].seq"


def _parent_cycle(document: dict[str, Any]) -> str:
    main = document["branches"][_main(document)]
    main["parent_branch"], main["fork_seq"] = "b", 1
    return f"branches[{_branch_b(document)}].parent_branch"


def _fork_past_parent_head(document: dict[str, Any]) -> str:
    b = document["branches"][_branch_b(document)]
    b["fork_seq"], b["head_seq"] = 50, 60
    return f"branches[{_branch_b(document)}].fork_seq"


def _branch_listed_twice(document: dict[str, Any]) -> str:
    document["branches"].append(copy.deepcopy(document["branches"][_main(document)]))
    return f"branches[{len(document['branches']) - 1}].branch"


def _summary_listed_twice(document: dict[str, Any]) -> str:
    document["summaries"].append(copy.deepcopy(document["summaries"][0]))
    return "summaries[1].id"


def _covered_before_first(document: dict[str, Any]) -> str:
    document["summaries"][0]["first_seq"] = 4
    document["summaries"][0]["covered_through_seq"] = 3
    return "summaries[0].covered_through_seq"


def _revision_not_earlier(document: dict[str, Any]) -> str:
    document["revisions"][0]["revision"] = 2  # the event itself is at revision 2
    return "revisions[0].revision"


def _memories_with_a_bad_record(document: dict[str, Any]) -> str:
    document["memories"] = [
        {"id": "mem-1", "scope": "user", "owner": "u-1", "created_at": "2026-01-01T00:00:00"},
        {"id": "mem-2", "scope": "planet", "owner": "u-1", "created_at": "2026-01-01T00:00:00"},
    ]
    return "memories[1].scope"


def _lone_surrogate_in_a_key(document: dict[str, Any]) -> str:
    index = _event(document, "main", 2)
    document["events"][index]["message"]["data"]["additional_kwargs"] = {"\udc80": 1}
    return f"events[{index}].message.data.additional_kwargs.\\udc80"


def _metadata_holding_itself(document: dict[str, Any]) -> str:
    metadata = document["summaries"][0]["metadata"]
    metadata["again"] = metadata
    return "summaries[0].metadata"


def _replace_document(document: dict[str, Any]) -> str:
    document.clear()
    document["format"] = ["ctx-langgraph/thread"]
    return "format"


TAMPERINGS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    # the document and its header
    ("format-missing", _set("format", _DELETE)),
    ("format-other", _set("format", "someone-else/thread")),
    ("format-a-list", _replace_document),
    ("version-2", _set("version", 2)),
    ("version-true", _set("version", True)),
    ("version-a-string", _set("version", "1")),
    ("tenant-empty", _set("tenant", "")),
    ("tenant-control-character", _set("tenant", "acme\n")),
    ("thread-id-none", _set("thread_id", None)),
    ("thread-id-too-long", _set("thread_id", "t" * 300)),
    ("exported-at-not-a-time", _set("exported_at", "last tuesday")),
    ("thread-missing", _set("thread", _DELETE)),
    ("thread-a-list", _set("thread", [])),
    ("edit-version-negative", _set("thread.edit_version", -1)),
    ("edit-version-a-float", _set("thread.edit_version", 2.0)),
    ("thread-created-at-a-number", _set("thread.created_at", 1_700_000_000)),
    # branches
    ("branches-missing", _set("branches", _DELETE)),
    ("branches-an-object", _set("branches", {})),
    ("branches-empty", _set("branches", [])),
    ("branch-a-string", _set("branches[0]", "main")),
    ("branch-name-control-character", _on_branch(_branch_b, "branch", "b\x07")),
    ("branch-name-surrounding-space", _on_branch(_main, "branch", " main")),
    ("branch-listed-twice", _branch_listed_twice),
    ("parent-unknown", _on_branch(_branch_b, "parent_branch", "ghost")),
    ("parent-cycle", _parent_cycle),
    ("root-with-fork-seq", _on_branch(_main, "fork_seq", 2)),
    ("child-without-fork-seq", _on_branch(_branch_b, "fork_seq", None)),
    ("fork-past-parent-head", _fork_past_parent_head),
    ("head-below-fork", _on_branch(_branch_b, "head_seq", 5)),
    ("head-seq-a-string", _on_branch(_main, "head_seq", "9")),
    ("head-seq-true", _on_branch(_main, "head_seq", True)),
    ("head-seq-missing", _on_branch(_main, "head_seq", _DELETE)),
    ("active-pointer-unknown", _on_branch(_main, "active_checkpoint_id", "ghost")),
    ("active-pointer-empty", _on_branch(_main, "active_checkpoint_id", "")),
    ("active-generation-mismatch", _on_branch(_main, "active_generation", 5)),
    ("branch-created-at-garbage", _on_branch(_branch_b, "created_at", "2026-13-45")),
    # events
    ("events-missing", _set("events", _DELETE)),
    ("event-a-number", _set("events[0]", 7)),
    ("event-seq-missing", _on_event("main", 2, "seq", _DELETE)),
    ("event-seq-a-string", _on_event("main", 2, "seq", "x")),
    ("event-seq-zero", _on_event("main", 2, "seq", 0)),
    ("event-seq-negative", _on_event("main", 2, "seq", -2)),
    ("event-seq-a-float", _on_event("main", 2, "seq", 2.0)),
    ("event-seq-true", _on_event("main", 1, "seq", True)),
    ("event-seq-beyond-64-bits", _on_event("main", 2, "seq", 2**70)),
    ("event-seq-above-head", _head_below_events),
    ("event-seq-duplicate", _duplicate_seq),
    ("event-seq-before-fork", _own_event_before_the_fork),
    ("event-branch-unknown", _on_event("main", 2, "branch", "ghost")),
    ("event-branch-missing", _on_event("main", 2, "branch", _DELETE)),
    ("event-id-empty", _on_event("main", 2, "event_id", "")),
    ("event-id-a-number", _on_event("main", 2, "event_id", 2)),
    ("event-id-duplicate", _duplicate_event_id),
    ("event-id-not-the-message-id", _event_id_not_the_message_id),
    ("message-a-string", _on_event("main", 2, "message", "hello")),
    ("message-missing", _on_event("main", 2, "message", _DELETE)),
    ("message-unknown-type", _message_of_unknown_type),
    ("message-content-a-number", _message_content_not_text),
    ("revision-zero", _on_event("main", 2, "revision", 0)),
    ("revision-past-32-bits", _on_event("main", 2, "revision", 2**40)),
    ("visible-a-string", _on_event("main", 2, "visible", "false")),
    ("visible-one", _on_event("main", 2, "visible", 1)),
    ("event-created-at-none", _on_event("main", 2, "created_at", None)),
    (
        "event-created-at-out-of-range",
        _on_event("main", 2, "created_at", "9999-12-31T23:00:00-05:00"),
    ),
    # revisions and edits
    ("revisions-missing", _set("revisions", _DELETE)),
    ("revision-of-no-event", _set("revisions[0].seq", 99)),
    ("revision-of-another-event", _set("revisions[0].event_id", "m6")),
    ("revision-not-earlier", _revision_not_earlier),
    ("revision-message-a-list", _set("revisions[0].message", [])),
    ("revision-replaced-at-missing", _set("revisions[0].replaced_at", _DELETE)),
    ("edits-a-string", _set("edits", "none")),
    ("edit-version-past-the-thread", _set("edits[0].edit_version", 99)),
    ("edit-kind-a-number", _set("edits[0].kind", 5)),
    ("edit-seq-past-head", _set("edits[0].seq", 99)),
    # summary versions
    ("summaries-missing", _set("summaries", _DELETE)),
    ("summary-id-missing", _set("summaries[0].id", _DELETE)),
    ("summary-listed-twice", _summary_listed_twice),
    ("summary-other-tenant", _set("summaries[0].tenant", "other")),
    ("summary-other-thread", _set("summaries[0].thread_id", "other")),
    ("summary-branch-unknown", _set("summaries[0].branch", "ghost")),
    ("summary-generation-zero", _set("summaries[0].generation", 0)),
    ("summary-first-seq-zero", _set("summaries[0].first_seq", 0)),
    ("summary-covers-past-head", _set("summaries[0].covered_through_seq", 99)),
    ("summary-covers-before-first", _covered_before_first),
    ("summary-source-revision-ahead", _set("summaries[0].source_revision", 99)),
    ("summary-status-unknown", _set("summaries[0].status", "pending")),
    ("summary-text-a-number", _set("summaries[0].summary_text", 5)),
    ("summary-provider-state-a-list", _set("summaries[0].provider_state", [1])),
    ("summary-metadata-not-json", _set("summaries[0].metadata", {"when": {1, 2}})),
    ("summary-metadata-a-cycle", _metadata_holding_itself),
    ("summary-tokens-negative", _set("summaries[0].summary_tokens", -1)),
    ("summary-created-at-garbage", _set("summaries[0].created_at", "yesterday")),
    ("summary-committed-at-a-number", _set("summaries[0].committed_at", 5)),
    ("key-fact-a-string", _set("summaries[0].key_facts[0]", "A-1042")),
    ("key-fact-outside-coverage", _set("summaries[0].key_facts[0].source_seq", 5)),
    ("key-fact-text-missing", _set("summaries[0].key_facts[0].text", _DELETE)),
    ("key-fact-day-a-number", _set("summaries[0].key_facts[0].day", 20230508)),
    ("key-fact-tool-a-list", _set("summaries[0].key_facts[0].tool", ["search"])),
    # ledger and memories
    ("ledger-a-list", _set("ledger", [1])),
    ("ledger-calls-missing", _set("ledger.calls", _DELETE)),
    ("ledger-call-key-missing", _set("ledger.calls[0].call_key", _DELETE)),
    ("ledger-count-negative", _set("ledger.calls[0].input_total", -5)),
    ("ledger-count-a-string", _set("ledger.calls[0].output", "3")),
    ("ledger-status-unknown", _set("ledger.calls[0].status", "done")),
    ("ledger-raw-not-json", _set("ledger.calls[0].raw", "{not json")),
    ("ledger-branch-control-character", _set("ledger.calls[0].branch", "main\t")),
    ("ledger-total-a-string", _set("ledger.totals[0].calls", "1")),
    ("memories-a-string", _set("memories", "none")),
    ("memory-bad-scope", _memories_with_a_bad_record),
]


@pytest.mark.parametrize("tamper", [t[1] for t in TAMPERINGS], ids=[t[0] for t in TAMPERINGS])
def test_a_tampered_export_is_refused_whole_naming_the_path(exported, tamper):
    store, original = exported
    document = copy.deepcopy(original)
    path = tamper(document)
    before = stored_rows(store)
    for into in (Scope("copy", tenant="elsewhere"), None):
        with pytest.raises(DocumentError) as info:
            import_thread(store, document, into=into)
        assert info.value.path == path, str(info.value)
        assert isinstance(info.value, ValueError) and path in str(info.value)
    assert stored_rows(store) == before


def test_the_untampered_export_imports_and_takes_new_appends(exported):
    store, original = exported
    before = stored_rows(store)
    document = copy.deepcopy(original)
    counts = import_thread(store, document)
    assert counts == {
        "branches": 2,
        "events": 9,
        "revisions": 1,
        "summaries": 1,
        "segments": 0,
        "ledger_calls": 1,
    }
    for branch in ("main", "b"):
        scope = Scope("t", branch=branch)
        own = [e for e in original["events"] if e["branch"] in ("main", branch)]
        if branch == "b":
            own = [e for e in own if e["branch"] == "b" or e["seq"] <= 6]
        assert [
            (e.seq, e.event_id, e.content, e.visible)
            for e in store.read_events(scope, include_hidden=True)
        ] == [(e["seq"], e["event_id"], e["message"], e["visible"]) for e in own]
        assert store.get_active(scope).summary_text == "Order A-1042 shipped."
    # the imported heads are right: the next appends get the next seqs, on both branches
    [main_append] = store.append("t", [HumanMessage("after import", id="n1")])
    [b_append] = store.append(Scope("t", branch="b"), [HumanMessage("on b after import", id="n2")])
    assert (main_append.seq, b_append.seq) == (9, 8)
    delete_thread(store, "t", ledger=True)
    assert stored_rows(store) == before


async def test_a_refused_import_writes_nothing_through_sync_and_async(api, store):
    document = build_thread(store)
    before = stored_rows(store)
    broken = copy.deepcopy(document)
    broken["branches"][at(broken, "branches", branch="main")]["head_seq"] = 7
    with pytest.raises(DocumentError, match=r"events\[\d+\]\.seq"):
        await threads_of(api).import_thread(broken, into="elsewhere")
    for not_a_document in ([], "ctx-langgraph/thread", None, 7):
        with pytest.raises(DocumentError, match="document: expected an object"):
            await threads_of(api).import_thread(not_a_document)
    with pytest.raises(DocumentError, match="not a thread export"):
        await threads_of(api).import_thread({"format": "other"}, into="x")
    assert stored_rows(store) == before
    await threads_of(api).delete_thread("t", ledger=True)
    counts = await threads_of(api).import_thread(copy.deepcopy(document))
    assert counts["events"] == 9 and len(await api.read_events("t")) == 7  # m8 is hidden
    with pytest.raises(ScopeError, match="already has history"):
        await threads_of(api).import_thread(copy.deepcopy(document))


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("content", "nul \x00 inside"),
        ("content", "half \ud800 a pair"),
        ("content", "你好世界 and café"),
        ("summary", "summary with \x00 and \udfff"),
    ],
)
def test_any_text_in_an_export_imports_and_reads_back_exactly(exported, where, text):
    store, original = exported
    document = copy.deepcopy(original)
    index = at(document, "events", branch="main", seq=5)
    if where == "content":
        document["events"][index]["message"]["data"]["content"] = text
    else:
        document["summaries"][0]["summary_text"] = text
    target = Scope(f"text-{uuid.uuid4().hex[:8]}")
    import_thread(store, document, into=target)
    try:
        if where == "content":
            event = store.read_events(target)[4]
            assert event.text == text and event.message.content == text
            word = text.split()[0] if not text.startswith("你") else "你好"
            assert event.seq in [e.seq for e in store.search(target, word).hits]
        else:
            versions = {v.id: v for v in store.list_versions(target)}
            assert versions[document["summaries"][0]["id"]].summary_text == text
        again = export_thread(store, target)
        assert again["events"][index]["message"] == document["events"][index]["message"]
    finally:
        delete_thread(store, target, ledger=True)


LEDGER_TEXTS = [
    "gpt\x00-4o",
    "model \ud800 half",
    "\ufdd0starts with the marker",
    "模型-4",
    "a|b%_'\"",
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("text", LEDGER_TEXTS, ids=repr)
async def test_the_ledger_books_any_model_name_and_call_key(store, mode, text):
    ledger = UsageLedger(store)
    reply = AIMessage(
        "x",
        id="r1",
        usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
        response_metadata={"model_name": text, "id": f"resp-{text}"},
    )
    usage = normalize_usage(reply)
    assert usage.model == text and usage.response_id == f"resp-{text}"
    key, thread = f"call:{text}", f"ledger-{uuid.uuid4().hex[:8]}"
    if mode == "sync":
        booked = [ledger.record(key, usage, scope=thread) for _ in range(2)]
        record, records = ledger.get(key), ledger.records(thread)
        totals = ledger.totals(thread, by=["model"])
    else:
        booked = [await ledger.arecord(key, usage, scope=thread) for _ in range(2)]
        record, records = await ledger.aget(key), await ledger.arecords(thread)
        totals = await ledger.atotals(thread, by=["model"])
    assert [b.reason for b in booked] == ["new", "duplicate"]
    assert record is not None and record.usage.model == text
    assert record.usage.response_id == f"resp-{text}"
    assert [r.call_key for r in records] == [key]
    assert [t.key for t in totals] == [{"model": text}] and totals[0].counts["input_total"] == 5
