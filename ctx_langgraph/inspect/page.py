"""The inspector's HTML, drawn on the server: the thread list, one thread's sections and its
timeline. No script anywhere (paging is links, pictures are SVG, :data:`CSP` allows no
script), and every text from a store is escaped and cut (:func:`cut`)."""

from __future__ import annotations

import base64
import collections
import datetime as dt
import difflib
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import quote

from ctx_langgraph.history import CompactionCheckpoint, HistoryEvent
from ctx_langgraph.history.types import ARTIFACT_TRAIL_KEY, ThreadRow
from ctx_langgraph.inspect.reads import CallRow, ThreadData, Timeline
from ctx_langgraph.inspect.svg import call_bar, calls_plot, coverage_bar, fallback_of
from ctx_langgraph.makeup import MAKEUP_PARTS

CSS = resources.files("ctx_langgraph.inspect").joinpath("inspect.css").read_text("utf-8")
"""The stylesheet, inlined in every page (one file, no request)."""

CSP = (
    "default-src 'none'; style-src 'sha256-"
    f"{base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()}'; img-src data:; "
    "base-uri 'none'; form-action 'self'"
)
"""No script at all, the one inline stylesheet by its hash, images only as data URLs, forms
only to the inspector itself."""

DASH = "\u2013"
"""What a page shows for an unknown value, and between two seqs of a range."""

TEXT_SHOWN = 4000
"""Characters of one event's text the timeline shows."""

VERSIONS_SHOWN = 25
"""The newest summary versions shown whole (older ones get a row each)."""

DIFF_LINES = 80
"""Lines of a summary's change from the previous generation shown at most."""

_PARTS = (*MAKEUP_PARTS, "adjustment")


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


def seq_link(seq: int, links: Links) -> str:
    """``#seq`` as a link when the seq can be reached from here, else as text."""
    href = links.seq(seq)
    return f'<a class="seq" href="{escape(href)}">#{seq}</a>' if href else f"#{seq}"


def _section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{title}</h2>{body}</section>'


def _table(columns: Sequence[str], rows: str, numeric: Sequence[str] = (), attrs: str = "") -> str:
    """A table with a header row; the ``numeric`` columns are right-aligned."""
    head = "".join(
        f'<th class="num">{c}</th>' if c in numeric else f"<th>{c}</th>" for c in columns
    )
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _facts(rows: Iterable[tuple[str, str]], attrs: dict[str, str] | None = None) -> str:
    """A definition list; ``attrs`` gives some terms' ``dd`` attributes."""
    attrs = attrs or {}
    items = "".join(f"<dt>{k}</dt><dd{attrs.get(k, '')}>{v}</dd>" for k, v in rows)
    return f'<dl class="facts">{items}</dl>'


def _legend(items: Iterable[tuple[str, str]]) -> str:
    swatches = (
        f'<li><span class="swatch {cls}"></span>{escape(label)}</li>' for cls, label in items
    )
    return f'<ul class="legend">{"".join(swatches)}</ul>'


def _when(moment: dt.datetime | None, form: str = "%Y-%m-%d %H:%M:%S") -> str:
    return moment.strftime(form) if moment else DASH


def _number(value: int | None) -> str:
    return DASH if value is None else f"{value:,}"


def document(title: str, body: str, *, header: str = "") -> str:
    """A whole page: the stylesheet inline, the policy in a meta tag as well as the header."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f'<header class="top"><h1>ctx-langgraph inspector</h1>{header}</header>{body}</body></html>'
    )


def thread_list_page(rows: Sequence[ThreadRow], tenant: str, thread_href: str) -> str:
    """The tenant's threads, each linked to its page (``thread_href`` + the quoted id)."""
    body = "".join(
        f'<tr><td><a href="{escape(thread_href + quote(r.thread_id, safe=""))}">'
        f'{escape(r.thread_id)}</a></td><td class="num">{r.head_seq:,}</td>'
        f'<td class="num">{r.active_generation}</td><td class="num">{r.branches}</td>'
        f"<td>{escape(_when(r.created_at, '%Y-%m-%d %H:%M'))}</td></tr>"
        for r in rows
    )
    numeric = ("events", "active generation", "branches")
    columns = ("thread", *numeric, "created")
    table = '<p class="muted">No thread in this store for this tenant.</p>'
    if rows:
        table = _table(columns, body, numeric, ' id="threads"')
    header = f'<span class="scope">tenant <code>{escape(tenant)}</code></span>'
    main = f"<main>{_section('threads-list', f'Threads ({len(rows)})', table)}</main>"
    return document(f"threads · {tenant}", main, header=header)


def _committed(versions: Sequence[CompactionCheckpoint]) -> list[CompactionCheckpoint]:
    return [v for v in versions if v.status in ("active", "superseded")]


def _overview(data: ThreadData) -> str:
    committed = _committed(data.versions)
    generations = data.info.active_generation
    failed = sum(v.status == "failed" for v in data.versions)
    pruned = generations - len({v.generation for v in committed})
    kept = f"; {pruned} older ones pruned (summary_versions_keep)" if pruned > 0 else ""
    active, through = data.active, data.covered_through
    purposes = collections.Counter(point.purpose for point in data.points)
    by_purpose = ", ".join(f"{n} {escape(p)}" for p, n in sorted(purposes.items()))
    active_text = (
        f"generation {active.generation}: covers seqs 1{DASH}{through} (this generation added "
        f"{active.first_seq}{DASH}{through}); raw tail {through + 1}{DASH}{data.info.head_seq}"
        if active
        else "none yet: the whole history is raw"
    )
    memories = "not given" if data.memories is None else str(len(data.memories))
    rows = [
        ("events", f"{data.event_count:,} seqs ({len(data.hidden):,} hidden)"),
        (
            "summary generations",
            f"{generations} committed, {len(committed)} kept{kept} ({failed} failed compactions, "
            f"{sum(map(fallback_of, committed))} versions by the fallback summarizer)",
        ),
        ("active summary", active_text),
        ("model calls", f"{len(data.points):,} ({by_purpose or 'none'})"),
        ("cost", _cost(data)),
        ("segments", f"{sum(s.status == 'active' for s in data.segments)} active"),
        ("history lookups", f"{len(data.lookups)} shown"),
        ("long-term memories", memories),
        ("branches", str(len(data.branches))),
    ]
    attrs = {
        "events": f' id="event-count" data-count="{data.event_count}"',
        "summary generations": f' id="summary-generations" data-count="{generations}"',
        "active summary": f' id="active-summary" data-through="{through}" '
        f'data-first="{active.first_seq if active else 0}"',
        "model calls": f' id="model-calls" data-count="{len(data.points)}"',
    }
    return _section("overview", "Overview", _facts(rows, attrs))


def _cost(data: ThreadData) -> str:
    """The total cost, and what it leaves out: calls whose provider reported no usage (the
    provider must be asked for it), calls of a model without a known price."""
    no_usage = sum(p.input_total is None for p in data.points)
    unpriced = sum(p.cost is None and p.input_total is not None for p in data.points)
    gaps = []
    if no_usage:
        gaps.append(
            f'<span id="no-usage" data-count="{no_usage}">{no_usage:,} calls with no usage '
            "reported (tokens and cost unknown: a streamed call to an OpenAI-compatible server "
            "needs <code>stream_usage=True</code>)</span>"
        )
    if unpriced:
        gaps.append(
            f'<span id="unpriced" data-count="{unpriced}">{unpriced:,} calls of a model '
            "without a known price</span>"
        )
    cost = sum(p.cost or 0.0 for p in data.points)
    return f"${cost:,.4f}" + (f" ({'; '.join(gaps)})" if gaps else "")


def version_anchor(version: CompactionCheckpoint) -> str:
    """The id of a summary version's card."""
    failed = "-failed" if version.status == "failed" else ""
    return f"summary-g{version.generation}{failed}-{version.id[:8]}"


def _version_href(data: ThreadData, version: CompactionCheckpoint) -> str | None:
    shown = data.versions[-VERSIONS_SHOWN:]
    return f"#{escape(version_anchor(version))}" if version in shown else None


def _coverage(data: ThreadData, links: Links) -> str:
    svg = coverage_bar(data, lambda v: _version_href(data, v), links.seq)
    classes = ("active", "superseded", "failed", "fallback", "segment", "tail")
    labels = ("active summary", "earlier generation", "failed compaction", "fallback summarizer")
    return _section(
        "coverage",
        "Coverage",
        svg + _legend(zip(classes, (*labels, "segment", "raw tail"), strict=True)),
    )


def _call_row(n: int, call: CallRow, data: ThreadData, links: Links) -> str:
    makeup = call.makeup or {}
    attrs = ""
    if makeup:
        parts = " ".join(f'data-part-{p}="{int(makeup.get(p) or 0)}"' for p in _PARTS)
        attrs = f'data-estimate="{int(makeup.get("estimate") or 0)}" {parts}'
    generation, through = makeup.get("generation"), makeup.get("covered_through")
    held = [v for v in data.versions if v.generation == generation and v.status != "failed"]
    summary = _version_href(data, held[0]) if held else "#summaries"
    tail = links.seq(through + 1) if through is not None else "#timeline"
    targets = dict(summary=summary, trail=summary, tail=tail, lookup="#lookups", memory="#memory")
    bar = '<span class="note">not prepared by ctx_budget</span>'
    if makeup:
        bar = call_bar(call, part_href=targets.get)
    parts = ", ".join(f"{p} {int(makeup[p]):,}" for p in _PARTS if makeup.get(p))
    prefix = call.cacheable_prefix if call.cacheable_prefix is not None else makeup.get("prefix")
    numbers = (makeup.get("estimate"), call.input_total, call.cache_read, prefix, call.output)
    cells = (_when(call.created_at, "%H:%M:%S"), call.purpose, call.model or call.provider)
    return (
        f'<tr class="call" id="call-{n}" data-call-key="{escape(call.call_key)}" '
        f'{attrs}><td class="num">{n}</td>{"".join(f"<td>{escape(c)}</td>" for c in cells)}'
        + "".join(f'<td class="num">{_number(value)}</td>' for value in numbers)
        + f'<td class="num">{DASH if call.cost is None else f"${call.cost:,.5f}"}</td>'
        f'<td>{bar}<div class="note parts">{escape(parts)}</div></td></tr>'
    )


def _calls(data: ThreadData, links: Links) -> str:
    calls, shown = data.points, data.calls
    first = len(calls) - len(shown) + 1
    rows = "".join(_call_row(first + i, call, data, links) for i, call in enumerate(shown))
    older = ""
    if len(calls) > len(shown):
        older = f'<p class="note">{len(calls) - len(shown):,} older calls are in the plot only '
        older += "(ctx-langgraph export lists them all).</p>"
    counts = ("estimate", "measured input", "cache read", "cacheable prefix", "output", "cost")
    columns = ("#", "time", "purpose", "model", *counts, "make-up")
    return _section(
        "calls",
        f"Model calls ({len(calls):,})",
        f"{calls_plot(calls)}"
        '<p class="note">Each bar is one request against the model\'s window: the parts the '
        "budget counted, left to right, the output reserve at the window's end, and a black tick "
        "at the input the provider measured. <em>adjustment</em> is the estimate's part the "
        "counted parts do not explain (the measured baseline over the count).</p>"
        f"{_legend((f'part-{p}', p) for p in (*_PARTS, 'reserve'))}{older}"
        f"{_table(columns, rows, ('#', *counts))}",
    )


def _key_facts(version: CompactionCheckpoint, links: Links) -> str:
    if not version.key_facts:
        return ""
    items = "".join(
        f"<li>{cut(fact.text, 600)} — {seq_link(fact.source_seq, links)}"
        f' <span class="note">{escape(fact.kind)}</span></li>'
        for fact in version.key_facts
    )
    return f"<h4>key facts ({len(version.key_facts)})</h4><ul>{items}</ul>"


def _trail(version: CompactionCheckpoint, links: Links) -> str:
    trail = version.metadata.get(ARTIFACT_TRAIL_KEY)
    entries = trail.get("entries") if isinstance(trail, dict) else None
    if not entries:
        return ""
    items = []
    for entry in entries[-40:]:
        last = (entry.get("touches") or [None])[-1]
        where = seq_link(int(last[0]), links) + f" {escape(str(last[1]))}" if last else ""
        items.append(
            f"<li><code>{cut(str(entry.get('artifact')), 300)}</code> "
            f'<span class="note">{escape(str(entry.get("kind")))}</span> {where}</li>'
        )
    return f"<h4>artifact trail ({len(entries)})</h4><ul>{''.join(items)}</ul>"


def _changes(
    version: CompactionCheckpoint, previous: CompactionCheckpoint | None, pruned: int
) -> str:
    """What changed from the previous kept generation (``pruned``: the committed generations
    before ``version`` no longer in the store)."""
    if previous is None and pruned > 0:
        earlier = f"{pruned} earlier generation{'s' if pruned != 1 else ''}"
        return (
            '<h4>changes</h4><p class="note">the oldest kept version: '
            f"{earlier} pruned (summary_versions_keep), so there is none to compare it with</p>"
        )
    if previous is None:
        return '<h4>changes</h4><p class="note">the first generation</p>'
    before = {f.text for f in previous.key_facts}
    after = {f.text for f in version.key_facts}
    old, new = (previous.summary_text or "").splitlines(), (version.summary_text or "").splitlines()
    lines = list(difflib.unified_diff(old, new, lineterm="", n=0))[2:]
    shown = "".join(
        f'<div class="{"diff-add" if line.startswith("+") else "diff-del"}">{cut(line, 400)}</div>'
        for line in lines[:DIFF_LINES]
        if line[:1] in "+-"
    )
    more = ""
    if len(lines) > DIFF_LINES:
        more = f'<p class="note">{len(lines) - DIFF_LINES} more lines</p>'
    return (
        f'<h4>changes from generation {previous.generation}</h4><p class="note">'
        f"{len(after - before)} key facts added, {len(before - after)} dropped</p>"
        f"<pre>{shown}</pre>{more}"
    )


def _version(
    data: ThreadData,
    version: CompactionCheckpoint,
    previous: CompactionCheckpoint | None,
    since: dt.datetime | None,
    links: Links,
) -> str:
    """A summary version's card (``since``: when the version before it was created)."""
    status = "active" if version.id == data.info.active_checkpoint_id else version.status
    badge = escape("fallback" if fallback_of(version) and status != "failed" else status)
    kept = {v.generation for v in _committed(data.versions) if v.generation < version.generation}
    changes = _changes(version, previous, max(0, version.generation - 1 - len(kept)))
    text = '<p class="note">no summary text</p>'
    if version.summary_text:
        text = f'<pre class="summary-text">{cut(version.summary_text, 20000)}</pre>'
    compaction = version.metadata.get("compaction")
    compaction = compaction if isinstance(compaction, dict) else {}
    took = DASH
    if "duration_ms" in compaction:
        took = f"{compaction['duration_ms']:,} ms, {compaction.get('attempts', '?')} attempts"
    calls = [
        c
        for c in data.summary_points
        if c.created_at is not None
        and c.created_at <= version.created_at
        and (since is None or c.created_at > since)
    ]
    spent = "no summarizer call in the ledger"
    if calls:
        spent = f"{len(calls)} summarizer calls, ${sum(c.cost or 0.0 for c in calls):,.5f}"
    first, through = version.first_seq, version.covered_through_seq
    rows = [
        ("status", version.status + (" (fallback summarizer)" if fallback_of(version) else "")),
        ("covers", f"seqs 1{DASH}{through} (added {first}{DASH}{through})"),
        ("summarizer", version.summarizer_id or DASH),
        ("summary tokens", _number(version.summary_tokens)),
        ("created", _when(version.created_at)),
        ("committed", _when(version.committed_at)),
        ("took", took),
        ("cost", spent),
    ]
    if version.error:
        rows.append(("error", version.error))
    if version.metadata.get("requested_by"):
        instructions = version.metadata.get("instructions") or "no instructions"
        rows.append(("asked for by", f"{version.metadata['requested_by']}: {instructions}"))
    facts = _facts((k, cut(str(v), 2000)) for k, v in rows)
    return (
        f'<article class="version status-{escape(status)}" id="{escape(version_anchor(version))}" '
        f'data-generation="{version.generation}" '
        f'data-status="{escape(status)}"><h3>generation {version.generation}'
        f'<span class="badge {badge}">{badge}</span></h3>'
        f"{facts}{text}{_key_facts(version, links)}"
        f"{_trail(version, links)}{changes if version.status != 'failed' else ''}"
        "</article>"
    )


def _summaries(data: ThreadData, links: Links) -> str:
    versions = data.versions
    if not versions:
        return _section("summaries", "Summary versions", '<p class="muted">No compaction yet.</p>')
    older = versions[: max(0, len(versions) - VERSIONS_SHOWN)]
    cards, previous, since = [], None, None
    for n, version in enumerate(versions):
        if n >= len(older):
            cards.append(_version(data, version, previous, since, links))
        if version.status != "failed":
            previous = version
        since = version.created_at
    rows = "".join(
        f"<tr><td>{v.generation}</td><td>{escape(v.status)}</td><td>{v.first_seq}{DASH}"
        f"{v.covered_through_seq}</td><td>{escape(v.summarizer_id or DASH)}</td></tr>"
        for v in older
    )
    columns = ("generation", "status", "added seqs", "summarizer")
    table = f"<h3>older versions</h3>{_table(columns, rows)}" if older else ""
    body = "".join(reversed(cards)) + table
    return _section("summaries", f"Summary versions ({len(versions)})", body)


def _lookups(data: ThreadData, links: Links) -> str:
    if not data.lookups:
        tool = escape(data.lookup_tool)
        body = f'<p class="muted">The model made no <code>{tool}</code> call on this branch.</p>'
        return _section("lookups", "History lookups", body)
    rows = "".join(
        f"<tr><td>{seq_link(lookup.call_seq, links) if lookup.call_seq else DASH}</td>"
        f"<td><code>{cut(json.dumps(lookup.arguments, ensure_ascii=False), 600)}</code></td>"
        f"<td>{seq_link(lookup.seq, links)}</td><td><pre>{cut(lookup.result, 1500)}</pre></td></tr>"
        for lookup in data.lookups
    )
    columns = ("asked at", "arguments", "result", "what came back")
    title = f"History lookups ({len(data.lookups)}, newest first)"
    return _section("lookups", title, _table(columns, rows))


def _memory(data: ThreadData, links: Links) -> str:
    if data.memories is None:
        how = "--memory-sqlite / --memory-postgres, or memory= in Python"
        return _section(
            "memory", "Long-term memory", f'<p class="muted">No memory store given ({how}).</p>'
        )
    rows = "".join(
        f"<tr><td>{cut(str(m.get('content')), 800)}</td><td>{escape(str(m.get('key') or DASH))}</td>"
        f"<td>{escape(str(m.get('scope')))}: {escape(str(m.get('owner')))}</td>"
        f"<td>{escape(str(m.get('status')))}</td>"
        f"<td>{', '.join(seq_link(int(s), links) for s in m.get('source_seqs') or []) or DASH}</td>"
        f"<td>{escape(str(m.get('created_at') or DASH))}</td>"
        f"<td>{escape(str(m.get('expires_at') or 'never'))}</td></tr>"
        for m in data.memories
    )
    columns = ("memory", "key", "scope", "status", "source", "created", "expires")
    return _section("memory", f"Long-term memory ({len(data.memories)})", _table(columns, rows))


def thread_sections(data: ThreadData, links: Links, timeline: str) -> str:
    """The body of one thread's page: every section, ``timeline`` (already drawn) last."""
    keys = ("overview", "coverage", "calls", "summaries", "lookups", "memory", "timeline")
    labels = ("Overview", "Coverage", "Model calls", "Summaries", "Lookups", "Memory", "Timeline")
    links_to = "".join(
        f'<a href="#{key}">{label}</a>' for key, label in zip(keys, labels, strict=True)
    )
    return (
        f'<nav class="sections">{links_to}</nav><main>'
        f"{_overview(data)}{_coverage(data, links)}{_calls(data, links)}"
        f"{_summaries(data, links)}{_lookups(data, links)}{_memory(data, links)}"
        f"{_section('timeline', 'Timeline', timeline)}</main>"
    )


def _calls_of(event: HistoryEvent) -> list[dict[str, Any]]:
    calls = event.content.get("data", {}).get("tool_calls") or []
    return [call for call in calls if isinstance(call, dict)]


def render_events(timeline: Timeline, data: ThreadData, links: Links) -> str:
    """A timeline page's events and deleted seqs as an ordered list, in seq order; a tool call
    and its result are paired across the page's edge when the other is among its neighbours."""
    around = [*timeline.events, *timeline.neighbours]
    results = {e.tool_call_ids[0]: e.seq for e in around if e.role == "tool" and e.tool_call_ids}
    callers = {str(c.get("id")): e.seq for e in around if e.role == "ai" for c in _calls_of(e)}

    def _event(event: HistoryEvent) -> str:
        classes = f"event role-{escape(event.role)}" + ("" if event.visible else " is-hidden")
        name = f" <code>{escape(event.name)}</code>" if event.name else ""
        caller = callers.get(event.tool_call_ids[0]) if event.tool_call_ids else None
        answered = ""
        if event.role == "tool" and caller is not None:
            answered = f' <span class="note">result of {seq_link(caller, links)}</span>'
        badges = "" if event.visible else '<span class="badge hidden">hidden</span>'
        if event.revision > 1:
            badges += f'<span class="badge revised">revised (revision {event.revision})</span>'
        if event.seq <= data.covered_through:
            badges += '<span class="badge covered">covered by the summary</span>'
        else:
            badges += '<span class="badge tail">raw tail</span>'
        items = []
        for call in _calls_of(event):
            args = json.dumps(call.get("args") or {}, ensure_ascii=False, sort_keys=True)
            seq = results.get(str(call.get("id")))
            answer = ' <span class="note">(no result nearby)</span>'
            if seq is not None:
                answer = f" → result {seq_link(seq, links)}"
            items.append(
                f"<li><code>{escape(str(call.get('name')))}</code>"
                f"(<code>{cut(args, 600)}</code>){answer}</li>"
            )
        calls = f'<ul class="toolcalls">{"".join(items)}</ul>' if items else ""
        return (
            f'<li class="{classes}" id="seq-{event.seq}" data-seq="{event.seq}">'
            f'<a class="seq" href="#seq-{event.seq}">#{event.seq}</a> '
            f"<time>{escape(_when(event.created_at))}</time> <strong>{escape(event.role)}</strong>"
            f'{name}{answered}{badges}<pre class="text">{cut(event.text)}</pre>{calls}</li>'
        )

    items = [(event.seq, _event(event)) for event in timeline.events]
    items += [
        (
            seq,
            f'<li class="event is-deleted" id="seq-{seq}" data-seq="{seq}">'
            f'<a class="seq" href="#seq-{seq}">#{seq}</a><span class="badge deleted">deleted</span> '
            f'<span class="note">(edit version {version}; its text is gone)</span></li>',
        )
        for seq, version in timeline.deleted.items()
    ]
    items.sort(key=lambda item: item[0])
    return f'<ol class="timeline">{"".join(html for _, html in items)}</ol>'
