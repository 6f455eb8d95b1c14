"""Giant tool outputs: CSV exports, log dumps and listings of 8,000 to 16,000 characters,
some with a planted fact in the middle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctx_langgraph.eval.synthetic._data import GIANTS as _TEXTS
from ctx_langgraph.eval.synthetic._data import TURNS, WORDS
from ctx_langgraph.eval.synthetic._words import (
    CITIES,
    INTEGRATIONS,
    ITEMS,
    PLANS,
    SERVICES,
    Call,
    DialogueTurn,
    Words,
)

__all__ = ["GIANTS", "Giant", "giant_turn"]

_TARGET = (8_500, 15_000)
"""The size of a giant output, in characters (before a planted line)."""


@dataclass(frozen=True)
class Giant:
    """One giant output: the request, the tool call, the header, a row maker and the reply
    (with ``{rows}``)."""

    request: str
    tool: str
    args: dict[str, str]
    header: str
    row: Callable[[Words], str]
    reply: str


def _order_row(words: Words) -> str:
    return (
        f"{words.order()},{words.name()},{words.pick(CITIES)},{words.pick(ITEMS)},"
        f'"{words.amount()}",refund_requested,{words.date(words.rng.randint(1, 2))}'
    )


def _ticket_row(words: Words) -> str:
    priority = words.pick(("low", "normal", "normal", "high"))
    ticket, company = words.ticket(), words.company()
    subject = words.pick(WORDS["ticket_subjects"])
    return f"{ticket:<9}  open    {priority:<8}  {company:<26}  {subject}"


def _log_row(words: Words) -> str:
    rng = words.rng
    stamp = f"2024-03-{rng.randint(1, 3):02d}T{words.clock()}.{rng.randint(0, 999):03d}Z"
    rid = f"{rng.randint(0, 0xFFFFFFFF):08x}"
    event = rng.randrange(5)
    if event == 0:
        return (
            f'{stamp} INFO  credits.apply account="{words.company()}" kind='
            f"{words.pick(('goodwill', 'proration', 'promo'))} amount={words.amount()} "
            f"request_id={rid}"
        )
    if event == 1:
        return (
            f"{stamp} ERROR gateway.charge timeout after 30000 ms attempt={rng.randint(1, 4)} "
            f"request_id={rid}"
        )
    if event == 2:
        return f"{stamp} WARN  queue.depth billing-jobs={rng.randint(100, 9000)} threshold=5000"
    if event == 3:
        return (
            f"{stamp} INFO  invoice.render invoice={words.invoice()} pages={rng.randint(1, 9)} "
            f"ms={rng.randint(40, 900)}"
        )
    return (
        f"{stamp} INFO  worker.heartbeat pid={rng.randint(1000, 60000)} "
        f"jobs_done={rng.randint(0, 500)}"
    )


def _balance_row(words: Words) -> str:
    rng = words.rng
    return (
        f"ACC-{rng.randint(0, 999999):06d},{words.name()},{words.pick(CITIES)},"
        f'"{words.amount()}",{rng.randint(1, 120)},{words.pick(PLANS)}'
    )


def _grep_row(words: Words) -> str:
    rng = words.rng
    return (
        f"{words.config_path()}:{rng.randint(3, 80)}:  {words.pick(INTEGRATIONS)}_rate_limit: "
        f"{rng.choice((60, 120, 300, 600, 1200))}/min"
    )


def _backup_row(words: Words) -> str:
    status = words.pick(("ok    ", "ok    ", "ok    ", "failed"))
    return (
        f"{words.company():<26}  nightly  {words.backup_path()}  {status}  "
        f"{words.rng.randint(1, 900)} GB"
    )


def _find_row(words: Words) -> str:
    service = words.pick(SERVICES)
    return f"{words.rng.randint(120, 900000):>8} {words.date(3)} {words.app_path(service)}"


def _catalog_row(words: Words) -> str:
    rng = words.rng
    return (
        f"  - sku: {words.pick(PLANS)}-{rng.randint(100, 999)}\n    name: "
        f"{words.pick(PLANS).title()} {rng.choice(('Monthly', 'Annual', 'Two-year'))}\n"
        f"    price: {words.amount(5, 900)}\n    seats_included: {rng.randint(1, 50)}\n"
        f"    api_calls: {rng.choice((10_000, 50_000, 250_000, 1_000_000))}"
    )


_ROWS: dict[str, Callable[[Words], str]] = {
    "orders": _order_row,
    "tickets": _ticket_row,
    "log": _log_row,
    "balances": _balance_row,
    "grep": _grep_row,
    "backups": _backup_row,
    "find": _find_row,
    "catalog": _catalog_row,
}

GIANTS: dict[str, Giant] = {
    key: Giant(
        request=text["request"],
        tool=text["tool"],
        args=dict(text["args"]),
        header=text["header"],
        row=_ROWS[key],
        reply=text["reply"],
    )
    for key, text in _TEXTS.items()
}
"""Every giant output by name (``data/giants.json``), with its row maker."""


def giant_turn(words: Words, giant: Giant, planted: str | None) -> DialogueTurn:
    """A turn whose one call returns ``giant``'s output, ``planted`` in the middle of its rows."""
    rng = words.rng
    target = rng.randint(*_TARGET)
    rows: list[str] = []
    size = len(giant.header)
    while size < target:
        rows.append(giant.row(words))
        size += len(rows[-1]) + 1
    if planted is not None:
        rows.insert(len(rows) // 2, planted)
    body = "\n".join(rows) + "\n"
    output = f"{giant.header}\n{body}" if giant.header else body
    call = Call(giant.tool, dict(giant.args), output)
    preface = words.pick(TURNS["giant_prefaces"])
    return DialogueTurn(
        words.request(giant.request),
        ((preface, (call,)),),
        giant.reply.format(rows=len(rows)),
        evidence_call=0 if planted is not None else None,
    )
