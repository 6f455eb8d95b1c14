"""The inspector's HTML: the thread list and one thread's page, drawn on the server.

The page works without script: paging is links, pictures are SVG, and the Content-Security-
Policy (:data:`CSP`) allows no script at all, so no text of a conversation can run, whatever it
holds. Every text taken from a store goes through :func:`html.escape` (``timeline.cut``).
"""

from __future__ import annotations

import base64
import datetime as dt
import difflib
import hashlib
import json
from collections.abc import Sequence
from html import escape
from importlib import resources
from urllib.parse import quote

from ctx_langgraph.history import CompactionCheckpoint
from ctx_langgraph.history.types import ARTIFACT_TRAIL_KEY, ThreadRow
from ctx_langgraph.inspect.reads import CallRow, ThreadData
from ctx_langgraph.inspect.svg import call_bar, calls_plot, coverage_bar, fallback_of
from ctx_langgraph.inspect.timeline import Links, cut, seq_link
from ctx_langgraph.makeup import MAKEUP_PARTS

__all__ = ["CSP", "CSS", "document", "thread_list_page", "thread_sections"]

CSS = resources.files("ctx_langgraph.inspect").joinpath("inspect.css").read_text("utf-8")
"""The stylesheet, inlined in every page (one file, no request)."""

_CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()

CSP = (
    f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; img-src data:; base-uri 'none'; "
    "form-action 'self'"
)
"""No script at all (so no inline event handler either), the one inline stylesheet by its
hash, images only as data URLs, forms only to the inspector itself."""

DASH = "\u2013"
"""What a page shows for an unknown value, and between two seqs of a range."""

VERSIONS_SHOWN = 25
"""The newest summary versions shown whole (older ones get a row each)."""

DIFF_LINES = 80
"""Lines of a summary's change from the previous generation shown at most."""


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
        f"<td>{escape(r.created_at.strftime('%Y-%m-%d %H:%M'))}</td></tr>"
        for r in rows
    )
    table = (
        '<table id="threads"><thead><tr><th>thread</th><th class="num">events</th>'
        '<th class="num">active generation</th><th class="num">branches</th><th>created</th>'
        f"</tr></thead><tbody>{body}</tbody></table>"
        if rows
        else '<p class="muted">No thread in this store for this tenant.</p>'
    )
    header = f'<span class="scope">tenant <code>{escape(tenant)}</code></span>'
    main = (
        f'<main><section id="threads-list"><h2>Threads ({len(rows)})</h2>{table}</section></main>'
    )
    return document(f"threads · {tenant}", main, header=header)


def _committed(versions: Sequence[CompactionCheckpoint]) -> list[CompactionCheckpoint]:
    return [v for v in versions if v.status in ("active", "superseded")]


def _active(data: ThreadData) -> CompactionCheckpoint | None:
    return next((v for v in data.versions if v.id == data.info.active_checkpoint_id), None)


def _overview(data: ThreadData) -> str:
    committed = _committed(data.versions)
    generations = data.info.active_generation
    failed = sum(v.status == "failed" for v in data.versions)
    fallback = sum(fallback_of(v) for v in committed)
    pruned = generations - len({v.generation for v in committed})
    kept = f"; {pruned} older ones pruned (summary_versions_keep)" if pruned > 0 else ""
    active = _active(data)
    through = active.covered_through_seq if active else 0
    purposes: dict[str, int] = {}
    for point in data.points:
        purposes[point.purpose] = purposes.get(point.purpose, 0) + 1
    cost = sum(p.cost or 0.0 for p in data.points)
    # a call with no usage reported (booked unknown) is told apart from one of a model that is
    # not in the price table: the first needs the provider asked for usage, the second a price
    no_usage = sum(p.input_total is None for p in data.points)
    unpriced = sum(p.cost is None and p.input_total is not None for p in data.points)
    by_purpose = ", ".join(f"{n} {escape(p)}" for p, n in sorted(purposes.items()))
    active_text = (
        f"generation {active.generation}: covers seqs 1\u2013{through} (this generation added "
        f"{active.first_seq}\u2013{through}); raw tail {through + 1}\u2013{data.info.head_seq}"
        if active
        else "none yet: the whole history is raw"
    )
    memories = "not given" if data.memories is None else str(len(data.memories))
    return (
        '<section id="overview"><h2>Overview</h2><dl class="facts">'
        f'<dt>events</dt><dd id="event-count" data-count="{data.event_count}">'
        f"{data.event_count:,} seqs ({len(data.hidden):,} hidden)</dd>"
        f'<dt>summary generations</dt><dd id="summary-generations" data-count="{generations}">'
        f"{generations} committed, {len(committed)} kept{kept} ({failed} failed compactions, "
        f"{fallback} versions by the fallback summarizer)</dd>"
        f'<dt>active summary</dt><dd id="active-summary" data-through="{through}" '
        f'data-first="{active.first_seq if active else 0}">{active_text}</dd>'
        f'<dt>model calls</dt><dd id="model-calls" data-count="{len(data.points)}">'
        f"{len(data.points):,} ({by_purpose or 'none'})</dd>"
        f"<dt>cost</dt><dd>${cost:,.4f}" + _cost_gaps(no_usage, unpriced) + "</dd>"
        f"<dt>segments</dt><dd>{sum(s.status == 'active' for s in data.segments)} active</dd>"
        f"<dt>history lookups</dt><dd>{len(data.lookups)} shown</dd>"
        f"<dt>long-term memories</dt><dd>{memories}</dd>"
        f"<dt>branches</dt><dd>{len(data.branches)}</dd></dl></section>"
    )


def _cost_gaps(no_usage: int, unpriced: int) -> str:
    """What the cost leaves out: calls whose provider reported no usage, calls of a model
    without a known price."""
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
    return f" ({'; '.join(gaps)})" if gaps else ""


def _legend(items: Sequence[tuple[str, str]]) -> str:
    return (
        '<ul class="legend">'
        + "".join(
            f'<li><span class="swatch {cls}"></span>{escape(label)}</li>' for cls, label in items
        )
        + "</ul>"
    )


def version_anchor(version: CompactionCheckpoint) -> str:
    """The id of a summary version's card."""
    failed = "-failed" if version.status == "failed" else ""
    return f"summary-g{version.generation}{failed}-{version.id[:8]}"


def _version_href(data: ThreadData, version: CompactionCheckpoint) -> str | None:
    shown = data.versions[-VERSIONS_SHOWN:]
    return f"#{escape(version_anchor(version))}" if version in shown else None


def _coverage(data: ThreadData, links: Links) -> str:
    active = _active(data)
    svg = coverage_bar(
        data.info.head_seq,
        data.versions,
        data.segments,
        data.info.active_checkpoint_id,
        active.covered_through_seq if active else 0,
        lambda v: _version_href(data, v),
        links.seq,
    )
    legend = _legend(
        [
            ("active", "active summary"),
            ("superseded", "earlier generation"),
            ("failed", "failed compaction"),
            ("fallback", "fallback summarizer"),
            ("segment", "segment"),
            ("tail", "raw tail"),
        ]
    )
    return f'<section id="coverage"><h2>Coverage</h2>{svg}{legend}</section>'


def _makeup_cells(call: CallRow) -> str:
    makeup = call.makeup or {}
    attrs = " ".join(
        f'data-part-{part}="{int(makeup.get(part) or 0)}"' for part in (*MAKEUP_PARTS, "adjustment")
    )
    return f'data-estimate="{int(makeup.get("estimate") or 0)}" {attrs}' if makeup else ""


def _part_links(data: ThreadData, makeup: dict[str, int], links: Links) -> dict[str, str | None]:
    """Where each part of a call's bar leads: the summary version and the first tail event the
    request held (when its make-up says which), the lookups, the memories."""
    generation, through = makeup.get("generation"), makeup.get("covered_through")
    held = next(
        (v for v in data.versions if v.generation == generation and v.status != "failed"), None
    )
    summary = _version_href(data, held) if held is not None else "#summaries"
    return {
        "summary": summary,
        "trail": summary,
        "tail": links.seq(through + 1) if through is not None else "#timeline",
        "lookup": "#lookups",
        "memory": "#memory",
    }


def _call_row(n: int, call: CallRow, data: ThreadData, links: Links) -> str:
    makeup = call.makeup or {}

    def number(value: int | None) -> str:
        return DASH if value is None else f"{value:,}"

    targets = _part_links(data, makeup, links)
    bar = (
        call_bar(call, part_href=targets.get)
        if makeup
        else '<span class="note">not prepared by ctx_budget</span>'
    )
    parts = ", ".join(
        f"{p} {int(makeup[p]):,}" for p in (*MAKEUP_PARTS, "adjustment") if makeup.get(p)
    )
    return (
        f'<tr class="call" id="call-{n}" data-call-key="{escape(call.call_key)}" '
        f'{_makeup_cells(call)}><td class="num">{n}</td>'
        f"<td>{escape(call.created_at.strftime('%H:%M:%S') if call.created_at else DASH)}</td>"
        f"<td>{escape(call.purpose)}</td>"
        f"<td>{escape(call.model or call.provider)}</td>"
        f'<td class="num">{number(makeup.get("estimate"))}</td>'
        f'<td class="num">{number(call.input_total)}</td><td class="num">{number(call.cache_read)}</td>'
        f'<td class="num">{number(call.cacheable_prefix if call.cacheable_prefix is not None else makeup.get("prefix"))}</td>'
        f'<td class="num">{number(call.output)}</td>'
        f'<td class="num">{DASH if call.cost is None else f"${call.cost:,.5f}"}</td>'
        f'<td>{bar}<div class="note parts">{escape(parts)}</div></td></tr>'
    )


def _calls(data: ThreadData, links: Links) -> str:
    calls, shown = data.points, data.calls
    first = len(calls) - len(shown) + 1
    rows = "".join(_call_row(first + i, call, data, links) for i, call in enumerate(shown))
    legend = _legend([(f"part-{p}", p) for p in (*MAKEUP_PARTS, "adjustment", "reserve")])
    older = (
        f'<p class="note">{len(calls) - len(shown):,} older calls are in the plot only '
        "(ctx-langgraph export lists them all).</p>"
        if len(calls) > len(shown)
        else ""
    )
    return (
        f'<section id="calls"><h2>Model calls ({len(calls):,})</h2>{calls_plot(calls)}'
        '<p class="note">Each bar is one request against the model\'s window: the parts the '
        "budget counted, left to right, the output reserve at the window's end, and a black tick "
        "at the input the provider measured. <em>adjustment</em> is the estimate's part the "
        f"counted parts do not explain (the measured baseline over the count).</p>{legend}{older}"
        '<table><thead><tr><th class="num">#</th><th>time</th><th>purpose</th><th>model</th>'
        '<th class="num">estimate</th><th class="num">measured input</th>'
        '<th class="num">cache read</th><th class="num">cacheable prefix</th>'
        '<th class="num">output</th><th class="num">cost</th><th>make-up</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></section>"
    )


def _facts(version: CompactionCheckpoint, links: Links) -> str:
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
        touches = entry.get("touches") or []
        last = touches[-1] if touches else None
        where = seq_link(int(last[0]), links) + f" {escape(str(last[1]))}" if last else ""
        items.append(
            f"<li><code>{cut(str(entry.get('artifact')), 300)}</code> "
            f'<span class="note">{escape(str(entry.get("kind")))}</span> {where}</li>'
        )
    return f"<h4>artifact trail ({len(entries)})</h4><ul>{''.join(items)}</ul>"


def _pruned_before(version: CompactionCheckpoint, versions: Sequence[CompactionCheckpoint]) -> int:
    """Committed generations before ``version`` that are no longer in the store (pruned by
    ``summary_versions_keep``)."""
    kept = {v.generation for v in _committed(versions) if v.generation < version.generation}
    return max(0, version.generation - 1 - len(kept))


def _changes(
    version: CompactionCheckpoint, previous: CompactionCheckpoint | None, pruned: int
) -> str:
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
    lines = list(
        difflib.unified_diff(
            (previous.summary_text or "").splitlines(),
            (version.summary_text or "").splitlines(),
            lineterm="",
            n=0,
        )
    )[2:]
    shown = "".join(
        f'<div class="{"diff-add" if line.startswith("+") else "diff-del"}">{cut(line, 400)}</div>'
        for line in lines[:DIFF_LINES]
        if line[:1] in "+-"
    )
    more = (
        f'<p class="note">{len(lines) - DIFF_LINES} more lines</p>'
        if len(lines) > DIFF_LINES
        else ""
    )
    return (
        f'<h4>changes from generation {previous.generation}</h4><p class="note">'
        f"{len(after - before)} key facts added, {len(before - after)} dropped</p>"
        f"<pre>{shown}</pre>{more}"
    )


def _summary_cost(
    data: ThreadData, version: CompactionCheckpoint, since: dt.datetime | None
) -> str:
    calls = [
        c
        for c in data.summary_points
        if c.created_at is not None
        and c.created_at <= version.created_at
        and (since is None or c.created_at > since)
    ]
    if not calls:
        return "no summarizer call in the ledger"
    cost = sum(c.cost or 0.0 for c in calls)
    return f"{len(calls)} summarizer calls, ${cost:,.5f}"


def _version_facts(
    data: ThreadData, version: CompactionCheckpoint, since: dt.datetime | None
) -> str:
    compaction = version.metadata.get("compaction")
    compaction = compaction if isinstance(compaction, dict) else {}
    rows = [
        ("status", version.status + (" (fallback summarizer)" if fallback_of(version) else "")),
        (
            "covers",
            f"seqs 1\u2013{version.covered_through_seq} (added {version.first_seq}\u2013"
            f"{version.covered_through_seq})",
        ),
        ("summarizer", version.summarizer_id or "\u2013"),
        (
            "summary tokens",
            DASH if version.summary_tokens is None else f"{version.summary_tokens:,}",
        ),
        ("created", version.created_at.strftime("%Y-%m-%d %H:%M:%S")),
        (
            "committed",
            version.committed_at.strftime("%Y-%m-%d %H:%M:%S")
            if version.committed_at
            else "\u2013",
        ),
        (
            "took",
            f"{compaction['duration_ms']:,} ms, {compaction.get('attempts', '?')} attempts"
            if "duration_ms" in compaction
            else "\u2013",
        ),
        ("cost", _summary_cost(data, version, since)),
    ]
    if version.error:
        rows.append(("error", version.error))
    if version.metadata.get("requested_by"):
        instructions = version.metadata.get("instructions") or "no instructions"
        rows.append(("asked for by", f"{version.metadata['requested_by']}: {instructions}"))
    return (
        '<dl class="facts">'
        + "".join(f"<dt>{escape(k)}</dt><dd>{cut(str(v), 2000)}</dd>" for k, v in rows)
        + "</dl>"
    )


def _version(
    data: ThreadData,
    version: CompactionCheckpoint,
    previous: CompactionCheckpoint | None,
    since: dt.datetime | None,
    links: Links,
) -> str:
    status = "active" if version.id == data.info.active_checkpoint_id else version.status
    badge = "fallback" if fallback_of(version) and status != "failed" else status
    changes = _changes(version, previous, _pruned_before(version, data.versions))
    text = (
        f'<pre class="summary-text">{cut(version.summary_text, 20000)}</pre>'
        if version.summary_text
        else '<p class="note">no summary text</p>'
    )
    return (
        f'<article class="version status-{escape(status)}" id="{escape(version_anchor(version))}" '
        f'data-generation="{version.generation}" '
        f'data-status="{escape(status)}"><h3>generation {version.generation}'
        f'<span class="badge {escape(badge)}">{escape(badge)}</span></h3>'
        f"{_version_facts(data, version, since)}{text}{_facts(version, links)}"
        f"{_trail(version, links)}{changes if version.status != 'failed' else ''}"
        "</article>"
    )


def _summaries(data: ThreadData, links: Links) -> str:
    versions = data.versions
    if not versions:
        return '<section id="summaries"><h2>Summary versions</h2><p class="muted">No compaction yet.</p></section>'
    cards, previous, since = [], None, None
    for n, version in enumerate(versions):
        if n >= len(versions) - VERSIONS_SHOWN:
            cards.append(_version(data, version, previous, since, links))
        if version.status != "failed":
            previous = version
        since = version.created_at
    older = "".join(
        f"<tr><td>{v.generation}</td><td>{escape(v.status)}</td><td>{v.first_seq}\u2013"
        f"{v.covered_through_seq}</td><td>{escape(v.summarizer_id or DASH)}</td></tr>"
        for v in versions[: max(0, len(versions) - VERSIONS_SHOWN)]
    )
    table = (
        "<h3>older versions</h3><table><thead><tr><th>generation</th><th>status</th>"
        f"<th>added seqs</th><th>summarizer</th></tr></thead><tbody>{older}</tbody></table>"
        if older
        else ""
    )
    cards.reverse()  # the newest first
    return (
        f'<section id="summaries"><h2>Summary versions ({len(versions)})</h2>'
        f"{''.join(cards)}{table}</section>"
    )


def _lookups(data: ThreadData, links: Links) -> str:
    if not data.lookups:
        return (
            f'<section id="lookups"><h2>History lookups</h2><p class="muted">The model made no '
            f"<code>{escape(data.lookup_tool)}</code> call on this branch.</p></section>"
        )
    rows = "".join(
        f"<tr><td>{seq_link(lookup.call_seq, links) if lookup.call_seq else DASH}</td>"
        f"<td><code>{cut(json.dumps(lookup.arguments, ensure_ascii=False), 600)}</code></td>"
        f"<td>{seq_link(lookup.seq, links)}</td><td><pre>{cut(lookup.result, 1500)}</pre></td></tr>"
        for lookup in data.lookups
    )
    return (
        f'<section id="lookups"><h2>History lookups ({len(data.lookups)}, newest first)</h2>'
        "<table><thead><tr><th>asked at</th><th>arguments</th><th>result</th><th>what came back"
        f"</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _memory(data: ThreadData, links: Links) -> str:
    if data.memories is None:
        return (
            '<section id="memory"><h2>Long-term memory</h2><p class="muted">No memory store '
            "given (--memory-sqlite / --memory-postgres, or memory= in Python).</p></section>"
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
    return (
        f'<section id="memory"><h2>Long-term memory ({len(data.memories)})</h2><table><thead><tr>'
        "<th>memory</th><th>key</th><th>scope</th><th>status</th><th>source</th><th>created</th>"
        f"<th>expires</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


_NAV = (
    ("overview", "Overview"),
    ("coverage", "Coverage"),
    ("calls", "Model calls"),
    ("summaries", "Summaries"),
    ("lookups", "Lookups"),
    ("memory", "Memory"),
    ("timeline", "Timeline"),
)


def thread_sections(data: ThreadData, links: Links, timeline: str) -> str:
    """The body of one thread's page: every section, ``timeline`` (already drawn) last."""
    nav = (
        '<nav class="sections">'
        + "".join(f'<a href="#{key}">{label}</a>' for key, label in _NAV)
        + "</nav>"
    )
    return (
        f"{nav}<main>{_overview(data)}{_coverage(data, links)}{_calls(data, links)}"
        f"{_summaries(data, links)}{_lookups(data, links)}{_memory(data, links)}"
        f'<section id="timeline"><h2>Timeline</h2>{timeline}</section></main>'
    )
