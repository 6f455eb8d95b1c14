"""Soak benchmark: 1,000 turns of a tool-heavy agent in a 4,096-token window, with failures injected.

``create_context_agent`` (compiled with a checkpointer) runs one long thread, one user message a
turn, on a SQLite history store (a file in a temp dir) and, with ``--pg``, on PostgreSQL. The chat
model is a seeded script: most turns it calls one to three tools (``read_file`` returning 50 to
2,000 words, ``run_command``, ``search_web``, now and then ``history_lookup``; parallel calls
sometimes), then answers. A small share of its calls fail with OpenAI's context-length error,
raised by the real ``openai`` client; the summarizer (the extractive one, wrapped) fails a share
of its calls by raising, returning nothing, returning garbage or outliving the compaction
timeout. A turn that raises is counted with its exception, and the soak goes on with the next
turn, as a user would retry.

    python benchmarks/soak.py [--turns 1000] [--seed 7] [--json] [--pg DSN] [--window 4096]
        [--backends sqlite,postgres] [--summarizer-failure-rate 0.3] [--overflow-rate 0.02]
        [--compaction-timeout 1.0] [--saver memory|sqlite] [--async] [--no-check]

Targets, per backend: 0 failed turns, 0 lost messages (every message sent or produced is a
visible event of the history store at the end), 0 orphans (no request the model received had a
tool result without its call, or a tool call without its result). Unlike the other benchmarks,
a missed target makes the exit code 1 (``--no-check``: always 0), so CI catches it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import os
import random
import re
import resource
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from ctx_langgraph import ContextConfig, create_context_agent, make_history_lookup_tool, testing
from ctx_langgraph.compaction import ExtractiveSummarizer
from ctx_langgraph.core.table import format_table
from ctx_langgraph.history import HistoryStore, PostgresHistoryStore, SQLiteHistoryStore
from ctx_langgraph.history.types import Scope
from ctx_langgraph.state import unpack
from ctx_langgraph.testing import MeteringChatModel
from ctx_langgraph.view.markers import is_summary

try:  # the HTTP package the openai client speaks (httpx2 since openai 3, httpx before)
    import httpx2 as openai_http
except ImportError:  # pragma: no cover - older openai
    import httpx as openai_http  # type: ignore[no-redef]

TENANT = "soak"
OUTPUT_RESERVE = 512  # a reply of up to ~380 words; the scripted answers stay under 200
FAILURE_KINDS = testing.FAILURE_KINDS
COMMITTED = ("committed", "committed_precomputed")
# fmt: off
WORDS = ["the", "build", "deploy", "cache", "worker", "queue", "index", "schema", "backfill",
         "rollout", "replica", "latency", "timeout", "retry", "budget", "invoice", "customer",
         "ticket", "release", "branch", "review", "config", "token", "shard", "lease", "owner",
         "window", "report", "export", "metric", "alert", "threshold", "service", "gateway",
         "handler", "migration", "snapshot", "archive", "quota", "region", "should", "will",
         "was", "is", "after", "before", "because", "while", "when", "then", "still", "only",
         "every", "new", "old", "last", "next", "first", "slow", "fast", "stale", "failed",
         "green", "pending", "stuck", "moved", "kept", "dropped", "fixed", "broke", "checked",
         "ran", "read", "wrote", "found", "missed"]
SERVICES = ["billing", "search", "ingest", "auth", "notify", "ledger", "gateway", "reports"]
DIRS = ["config", "src", "jobs", "migrations", "docs", "scripts", "tests"]
EXTS = ["yaml", "py", "sql", "md", "json", "toml", "log"]
PREFIXES = ["INV", "ORD", "TKT", "JOB", "REL", "INC"]
PEOPLE = ["ana.silva", "kenji.mori", "li.wei", "omar.haddad", "sara.berg", "tom.okafor"]
LIBS = ["psycopg", "sqlalchemy", "fastapi", "celery", "redis-py", "pydantic", "uvicorn"]
ASKS = ["Can you read {path} and check whether {ref} still points at {host}?",
        "Run the tests for {svc} and tell me what fails after the change to {path}.",
        "Search for the changelog of {lib} {ver} and compare it with what we pinned in {path}.",
        "Note: the deadline for {ref} moved to {date}; the owner is {email}.",
        "Why did {ref} fail on {host} at {time}? The log should be in {path}.",
        "Please look at {path} again, I think the {word} setting for {svc} is wrong.",
        "What did we decide about {ref} last time, and who is {email} in that thread?"]
# fmt: on
ENTITY = re.compile(r"\b[A-Z]{2,5}-\d{4}-\d{4}\b|/srv/[\w/.-]+\w")


# ----------------------------------------------------------------------------- seeded text


class Text:
    """Seeded workspace-like text: prose, config lines, logs, code, full of ids, paths, numbers."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def path(self) -> str:
        r = self.rng
        return (
            f"/srv/{r.choice(SERVICES)}/{r.choice(DIRS)}/"
            f"{r.choice(WORDS)}-{r.randint(1, 99)}.{r.choice(EXTS)}"
        )

    def ref(self) -> str:
        r = self.rng
        return f"{r.choice(PREFIXES)}-{r.randint(2019, 2026)}-{r.randint(0, 9999):04d}"

    def fields(self) -> dict[str, str]:
        r = self.rng
        return {
            "path": self.path(),
            "ref": self.ref(),
            "host": f"{r.choice(SERVICES)}-{r.randint(1, 9)}.internal:{r.choice([5432, 6379, 8080, 9200])}",
            "svc": r.choice(SERVICES),
            "lib": r.choice(LIBS),
            "ver": f"{r.randint(1, 4)}.{r.randint(0, 30)}.{r.randint(0, 9)}",
            "date": f"2025-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
            "time": f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z",
            "email": f"{r.choice(PEOPLE)}@example.com",
            "word": r.choice(WORDS),
            "amount": f"${r.randint(10, 99_999):,}.{r.randint(0, 99):02d}",
            "sha": f"{r.getrandbits(28):07x}",
        }

    def sentence(self, words: int) -> str:
        r, f = self.rng, self.fields()
        parts = [r.choice(WORDS) for _ in range(words)]
        for _ in range(max(1, words // 6)):  # an entity every few words
            parts[r.randrange(len(parts))] = f[r.choice(["path", "ref", "host", "amount", "date"])]
        text = " ".join(parts)
        return text[0].upper() + text[1:] + "."

    def line(self) -> str:
        """One line of a file: prose, a config entry, a log record or code."""
        r, f = self.rng, self.fields()
        kind = r.random()
        if kind < 0.4:
            return self.sentence(r.randint(8, 20))
        if kind < 0.6:
            return f"{f['word']}_{r.randint(1, 9)}: {r.choice([f['host'], f['path'], f['amount'], str(r.randint(1, 10**6))])}"
        if kind < 0.85:
            return (
                f"{f['date']}T{f['time']} {r.choice(['INFO', 'WARN', 'ERROR'])} {f['svc']}-"
                f"{r.randint(1, 9)} {r.choice(WORDS)} {f['ref']} in {r.randint(2, 9000)} ms "
                f"(commit {f['sha']})"
            )
        return f"def {f['word']}_{r.randint(1, 99)}(request): return {f['svc']}.{r.choice(WORDS)}({f['ref']!r})"

    def block(self, words: int) -> str:
        """Lines until about ``words`` words."""
        lines: list[str] = []
        count = 0
        while count < words:
            line = self.line()
            lines.append(line)
            count += len(line.split())
        return "\n".join(lines)

    def user_message(self) -> str:
        """20 to 80 words: one or two asks, the rest context."""
        r = self.rng
        target = r.randint(20, 80)
        words = r.choice(ASKS).format(**self.fields()).split()
        if r.random() < 0.4:
            words += r.choice(ASKS).format(**self.fields()).split()
        while len(words) < target:
            words += self.sentence(r.randint(6, 14)).split()
        return " ".join(words[:target])


def make_tools(seed: int) -> list[BaseTool]:
    """The agent's tools; every result is a function of the seed and the arguments."""

    def text(name: str, arg: str) -> Text:
        return Text(random.Random(f"{seed}:{name}:{arg}"))

    @tool
    def read_file(path: str) -> str:
        """Read a file of the workspace and return its text."""
        t = text("read_file", path)
        return f"# {path}\n" + t.block(t.rng.randint(50, 2000))

    @tool
    def run_command(command: str) -> str:
        """Run a shell command in the workspace and return its output and exit code."""
        t = text("run_command", command)
        code = t.rng.choice([0, 0, 0, 1, 2])
        return f"$ {command}\n{t.block(t.rng.randint(20, 400))}\n[exit code {code}]"

    @tool
    def search_web(query: str) -> str:
        """Search the web; returns titles, URLs and snippets."""
        t = text("search_web", query)
        hits = []
        for n in range(t.rng.randint(3, 8)):
            slug = "-".join(t.rng.choice(WORDS) for _ in range(3))
            hits.append(
                f"{n + 1}. {t.sentence(5)}\n   https://docs.example.com/{slug}/{t.rng.randint(1, 999)}"
                f"\n   {t.sentence(t.rng.randint(15, 40))}"
            )
        return f"Results for {query!r}:\n" + "\n".join(hits)

    return [read_file, run_command, search_web]


# ----------------------------------------------------------------------------- the chat model


def orphan_violations(messages: Sequence[BaseMessage]) -> list[str]:
    """What a provider rejects in a request: a tool result that does not answer a tool call of
    the AI message right before it (its results in between), and a tool call whose result does
    not follow it."""
    problems: list[str] = []
    waiting: set[str] = set()  # calls of the last AI message not answered yet
    answerable: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in answerable:
                waiting.discard(message.tool_call_id)
                continue
            problems.append(f"orphan tool result {message.tool_call_id}")
            continue
        problems += [f"dangling tool call {call}" for call in sorted(waiting)]
        waiting = set()
        answerable = set()
        if isinstance(message, AIMessage):
            answerable = {str(call["id"]) for call in message.tool_calls}
            waiting = set(answerable)
    return problems + [f"dangling tool call {call}" for call in sorted(waiting)]


class OverflowErrors:
    """OpenAI's context-length error, raised by the real ``openai`` client: a mock transport
    answers its request with the 400 and the JSON body the API sends."""

    def __init__(self, window: int) -> None:
        self.window = window
        self._tokens = 0
        transport = openai_http.MockTransport(self._respond)
        self.client = openai.OpenAI(
            api_key="sk-soak",
            http_client=openai_http.Client(transport=transport),
            max_retries=0,
        )

    def _respond(self, request: Any) -> Any:
        message = (
            f"This model's maximum context length is {self.window} tokens. However, your "
            f"messages resulted in {self._tokens} tokens. Please reduce the length of the "
            "messages."
        )
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
        return openai_http.Response(
            400, json=body, headers={"x-request-id": f"req_{uuid.uuid4().hex[:24]}"}
        )

    def error(self, tokens: int) -> openai.BadRequestError:
        """The error the client raises for a request of ``tokens`` tokens."""
        self._tokens = tokens
        try:
            self.client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "..."}]
            )
        except openai.BadRequestError as exc:
            return exc
        raise RuntimeError("the mock transport did not answer 400")


class Script:
    """The answer policy and the bookkeeping of :class:`SoakModel` (plain state, one per run).

    On a new user message it draws a plan: no tool (15%), or one to three calls, parallel or in
    a sequence of steps; each later request (ending with tool results) takes the next step, then
    a final answer that quotes ids and paths of the results. ``overflow_rate`` of the calls raise
    the context-length error instead (never two in a row: the retried request is accepted).
    """

    def __init__(self, seed: int, overflow_rate: float, window: int) -> None:
        self.text = Text(random.Random(f"{seed}:model"))
        self.overflow_rng = random.Random(f"{seed}:overflow")
        self.overflow_rate = overflow_rate
        self.errors = OverflowErrors(window)
        self.turn_id: str | None = None
        self.mentioned: list[str] = []
        """Paths the user's message names: the first files the turn reads."""
        self.plan: list[list[dict[str, Any]]] = []
        self.calls = 0
        self.overflow_errors = 0
        self.orphans = 0
        self.orphan_requests = 0
        self.orphan_examples: list[str] = []
        self.last_overflowed = False
        self.call_seq = 0

    # the request as the provider would check it
    def inspect(self, messages: Sequence[BaseMessage]) -> None:
        self.calls += 1
        problems = orphan_violations(messages)
        if problems:
            self.orphans += len(problems)
            self.orphan_requests += 1
            room = 10 - len(self.orphan_examples)
            self.orphan_examples += [f"call {self.calls}: {p}" for p in problems[: max(0, room)]]
        if not self.last_overflowed and self.overflow_rng.random() < self.overflow_rate:
            self.last_overflowed = True
            self.overflow_errors += 1
            window = self.errors.window
            raise self.errors.error(window + self.overflow_rng.randint(1, window // 3))
        self.last_overflowed = False

    def _call(self) -> dict[str, Any]:
        r, t = self.text.rng, self.text
        self.call_seq += 1
        call_id = f"call_{self.call_seq:06d}"
        kind = r.random()
        if kind < 0.05:
            return {"name": "history_lookup", "args": {"query": t.ref()}, "id": call_id}
        if kind < 0.55:
            path = self.mentioned.pop(0) if self.mentioned else t.path()
            return {"name": "read_file", "args": {"path": path}, "id": call_id}
        if kind < 0.8:
            command = r.choice(
                [f"pytest -q tests/{r.choice(SERVICES)}", f"grep -rn {t.ref()} /srv",
                 f"git log --oneline -n {r.randint(3, 30)}", f"psql -c 'select count(*) from {r.choice(WORDS)}'"]
            )  # fmt: skip
            return {"name": "run_command", "args": {"command": command}, "id": call_id}
        query = f"{r.choice(LIBS)} {r.choice(WORDS)} {r.choice(WORDS)}"
        return {"name": "search_web", "args": {"query": query}, "id": call_id}

    def _new_plan(self) -> list[list[dict[str, Any]]]:
        r = self.text.rng
        if r.random() < 0.15:
            return []
        calls = [self._call() for _ in range(r.choice([1, 1, 2, 2, 3]))]
        if len(calls) > 1 and r.random() < 0.5:  # all at once (parallel)
            return [calls]
        if len(calls) == 3 and r.random() < 0.5:  # two at once, then one
            return [calls[:2], calls[2:]]
        return [[call] for call in calls]

    def reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1] if messages else None
        if isinstance(last, HumanMessage) and not is_summary(last) and last.id != self.turn_id:
            self.turn_id = str(last.id)
            self.mentioned = re.findall(r"/srv/[\w/.-]+\w", str(last.text))
            self.plan = self._new_plan()
        r, t = self.text.rng, self.text
        if isinstance(last, HumanMessage | ToolMessage) and self.plan:
            step = self.plan.pop(0)
            preface = t.sentence(r.randint(4, 10)) if r.random() < 0.2 else ""
            return AIMessage(preface, tool_calls=step, id=f"reply-{self.calls:06d}")
        self.plan = []
        results = [m for m in messages[-6:] if isinstance(m, ToolMessage)]
        found = ENTITY.findall(" ".join(str(m.text)[:4000] for m in results))
        quoted = ", ".join(dict.fromkeys(found[:6])) or t.ref()
        body = " ".join(t.sentence(r.randint(8, 18)) for _ in range(r.randint(2, 7)))
        return AIMessage(f"Here is what I found: {quoted}. {body}", id=f"reply-{self.calls:06d}")


class SoakModel(MeteringChatModel):
    """:class:`~ctx_langgraph.testing.MeteringChatModel` (usage = the exact count of the request)
    answering from a :class:`Script`, which checks every request and injects the overflows."""

    script: Any = None

    def _next_reply(self, messages: list[BaseMessage]) -> AIMessage:
        reply: AIMessage = self.script.reply(messages)
        return reply

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.script.inspect(messages)
        return super()._generate(messages, stop, run_manager, **kwargs)


# ----------------------------------------------------------------------------- the summarizer


class FlakySummarizer(testing.FlakySummarizer):
    """The extractive summarizer, failing ``rate`` of its calls in one of four ways (seeded):
    raising, returning nothing, returning garbage, or answering after ``slow_s`` (past the
    compaction timeout). Its garbage reads like the conversation."""

    def __init__(self, rate: float, seed: int, slow_s: float) -> None:
        super().__init__(ExtractiveSummarizer(), rate, seed=seed, slow_s=slow_s)

    def garbage(self) -> str:
        with self.lock:
            t = Text(random.Random(self.rng.random()))
        return t.rng.choice(
            [
                t.sentence(40),
                "# Context summary (format v1)\n\n## Goal\n- " + t.sentence(12),
                json.dumps({"summary": t.sentence(20), "facts": [t.ref(), t.path()]}),
                "I'm sorry, I can't help with summarizing this conversation.",
            ]
        )


# ----------------------------------------------------------------------------- one run


def _digest(message: BaseMessage) -> str:
    return hashlib.blake2b(str(message.text).encode(), digest_size=12).hexdigest()


@dataclass
class Tally:
    """What one run saw: the messages sent and produced, the context decisions, the failures."""

    backend: str
    mode: str
    turns: int = 0
    completed: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    compactions: int = 0
    compaction_failures: int = 0
    fallbacks: int = 0
    overflows: set[str] = field(default_factory=set)
    """The distinct ``context["overflow"]`` records seen: one per compact-and-retry."""
    statuses: Counter[str] = field(default_factory=Counter)
    compaction_problems: list[str] = field(default_factory=list)
    produced: dict[str, tuple[str, str]] = field(default_factory=dict)
    """message id -> (role, digest of its text): every message the soak expects in the store."""
    unnamed_tool_results: list[str] = field(default_factory=list)
    last_reply_id: str | None = None
    rss_mb: dict[int, float] = field(default_factory=dict)
    """The process's resident memory (MB) after every hundredth turn, by turn."""
    context_bytes: dict[int, int] = field(default_factory=dict)
    """The state's ``context`` channel (JSON bytes) after every tenth turn, by turn."""
    context_keys: int = 0
    """The most top-level keys the ``context`` channel had."""

    def sample_context(self, turn: int, values: dict[str, Any]) -> None:
        """What the package keeps in the state, measured after ``turn`` (every tenth)."""
        context = values.get("context") or {}
        self.context_bytes[turn] = len(json.dumps(context, default=str))
        self.context_keys = max(self.context_keys, len(context))

    def send(self, message: HumanMessage) -> None:
        self.turns += 1
        self.produced[str(message.id)] = ("human", _digest(message))
        self.last_reply_id = None

    def take(self, chunk: dict[str, Any]) -> None:
        """One ``stream_mode="updates"`` chunk: {node: its update}."""
        for node, update in chunk.items():
            if not isinstance(update, dict):
                continue
            context = unpack(update.get("context"))
            compaction = context.get("compaction")
            overflow = context.get("overflow")
            if overflow:  # the recovery's record, written once per compact-and-retry
                self.overflows.add(json.dumps(overflow, sort_keys=True, default=str))
            # a compaction is ctx_compact's, or the one the overflow recovery forced
            if (node == "ctx_compact" or overflow) and isinstance(compaction, dict):
                status = str(compaction.get("status"))
                self.statuses[status] += 1
                self.compactions += status in COMMITTED
                self.compaction_failures += status == "failed"
                self.fallbacks += bool(compaction.get("fallback"))
                if status == "failed" and len(self.compaction_problems) < 10:
                    self.compaction_problems.append(
                        "; ".join(map(str, compaction.get("problems") or ()))[:400]
                    )
            if node.startswith("ctx_"):
                continue  # our nodes only rewrite the view: the messages they carry are not new
            for message in update.get("messages") or ():
                if not isinstance(message, AIMessage | ToolMessage) or message.id in self.produced:
                    continue  # a view the node sends back (after a retry) repeats known ids
                if any(key.startswith("ctx_") for key in message.additional_kwargs):
                    continue  # our own stand-ins (summary, previews): not conversation messages
                if message.id is None:  # cannot happen with add_messages; reported if it does
                    self.unnamed_tool_results.append(str(getattr(message, "tool_call_id", "?")))
                    continue
                self.produced[str(message.id)] = (message.type, _digest(message))
                if isinstance(message, AIMessage) and not message.tool_calls:
                    self.last_reply_id = str(message.id)

    def fail(self, turn: int, exc: BaseException) -> None:
        if type(exc).__name__ == "CompactionFailed":
            self.compaction_failures += 1
        self.failures.append({"turn": turn, "type": type(exc).__name__, "message": str(exc)[:600]})


class LogTally(logging.Handler):
    """Counts the package's warnings by shape (digits folded) instead of printing each one."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.shapes: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.shapes[re.sub(r"\d+", "N", record.getMessage())[:140]] += 1

    @contextlib.contextmanager
    def watching(self, logger: logging.Logger) -> Iterator[LogTally]:
        logger.addHandler(self)
        try:
            yield self
        finally:
            logger.removeHandler(self)


def recovered_by(records: set[str]) -> Counter[str]:
    """How each overflow retry made room: a compaction, shorter tool results, or none (sent
    once more unchanged)."""
    kinds: Counter[str] = Counter()
    for text in records:
        record = json.loads(text)
        if record.get("unchanged"):
            kinds["sent again unchanged"] += 1
        elif record.get("shortened_tool_results"):
            kinds["shortened tool results"] += 1
        else:
            kinds["compaction"] += 1
    return kinds


def failure_groups(failures: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Failures grouped by exception type and message shape (digits folded), biggest first."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for failure in failures:
        shape = re.sub(r"\d+", "N", failure["message"])[:160]
        group = groups.setdefault(
            (failure["type"], shape),
            {"type": failure["type"], "count": 0, "example": failure["message"], "turns": []},
        )
        group["count"] += 1
        if len(group["turns"]) < 10:
            group["turns"].append(failure["turn"])
    return sorted(groups.values(), key=lambda g: -g["count"])


@dataclass
class Run:
    """One backend's soak: the graph, its store and the seeded parts."""

    tally: Tally
    graph: Any
    store: HistoryStore
    script: Script
    summarizer: FlakySummarizer
    scope: Scope
    config: dict[str, Any]
    users: Text


def context_config(args: argparse.Namespace) -> ContextConfig:
    """The window under test: ``--window`` tokens, 512 kept for the reply; a small compaction
    timeout so the slow summarizer calls cost little."""
    return ContextConfig(
        context_window=args.window,
        output_reserve=min(OUTPUT_RESERVE, args.window // 8),
        keep_recent_tokens=args.window // 4,
        summary_max_tokens=max(64, args.window // 8),
        tool_output_cap_tokens=max(64, args.window // 8),
        compaction_timeout_s=args.compaction_timeout,
    )


def build(backend: str, store: HistoryStore, saver: Any, args: argparse.Namespace) -> Run:
    """The compiled agent on a fresh thread of ``store``, and its seeded parts."""
    store.setup()
    script = Script(args.seed, args.overflow_rate, args.window)
    model = SoakModel(replies=["(unused)"], script=script)
    summarizer = FlakySummarizer(
        args.summarizer_failure_rate,
        args.seed,
        slow_s=args.compaction_timeout + max(0.1, args.compaction_timeout / 5),
    )
    lookup = make_history_lookup_tool(store, max_tokens=max(300, args.window // 8))
    graph = create_context_agent(
        model,
        make_tools(args.seed),
        store=store,
        config=context_config(args),
        summarizer=summarizer,
        prompt="You are a coding assistant with a workspace. Use the tools; be brief.",
        lookup_tool=lookup,
    ).compile(checkpointer=saver)
    thread = f"soak-{uuid.uuid4().hex[:12]}"  # reruns on the same database never collide
    config = {
        "configurable": {"thread_id": thread, "ctx_tenant": TENANT},
        "recursion_limit": 200,
    }
    mode = "async" if args.use_async else "sync"
    return Run(
        Tally(backend, mode),
        graph,
        store,
        script,
        summarizer,
        Scope(thread, TENANT),
        config,
        Text(random.Random(f"{args.seed}:user")),
    )


def human(run: Run, turn: int) -> HumanMessage:
    return HumanMessage(run.users.user_message(), id=f"user-{turn:05d}")


def rss_mb() -> float:
    """The process's resident memory now, in MB (Linux: ``/proc/self/statm``; elsewhere the
    peak so far, from ``getrusage``)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def progress(run: Run, turn: int, began: float) -> None:
    if (turn + 1) % 100 == 0:
        tally = run.tally
        tally.rss_mb[turn + 1] = rss_mb()
        print(
            f"  {tally.backend}: {turn + 1} turns, {len(tally.failures)} failed, "
            f"{time.perf_counter() - began:.0f} s",
            file=sys.stderr,
        )


def soak_sync(run: Run, turns: int) -> float:
    began = time.perf_counter()
    for turn in range(turns):
        message = human(run, turn)
        run.tally.send(message)
        try:
            for chunk in run.graph.stream(
                {"messages": [message]}, run.config, stream_mode="updates"
            ):
                run.tally.take(chunk)
        except Exception as exc:  # a failed turn: counted, and the user sends the next one
            run.tally.fail(turn, exc)
        else:
            run.tally.completed += 1
        if (turn + 1) % 10 == 0:
            run.tally.sample_context(turn + 1, run.graph.get_state(run.config).values)
        progress(run, turn, began)
    return time.perf_counter() - began


async def soak_async(run: Run, turns: int) -> float:
    began = time.perf_counter()
    for turn in range(turns):
        message = human(run, turn)
        run.tally.send(message)
        try:
            async for chunk in run.graph.astream(
                {"messages": [message]}, run.config, stream_mode="updates"
            ):
                run.tally.take(chunk)
        except Exception as exc:
            run.tally.fail(turn, exc)
        else:
            run.tally.completed += 1
        if (turn + 1) % 10 == 0:
            run.tally.sample_context(turn + 1, (await run.graph.aget_state(run.config)).values)
        progress(run, turn, began)
    return time.perf_counter() - began


def check(run: Run, wall: float) -> dict[str, Any]:
    """The run's figures, with the two checks against the store and the model's requests."""
    tally, script = run.tally, run.script
    events = {e.event_id: e for e in run.store.read_events(run.scope)}
    lost = [i for i in tally.produced if i not in events]
    altered = [
        i
        for i in tally.produced
        if i in events and _digest(events[i].message) != tally.produced[i][1]
    ]
    lost_by_role = Counter(tally.produced[i][0] for i in lost)
    return {
        "backend": tally.backend,
        "mode": tally.mode,
        "turns": tally.turns,
        "completed": tally.completed,
        "failed": len(tally.failures),
        "failures": tally.failures[:10],
        "failure_groups": failure_groups(tally.failures),
        "compactions": tally.compactions,
        "compaction_failures": tally.compaction_failures,
        "fallbacks": tally.fallbacks,
        "overflow_retries": len(tally.overflows),
        "overflow_recovered_by": dict(recovered_by(tally.overflows)),
        "model_calls": script.calls,
        "lost_messages": len(lost) + len(tally.unnamed_tool_results),
        "lost_by_role": dict(lost_by_role),
        "lost_examples": lost[:10],
        "last_reply_recorded": tally.last_reply_id is None or tally.last_reply_id in events,
        "altered_messages": len(altered),
        "altered_examples": [
            f"{tally.produced[i][0]} {i} ({events[i].name}, revision {events[i].revision}, "
            f"{len(events[i].text)} chars stored)"
            for i in altered[:10]
        ],
        "orphans": script.orphans,
        "orphan_requests": script.orphan_requests,
        "orphan_examples": script.orphan_examples,
        "messages_expected": len(tally.produced),
        "events_in_store": len(events),
        "compaction_statuses": dict(tally.statuses),
        "compaction_problems": tally.compaction_problems,
        "overflow_errors_injected": script.overflow_errors,
        "summarizer_calls": run.summarizer.calls,
        "summarizer_failures_injected": dict(run.summarizer.injected),
        "summarizer_slowest_s": round(run.summarizer.slowest, 3),
        "wall_s": round(wall, 2),
        "ms_per_turn": round(wall * 1000 / max(1, tally.turns), 2),
        "rss_mb": {str(turn): mb for turn, mb in tally.rss_mb.items()},
        "rss_growth": rss_growth(tally.rss_mb),
        "context_keys": tally.context_keys,
        "context_bytes_max": max(tally.context_bytes.values(), default=0),
        "context_bytes": {
            str(turn): size for turn, size in tally.context_bytes.items() if turn % 100 == 0
        },
    }


def rss_growth(rss: dict[int, float]) -> float | None:
    """Resident memory at the last sample over the first (turn 100), less 1 (0.05: +5%); None
    with fewer than two samples."""
    if len(rss) < 2:
        return None
    turns = sorted(rss)
    return round(rss[turns[-1]] / rss[turns[0]] - 1, 4)


@contextlib.contextmanager
def sync_saver(kind: str, tmp: Path, name: str) -> Iterator[BaseCheckpointSaver[Any]]:
    if kind == "memory":
        yield InMemorySaver()
        return
    conn = sqlite3.connect(str(tmp / f"{name}-checkpoints.sqlite"), check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@contextlib.asynccontextmanager
async def async_saver(kind: str, tmp: Path, name: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    if kind == "memory":
        yield InMemorySaver()
        return
    async with AsyncSqliteSaver.from_conn_string(str(tmp / f"{name}-checkpoints.sqlite")) as saver:
        yield saver


def run_backend(
    name: str, make_store: Callable[[], HistoryStore], args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    store = make_store()
    with LogTally().watching(logging.getLogger("ctx_langgraph")) as logged:
        result = _run_backend(name, store, args, tmp)
    result["warnings_logged"] = dict(logged.shapes.most_common(10))
    return result


def _run_backend(
    name: str, store: HistoryStore, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    try:
        if args.use_async:

            async def go() -> dict[str, Any]:
                async with async_saver(args.saver, tmp, name) as saver:
                    run = build(name, store, saver, args)
                    wall = await soak_async(run, args.turns)
                    return check(run, wall)

            return asyncio.run(go())
        with sync_saver(args.saver, tmp, name) as saver:
            run = build(name, store, saver, args)
            return check(run, soak_sync(run, args.turns))
    finally:
        store.close()


# ----------------------------------------------------------------------------- output

RSS_GROWTH_TARGET = 0.10
"""Resident memory from turn 100 to the last turn, at most (reported, not an exit-code target:
the in-memory checkpointer keeps every checkpoint by design; ``--saver sqlite`` measures ours)."""
TARGETS = (
    ("failed", "failed turns"),
    ("lost_messages", "lost messages"),
    ("orphans", "orphaned tool messages / dangling tool calls in requests"),
)


def passed(result: dict[str, Any]) -> bool:
    return all(result[key] == 0 for key, _ in TARGETS)


def report(runs: list[dict[str, Any]], settings: dict[str, Any]) -> None:
    print(
        f"Soak: {settings['turns']:,} turns per backend, window {settings['window']:,} tokens "
        f"(reserve {settings['output_reserve']}), {settings['mode']} run, checkpointer "
        f"{settings['saver']}; injected: {settings['overflow_rate']:.0%} context-length errors, "
        f"{settings['summarizer_failure_rate']:.0%} summarizer failures; seed {settings['seed']}"
    )
    headers = ["backend", "turns", "completed", "failed", "compactions", "compaction failures",
               "fallbacks", "overflow retries", "model calls", "lost", "orphans", "wall s",
               "ms/turn"]  # fmt: skip
    rows = [
        [r["backend"], r["turns"], r["completed"], r["failed"], r["compactions"],
         r["compaction_failures"], r["fallbacks"], r["overflow_retries"], r["model_calls"],
         r["lost_messages"], r["orphans"], r["wall_s"], r["ms_per_turn"]]
        for r in runs
    ]  # fmt: skip
    print(format_table(headers, rows))
    mark = {True: "PASS", False: "FAIL"}
    for r in runs:
        print()
        for key, label in TARGETS:
            print(f"{r['backend']} {label}: {r[key]:,} (target 0) {mark[r[key] == 0]}")
        print(
            f"{r['backend']}: last reply recorded: {r['last_reply_recorded']}; "
            f"lost by role: {r['lost_by_role'] or '-'}; altered in the store: "
            f"{r['altered_messages']}; {r['messages_expected']:,} messages expected, "
            f"{r['events_in_store']:,} visible events"
        )
        print(
            f"{r['backend']}: injected {r['overflow_errors_injected']} context-length errors, "
            f"summarizer failures {r['summarizer_failures_injected'] or '-'} of "
            f"{r['summarizer_calls']} calls; compaction statuses {r['compaction_statuses']}; "
            f"overflows recovered by {r['overflow_recovered_by'] or '-'}"
        )
        if r["rss_growth"] is not None:
            first, last = min(r["rss_mb"], key=int), max(r["rss_mb"], key=int)
            growth = r["rss_growth"]
            print(
                f"{r['backend']}: resident memory {r['rss_mb'][first]:,.1f} MB at turn {first}, "
                f"{r['rss_mb'][last]:,.1f} MB at turn {last}: {growth:+.1%} (target <= "
                f"{RSS_GROWTH_TARGET:.0%}) {mark[growth <= RSS_GROWTH_TARGET]}"
            )
        for problems in r["compaction_problems"][:3]:
            print(f"  compaction failed: {problems}")
        for example in r["orphan_examples"][:3]:
            print(f"  orphan: {example}")
        for group in r["failure_groups"]:
            turns = ", ".join(map(str, group["turns"]))
            print(f"  {group['count']:>4} x {group['type']}: {group['example'][:300]}")
            print(f"         (turns {turns}{', ...' if group['count'] > 10 else ''})")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--pg", default=None, help="PostgreSQL DSN: soak it too")
    parser.add_argument("--window", type=int, default=4096, help="the context window (tokens)")
    parser.add_argument("--summarizer-failure-rate", type=float, default=0.3)
    parser.add_argument("--overflow-rate", type=float, default=0.02)
    parser.add_argument(
        "--compaction-timeout", type=float, default=1.0, help="compaction_timeout_s (seconds)"
    )
    parser.add_argument(
        "--backends",
        default="sqlite,postgres",
        help="which of sqlite,postgres to soak (postgres only with --pg)",
    )
    parser.add_argument("--saver", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--async", dest="use_async", action="store_true", help="graph.astream")
    parser.add_argument("--no-check", action="store_true", help="exit 0 even on a missed target")
    args = parser.parse_args(argv)
    if args.window < 1024:
        parser.error("--window must be at least 1024 tokens")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not set(args.backends) <= {"sqlite", "postgres"} or not args.backends:
        parser.error(f"--backends: sqlite and/or postgres, got {args.backends}")
    if args.backends == ["postgres"] and not args.pg:
        parser.error("--backends postgres needs --pg DSN")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    config = context_config(args)
    settings = {
        "turns": args.turns,
        "seed": args.seed,
        "window": args.window,
        "output_reserve": config.output_reserve,
        "summarizer_failure_rate": args.summarizer_failure_rate,
        "overflow_rate": args.overflow_rate,
        "compaction_timeout_s": args.compaction_timeout,
        "saver": args.saver,
        "mode": "async" if args.use_async else "sync",
        "backends": args.backends,
    }
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.sqlite"
        if "sqlite" in args.backends:
            sqlite = run_backend(
                "sqlite", lambda: SQLiteHistoryStore.from_path(path), args, Path(tmp)
            )
            runs.append(sqlite)
        if "postgres" in args.backends and args.pg:
            dsn = args.pg
            runs.append(
                run_backend(
                    "postgres", lambda: PostgresHistoryStore.from_conn_string(dsn), args, Path(tmp)
                )
            )
        elif "postgres" in args.backends:
            print("  PostgreSQL skipped (no --pg DSN)", file=sys.stderr)
    ok = all(passed(r) for r in runs)
    if args.json:
        print(json.dumps({"settings": settings, "runs": runs, "passed": ok}))
    else:
        report(runs, settings)
    return 0 if ok or args.no_check else 1


if __name__ == "__main__":
    sys.exit(main())
