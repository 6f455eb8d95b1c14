"""The parts every turn is made of: tool calls, turns, filler values and record formats."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctx_langgraph.eval.synthetic._data import PHRASES, SUBJECTS, WORDS

FIRST, LAST, CITIES = WORDS["first"], WORDS["last"], WORDS["cities"]
ITEMS, SERVICES, ENVS = WORDS["items"], WORDS["services"], WORDS["envs"]
LIMIT_FILES, INTEGRATIONS, PLANS = WORDS["limit_files"], WORDS["integrations"], WORDS["plans"]
MONTHS = SUBJECTS["months"]


def money(rng: random.Random, low: int, high: int) -> str:
    return f"${rng.randint(low, high):,}.{rng.randint(0, 99):02d}"


def join(*parts: str) -> str:
    return " ".join(part for part in parts if part)


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, str]
    output: str
    error: bool = False


@dataclass(frozen=True)
class DialogueTurn:
    request: str
    cycles: tuple[tuple[str, tuple[Call, ...]], ...]
    reply: str
    evidence_call: int | None = None
    """Index (over the turn's calls) of the call whose output states a planted fact."""


def one_call(words: Words, request: str, call: Call, reply: str) -> DialogueTurn:
    """A turn of one tool call, its request and reply dressed by :meth:`Words.request` and
    :meth:`Words.reply` (in that order, around the preface: the draws stay in sequence)."""
    dressed = words.request(request)
    preface = words.pick(PHRASES["prefaces"])
    return DialogueTurn(dressed, ((preface, (call,)),), words.reply(reply))


class Words:
    """Filler values that never collide with a planted value."""

    def __init__(self, rng: random.Random, values: set[str], paths: Sequence[str]) -> None:
        self.rng = rng
        self.values = values
        self.paths = tuple(paths)

    def pick(self, options: Sequence[str]) -> str:
        return self.rng.choice(options)

    def request(self, core: str) -> str:
        """A user's request: ``core`` with an opener, a context and a closer (each may be empty)."""
        return join(
            self.pick(PHRASES["openers"]),
            core,
            self.pick(PHRASES["contexts"]),
            self.pick(PHRASES["closers"]),
        )

    def reply(self, core: str) -> str:
        """The assistant's final answer: ``core`` with a follow-up (may be empty)."""
        return join(core, self.pick(PHRASES["follow_ups"]))

    def _fresh(self, make: Callable[[], str]) -> str:
        while True:
            value = make()
            if value not in self.values:
                return value

    def _fresh_path(self, make: Callable[[], str]) -> str:
        while True:
            value = make()
            if not any(path in value for path in self.paths):
                return value

    def order(self) -> str:
        return self._fresh(lambda: f"ORD-{self.rng.randint(10000, 99999)}")

    def ticket(self) -> str:
        return self._fresh(lambda: f"TCK-{self.rng.randint(1000, 9999)}")

    def invoice(self) -> str:
        return self._fresh(
            lambda: f"INV-{self.rng.choice((2023, 2024))}-{self.rng.randint(1, 9999):04d}"
        )

    def amount(self, low: int = 20, high: int = 4000) -> str:
        return self._fresh(lambda: money(self.rng, low, high))

    def person(self) -> tuple[str, str]:
        return self.pick(FIRST), self.pick(LAST)

    def name(self) -> str:
        return " ".join(self.person())

    def company(self) -> str:
        return f"{self.pick(WORDS['company_head'])} {self.pick(WORDS['company_tail'])}"

    def date(self, month: int = 2) -> str:
        return f"2024-{month:02d}-{self.rng.randint(1, 28):02d}"

    def clock(self) -> str:
        rng = self.rng
        return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"

    def config_path(self) -> str:
        rng = self.rng
        return self._fresh_path(
            lambda: (
                f"/srv/{rng.choice(SERVICES)}/config/{rng.choice(ENVS)}/"
                f"{rng.choice(LIMIT_FILES)}.yaml"
            )
        )

    def backup_path(self) -> str:
        rng = self.rng
        return self._fresh_path(
            lambda: (
                f"/mnt/backups/{rng.choice(SERVICES)}/nightly/"
                f"acct-{rng.randint(1, 99999):05d}.tar.zst"
            )
        )

    def app_path(self, service: str) -> str:
        rng = self.rng
        return self._fresh_path(
            lambda: rng.choice(
                (
                    f"/srv/{service}/app/{rng.choice(('handlers', 'jobs', 'models', 'api'))}/"
                    f"{rng.choice(('orders', 'refunds', 'retry', 'tax', 'sync', 'export'))}"
                    f"{rng.choice(('', '_v2', '_utils'))}.py",
                    f"/srv/{service}/config/{rng.choice(ENVS)}/"
                    f"{rng.choice(('app', 'workers', 'features', 'queues'))}.yaml",
                    f"/srv/{service}/static/build/chunk-{rng.randint(0, 0xFFFFF):05x}.js",
                    f"/srv/{service}/migrations/{rng.randint(100, 420):04d}_"
                    f"{rng.choice(('add_index', 'drop_column', 'backfill', 'rename'))}.sql",
                )
            )
        )


# --------------------------------------------------------------------------- tool outputs


def order_record(words: Words, order: str, name: str, city: str) -> tuple[str, str]:
    rng = words.rng
    status = words.pick(WORDS["statuses"])
    carrier = words.pick(WORDS["carriers"])
    record = (
        f"order {order}\ncustomer: {name} ({city})\nitem: {words.pick(ITEMS)} x"
        f"{rng.randint(1, 3)}\ntotal: {words.amount()}\nstatus: {status}\ncarrier: {carrier}, "
        f"tracking {rng.randint(10**11, 10**12 - 1)}\nshipped from: "
        f"{words.pick(WORDS['warehouses'])} on {words.date(2)}\nlast event: {words.date(3)} "
        f"{words.clock()} arrival at the {words.pick(CITIES)} hub\n"
    )
    return record, status


def invoice_record(words: Words, invoice: str, company: str, month: str) -> str:
    rng = words.rng
    seats = rng.randint(5, 180)
    return (
        f"invoice {invoice}\ncustomer: {company}\nperiod: {month}\nplan: {words.pick(PLANS)}, "
        f"{seats} seats\nseats: {words.amount(100, 9000)}\napi overage: "
        f"{words.amount(0, 900)}\ntax: {words.amount(10, 2000)}\ntotal: "
        f"{words.amount(200, 12000)}\nstatus: {words.pick(('paid', 'open', 'overdue'))}, due "
        f"{words.date(3)}\n"
    )


def config_text(words: Words, path: str) -> str:
    rng = words.rng
    return (
        f"# {path}\nservice: {path.split('/')[2]}\nretry:\n  attempts: {rng.randint(2, 8)}\n"
        f"  backoff_seconds: {rng.choice((1, 2, 5, 10))}\ntimeouts:\n  connect_ms: "
        f"{rng.choice((500, 1000, 2000))}\n  read_ms: {rng.choice((5000, 10000, 30000))}\n"
        f"queues:\n  default: {rng.randint(2, 32)}\n  exports: {rng.randint(1, 8)}\n"
        f"features:\n  {words.pick(INTEGRATIONS)}: {rng.choice(('true', 'false'))}\n"
        f"  {words.pick(INTEGRATIONS)}: {rng.choice(('true', 'false'))}\n"
    )


def status_output(words: Words, service: str, hours: int, memory: int) -> str:
    rng = words.rng
    return (
        f"* {service}-worker.service - {service} background worker\n   Loaded: loaded "
        f"(/etc/systemd/system/{service}-worker.service; enabled)\n   Active: active "
        f"(running) since {words.date(3)} {words.clock()} UTC; {hours}h ago\n Main PID: "
        f"{rng.randint(1000, 60000)} (python3)\n    Tasks: {rng.randint(8, 64)}\n   Memory: "
        f"{memory}M\n"
    )


def log_output(words: Words) -> str:
    return "".join(
        f"{words.date(3)}T{words.clock()}Z "
        f"{words.pick(('INFO ', 'INFO ', 'WARN ', 'ERROR'))} job "
        f"{words.pick(('sync', 'export', 'retry', 'reconcile'))} "
        f"{words.pick(('finished', 'started', 'took 4.2s', 'retried once', 'timed out'))}\n"
        for _ in range(words.rng.randint(5, 8))
    )
