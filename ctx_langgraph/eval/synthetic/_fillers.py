"""The turns between planted facts: questions answered from memory, lookups, shell checks,
parallel and chained calls, and failed calls retried."""

from __future__ import annotations

from collections.abc import Callable

from ctx_langgraph.eval.synthetic._data import PHRASES, TURNS
from ctx_langgraph.eval.synthetic._words import (
    CITIES,
    MONTHS,
    PLANS,
    SERVICES,
    Call,
    DialogueTurn,
    Words,
    config_text,
    invoice_record,
    log_output,
    one_call,
    order_record,
    status_output,
)

__all__ = ["FILLERS", "command_case"]


def command_case(words: Words) -> tuple[str, str, str, str]:
    """A shell check: the request, the command, its output and the reply."""
    rng = words.rng
    service = words.pick(SERVICES)
    choice = rng.randrange(4)
    if choice == 0:
        hours = rng.randint(2, 70)
        memory = rng.randint(180, 1900)
        output = status_output(words, service, hours, memory)
        fields: dict[str, object] = {"service": service, "hours": hours, "memory": memory}
        return _command_texts("status", fields, output)
    if choice == 1:
        used = rng.randint(41, 97)
        output = (
            "Filesystem      Size  Used Avail Use% Mounted on\n"
            f"/dev/nvme1n1    500G  {used * 5}G  {500 - used * 5}G  {used}% /srv/{service}\n"
        )
        texts = TURNS["command"]["disk"]
        verdict = texts["tight"] if used > 85 else texts["roomy"]
        fields = {"service": service, "used": used, "free": 500 - used * 5, "verdict": verdict}
        return _command_texts("disk", fields, output)
    if choice == 2:
        return _command_texts("log", {"service": service}, log_output(words))
    ready = rng.randint(2, 6)
    output = "NAME                              READY   STATUS    RESTARTS   AGE\n" + "".join(
        f"{service}-api-{rng.randint(0, 0xFFFFFF):06x}-{rng.randint(0, 0xFFFFF):05x}   1/1     "
        f"Running   {rng.randint(0, 3)}          {rng.randint(1, 9)}d\n"
        for _ in range(ready)
    )
    return _command_texts("pods", {"service": service, "ready": ready}, output)


def _command_texts(case: str, fields: dict[str, object], output: str) -> tuple[str, str, str, str]:
    texts = TURNS["command"][case]
    return (
        texts["request"].format(**fields),
        texts["command"].format(**fields),
        output,
        texts["reply"].format(**fields),
    )


def _chat_turn(words: Words) -> DialogueTurn:
    chat = words.rng.choice(PHRASES["chats"])
    fields = {
        "name": words.name(),
        "company": words.company(),
        "amount": words.amount(100, 600),
        "service": words.pick(SERVICES),
    }
    return DialogueTurn(
        words.request(chat["question"].format(**fields)), (), chat["answer"].format(**fields)
    )


def _order_turn(words: Words) -> DialogueTurn:
    order, (first, last), city = words.order(), words.person(), words.pick(CITIES)
    record, status = order_record(words, order, f"{first} {last}", city)
    texts = TURNS["order"]
    core = words.pick(texts["requests"]).format(order=order, name=f"{first} {last}", city=city)
    reply = texts["delivered" if status == "delivered" else "on_its_way"]
    reply = reply.format(order=order, status=status, first=first)
    return one_call(words, core, Call("search_orders", {"query": order}, record), reply)


def _invoice_turn(words: Words) -> DialogueTurn:
    invoice, company, month = words.invoice(), words.company(), words.pick(MONTHS)
    texts = TURNS["invoice"]
    core = words.pick(texts["requests"]).format(company=company, month=month, invoice=invoice)
    reply = words.pick(texts["replies"])
    call = Call(
        "get_invoice", {"invoice_id": invoice}, invoice_record(words, invoice, company, month)
    )
    return one_call(words, core, call, reply)


def _file_turn(words: Words) -> DialogueTurn:
    texts = TURNS["file"]
    path = f"/etc/{words.pick(SERVICES)}/{words.pick(texts['roles'])}.yaml"
    case = words.rng.choice(texts["cases"])
    call = Call("read_file", {"path": path}, config_text(words, path))
    return one_call(words, case["request"].format(path=path), call, case["reply"])


def _command_turn(words: Words) -> DialogueTurn:
    request, command, output, reply = command_case(words)
    return one_call(words, request, Call("run_command", {"command": command}, output), reply)


def _parallel_invoices(words: Words, count: int) -> tuple[str, tuple[Call, ...], str]:
    company = words.company()
    months = words.rng.sample(MONTHS, count)
    invoices = [words.invoice() for _ in months]
    calls = tuple(
        Call("get_invoice", {"invoice_id": inv}, invoice_record(words, inv, company, month))
        for inv, month in zip(invoices, months, strict=True)
    )
    texts = TURNS["parallel"]["invoices"]
    fields = {"company": company, "count": count, "listed": ", ".join(invoices[:-1])}
    fields["last_one"] = invoices[-1]
    return texts["request"].format(**fields), calls, texts["reply"].format(**fields)


def _parallel_orders(words: Words, count: int) -> tuple[str, tuple[Call, ...], str]:
    first, last = words.person()
    orders = [words.order() for _ in range(count)]
    city = words.pick(CITIES)
    calls = tuple(
        Call("search_orders", {"query": o}, order_record(words, o, f"{first} {last}", city)[0])
        for o in orders
    )
    texts = TURNS["parallel"]["orders"]
    fields = {"first": first, "last": last, "city": city, "count": count}
    fields |= {"listed": ", ".join(orders[:-1]), "last_one": orders[-1]}
    return texts["request"].format(**fields), calls, texts["reply"].format(**fields)


def _parallel_worker(words: Words, count: int) -> tuple[str, tuple[Call, ...], str]:
    rng = words.rng
    service = words.pick(SERVICES)
    path = f"/etc/{service}/worker.yaml"
    checks = [
        Call("read_file", {"path": path}, config_text(words, path)),
        Call(
            "run_command",
            {"command": f"systemctl status {service}-worker"},
            status_output(words, service, rng.randint(1, 9), rng.randint(180, 1900)),
        ),
        Call(
            "run_command",
            {"command": f"journalctl -u {service}-worker -n 8 --no-pager"},
            log_output(words),
        ),
    ]
    texts = TURNS["parallel"]["worker"]
    return (
        texts["request"].format(service=service),
        tuple(checks[:count]),
        texts["reply"].format(service=service),
    )


def _parallel_turn(words: Words) -> DialogueTurn:
    rng = words.rng
    count = rng.choice((2, 2, 3))
    case = (_parallel_invoices, _parallel_orders, _parallel_worker)[rng.randrange(3)]
    request, calls, reply = case(words, count)
    preface = words.pick(TURNS["parallel"]["prefaces"])
    return DialogueTurn(words.request(request), ((preface, calls),), words.reply(reply))


def _chain_turn(words: Words) -> DialogueTurn:
    company, invoice, month = words.company(), words.invoice(), words.pick(MONTHS)
    texts = TURNS["chain"]
    fields = {"company": company, "invoice": invoice, "month": month}
    found = texts["found"].format(plan=words.pick(PLANS), owner=words.name(), **fields)
    cycles = (
        ("", (Call("search_orders", {"query": company}, found),)),
        (
            texts["preface"],
            (
                Call(
                    "get_invoice",
                    {"invoice_id": invoice},
                    invoice_record(words, invoice, company, month),
                ),
            ),
        ),
    )
    request = texts["request"].format(**fields)
    return DialogueTurn(
        words.request(request), cycles, words.reply(texts["reply"].format(**fields))
    )


# A failed call, the call that works, and the fields of the turn's texts.
_Retry = tuple[Call, Call, dict[str, str]]


def _retry_invoice(words: Words) -> _Retry:
    invoice, company = words.invoice(), words.company()
    year, number = invoice[4:8], invoice[9:]
    wrong = f"inv-{year}-{int(number)}"
    fields = {"company": company, "wrong": wrong}
    error = TURNS["retry"]["invoice"]["error"].format(**fields)
    bad = Call("get_invoice", {"invoice_id": wrong}, error, error=True)
    record = invoice_record(words, invoice, company, words.pick(MONTHS))
    return bad, Call("get_invoice", {"invoice_id": invoice}, record), fields


def _retry_path(words: Words) -> _Retry:
    service = words.pick(SERVICES)
    good_path = f"/etc/{service}/worker.yaml"
    wrong = good_path.replace("/etc/", "/etc/conf/")
    fields = {"service": service, "wrong": wrong}
    error = TURNS["retry"]["path"]["error"].format(**fields)
    bad = Call("read_file", {"path": wrong}, error, error=True)
    return bad, Call("read_file", {"path": good_path}, config_text(words, good_path)), fields


def _retry_command(words: Words) -> _Retry:
    rng = words.rng
    service = words.pick(SERVICES)
    typo = words.pick(TURNS["retry"]["command"]["typos"])
    fields = {"service": service, "typo": typo}
    error = TURNS["retry"]["command"]["error"].format(**fields)
    bad = Call("run_command", {"command": f"{typo} status {service}-worker"}, error, error=True)
    output = status_output(words, service, rng.randint(1, 6), rng.randint(180, 1900))
    return (
        bad,
        Call("run_command", {"command": f"systemctl status {service}-worker"}, output),
        fields,
    )


def _retry_search(words: Words) -> _Retry:
    first, last = words.person()
    city = words.pick(CITIES)
    texts = TURNS["retry"]["search"]
    error = texts["error"].format(matched=words.rng.randint(2000, 15000))
    bad = Call("search_orders", {"query": texts["query"]}, error, error=True)
    order = words.order()
    record = order_record(words, order, f"{first} {last}", city)[0]
    good = Call("search_orders", {"query": f"{first} {last} {city}"}, record)
    return bad, good, {"first": first, "last": last, "city": city, "order": order}


_RETRIES = (
    ("invoice", _retry_invoice),
    ("path", _retry_path),
    ("command", _retry_command),
    ("search", _retry_search),
)


def _retry_turn(words: Words) -> DialogueTurn:
    rng = words.rng
    case, make = _RETRIES[rng.randrange(4)]
    bad, good, fields = make(words)
    texts = TURNS["retry"][case]
    first_cycle: tuple[Call, ...] = (bad,)
    if rng.random() < 0.3:
        _, command, output, _ = command_case(words)
        first_cycle = (bad, Call("run_command", {"command": command}, output))
    cycles = ((words.pick(PHRASES["prefaces"]), first_cycle), (texts["retry"], (good,)))
    request = texts["request"].format(**fields)
    return DialogueTurn(
        words.request(request), cycles, words.reply(texts["reply"].format(**fields))
    )


FILLERS: tuple[tuple[Callable[[Words], DialogueTurn], int], ...] = (
    (_chat_turn, 22),
    (_order_turn, 14),
    (_invoice_turn, 12),
    (_file_turn, 9),
    (_command_turn, 10),
    (_parallel_turn, 13),
    (_chain_turn, 8),
    (_retry_turn, 12),
)
"""The filler turns and their weights."""
