"""The raw history as a timeline: one list item per seq, tool calls paired with their results,
hidden, deleted and revised events marked, and each event placed against the active summary
(covered, or in the raw tail).

Conversation text is data: every piece goes through :func:`html.escape`, and a long text is cut
at :data:`TEXT_SHOWN` characters (its full length said beside it), so a 10 MB tool result
leaves the page as light as any other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html import escape
from typing import Any

from ctx_langgraph.history import HistoryEvent

__all__ = ["TEXT_SHOWN", "Links", "cut", "render_events"]

TEXT_SHOWN = 4000
"""Characters of one event's text the timeline shows."""

ARGS_SHOWN = 600
"""Characters of a tool call's arguments the timeline shows."""


@dataclass(frozen=True)
class Links:
    """Where the page's links go: to a seq (None: not reachable from this page or file), and
    to a page of the timeline."""

    seq: Callable[[int], str | None]
    page: Callable[[int], str]


def cut(text: str, limit: int = TEXT_SHOWN) -> str:
    """``text`` escaped, cut at ``limit`` characters with its full length said after it."""
    if len(text) <= limit:
        return escape(text)
    return (
        f'{escape(text[:limit])}<span class="note"> … cut: {len(text):,} characters in all '
        "(ctx-langgraph export has the whole text)</span>"
    )


def seq_link(seq: int, links: Links, label: str | None = None) -> str:
    """``#seq`` as a link when the seq can be reached from here, else as text."""
    text = escape(label or f"#{seq}")
    href = links.seq(seq)
    return f'<a class="seq" href="{escape(href)}">{text}</a>' if href else text


def _calls(event: HistoryEvent) -> list[dict[str, Any]]:
    calls = event.content.get("data", {}).get("tool_calls") or []
    return [call for call in calls if isinstance(call, dict)]


def _tool_calls(event: HistoryEvent, results: dict[str, int], links: Links) -> str:
    items = []
    for call in _calls(event):
        args = json.dumps(call.get("args") or {}, ensure_ascii=False, sort_keys=True)
        seq = results.get(str(call.get("id")))
        answer = (
            f" → result {seq_link(seq, links)}"
            if seq is not None
            else ' <span class="note">(no result nearby)</span>'
        )
        items.append(
            f"<li><code>{escape(str(call.get('name')))}</code>"
            f"(<code>{cut(args, ARGS_SHOWN)}</code>){answer}</li>"
        )
    return f'<ul class="toolcalls">{"".join(items)}</ul>' if items else ""


def _badges(event: HistoryEvent, covered_through: int) -> str:
    badges = []
    if not event.visible:
        badges.append('<span class="badge hidden">hidden</span>')
    if event.revision > 1:
        badges.append(f'<span class="badge revised">revised (revision {event.revision})</span>')
    if event.seq <= covered_through:
        badges.append('<span class="badge covered">covered by the summary</span>')
    else:
        badges.append('<span class="badge tail">raw tail</span>')
    return "".join(badges)


def _event(
    event: HistoryEvent,
    results: dict[str, int],
    callers: dict[str, int],
    covered_through: int,
    links: Links,
) -> str:
    classes = f"event role-{escape(event.role)}" + ("" if event.visible else " is-hidden")
    name = f" <code>{escape(event.name)}</code>" if event.name else ""
    answered = ""
    if event.role == "tool" and event.tool_call_ids:
        caller = callers.get(event.tool_call_ids[0])
        answered = (
            f' <span class="note">result of {seq_link(caller, links)}</span>'
            if caller is not None
            else ""
        )
    when = event.created_at.strftime("%Y-%m-%d %H:%M:%S")
    return (
        f'<li class="{classes}" id="seq-{event.seq}" data-seq="{event.seq}">'
        f'<a class="seq" href="#seq-{event.seq}">#{event.seq}</a> '
        f"<time>{escape(when)}</time> <strong>{escape(event.role)}</strong>{name}{answered}"
        f"{_badges(event, covered_through)}"
        f'<pre class="text">{cut(event.text)}</pre>{_tool_calls(event, results, links)}</li>'
    )


def _deleted(seq: int, version: int) -> str:
    return (
        f'<li class="event is-deleted" id="seq-{seq}" data-seq="{seq}">'
        f'<a class="seq" href="#seq-{seq}">#{seq}</a>'
        f'<span class="badge deleted">deleted</span> '
        f'<span class="note">(edit version {version}; its text is gone)</span></li>'
    )


def render_events(
    events: Iterable[HistoryEvent],
    deleted: dict[int, int],
    covered_through: int,
    links: Links,
    neighbours: Iterable[HistoryEvent] = (),
) -> str:
    """The events (and the deleted seqs among them) as an ordered list, in seq order; a tool
    call and its result are paired across the page's edge when the other one is among
    ``neighbours`` (the events just before and after the page)."""
    events = list(events)
    around = [*events, *neighbours]
    results = {e.tool_call_ids[0]: e.seq for e in around if e.role == "tool" and e.tool_call_ids}
    callers = {str(call.get("id")): e.seq for e in around if e.role == "ai" for call in _calls(e)}
    items: list[tuple[int, str]] = [
        (e.seq, _event(e, results, callers, covered_through, links)) for e in events
    ]
    items += [(seq, _deleted(seq, version)) for seq, version in deleted.items()]
    items.sort(key=lambda item: item[0])
    return f'<ol class="timeline">{"".join(html for _, html in items)}</ol>'
