"""The inspector's pictures, drawn on the server as SVG: the coverage bar over a thread's seqs,
one stacked bar per model call, and the plot of input tokens and cumulative cost per call.

SVG needs no script and no style attribute (sizes and colours are attributes, colours come from
the stylesheet's classes), so the page keeps a Content-Security-Policy that runs no script at
all. Every text in a picture goes through :func:`html.escape`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from ctx_langgraph.history import CompactionCheckpoint
from ctx_langgraph.history.types import Segment
from ctx_langgraph.inspect.reads import CallPoint, CallRow
from ctx_langgraph.makeup import MAKEUP_PARTS

__all__ = ["LANES_SHOWN", "call_bar", "calls_plot", "coverage_bar", "fallback_of"]

LANES_SHOWN = 24
"""Summary generations drawn on the coverage bar (the newest)."""

PLOT_POINTS = 1000
"""Points a plot line keeps at most (a longer series is sampled evenly, the last kept)."""

_W = 1000
_LANE = 14


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def fallback_of(version: CompactionCheckpoint) -> bool:
    """Whether the offline fallback summarizer wrote this version (as its metadata says)."""
    compaction = version.metadata.get("compaction")
    return bool(isinstance(compaction, dict) and compaction.get("fallback"))


def _status_class(version: CompactionCheckpoint, active_id: str | None) -> str:
    if version.id == active_id:
        return "active"
    if version.status == "failed":
        return "failed"
    if fallback_of(version):
        return "fallback"
    return version.status


@dataclass(frozen=True)
class _Scale:
    head: int

    def x(self, seq: float) -> float:
        return max(0.0, min(_W, (seq - 1) / max(self.head, 1) * _W))

    def width(self, first: int, last: int) -> float:
        return max(1.5, self.x(last + 1) - self.x(first))


def _rect(x: float, y: float, w: float, h: float, cls: str, title: str, href: str | None) -> str:
    rect = (
        f'<rect class="{cls}" x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}">'
        f"<title>{escape(title)}</title></rect>"
    )
    return f'<a href="{escape(href)}">{rect}</a>' if href else rect


def _version_lanes(
    scale: _Scale,
    versions: Sequence[CompactionCheckpoint],
    active_id: str | None,
    href: Callable[[CompactionCheckpoint], str | None],
    y: float,
) -> tuple[list[str], float]:
    """One lane per version: the span it added, and (lighter) what it carried from earlier."""
    parts: list[str] = []
    for version in versions:
        cls = _status_class(version, active_id)
        first, through = version.first_seq, version.covered_through_seq
        label = f"generation {version.generation} ({cls}): seqs {first}-{through}"
        if first > 1:
            carried = f"{label}, carried from earlier generations 1-{first - 1}"
            parts.append(
                _rect(0, y, scale.x(first), _LANE - 3, f"cov carried {cls}", carried, href(version))
            )
        parts.append(
            _rect(
                scale.x(first),
                y,
                scale.width(first, through),
                _LANE - 3,
                f"cov {cls}",
                label,
                href(version),
            )
        )
        y += _LANE
    return parts, y


def _segment_lane(
    scale: _Scale, segments: Sequence[Segment], seq_href: Callable[[int], str | None], y: float
) -> tuple[list[str], float]:
    parts = [
        _rect(
            scale.x(s.first_seq),
            y,
            scale.width(s.first_seq, s.last_seq),
            _LANE - 3,
            f"cov segment seg-{s.status}",
            f"segment {s.first_seq}-{s.last_seq} ({s.status})",
            seq_href(s.first_seq),
        )
        for s in segments
    ]
    return parts, y + (_LANE if segments else 0)


def coverage_bar(
    head_seq: int,
    versions: Sequence[CompactionCheckpoint],
    segments: Sequence[Segment],
    active_id: str | None,
    active_through: int,
    version_href: Callable[[CompactionCheckpoint], str | None],
    seq_href: Callable[[int], str | None],
) -> str:
    """Each summary generation's covered range (the newest :data:`LANES_SHOWN`), the segments,
    the raw tail after the active summary, and the active pointer, over seqs 1..``head_seq``."""
    scale = _Scale(head_seq)
    lanes, y = _version_lanes(scale, list(versions)[-LANES_SHOWN:], active_id, version_href, 18.0)
    segment_lane, y = _segment_lane(scale, segments, seq_href, y)
    parts = lanes + segment_lane
    if head_seq > active_through:
        parts.append(
            _rect(
                scale.x(active_through + 1),
                y,
                scale.width(active_through + 1, head_seq),
                _LANE - 3,
                "cov tail",
                f"raw tail: seqs {active_through + 1}-{head_seq}",
                seq_href(active_through + 1),
            )
        )
    y += _LANE
    pointer = scale.x(active_through + 1)
    parts.append(
        f'<line class="pointer" x1="{_num(pointer)}" y1="12" x2="{_num(pointer)}" y2="{_num(y)}">'
        f"<title>active summary covers through seq {active_through}</title></line>"
    )
    anchor = "end" if pointer > _W / 2 else "start"
    axis = (
        f'<text class="axis" x="0" y="10">seq 1</text>'
        f'<text class="axis" x="{_W}" y="10" text-anchor="end">seq {head_seq}</text>'
        f'<text class="axis" x="{_num(pointer)}" y="{_num(y + 12)}" text-anchor="{anchor}">'
        f"active summary covers through seq {active_through}</text>"
    )
    return (
        f'<svg class="coverage" viewBox="0 0 {_W} {_num(y + 16)}" width="100%" '
        f'role="img" aria-label="coverage of seqs 1 to {head_seq}">{axis}{"".join(parts)}</svg>'
    )


def call_bar(call: CallRow, *, part_href: Callable[[str], str | None]) -> str:
    """One call's request as a stacked bar against its window: each part the budget counts,
    the difference between the estimate and the counted parts when positive, the output
    reserve at the window's end, and the provider's measured input as a tick."""
    makeup = call.makeup or {}
    window = max(int(makeup.get("window") or 0), int(makeup.get("estimate") or 0), 1)
    width = 600.0
    scale = width / window
    x = 0.0
    rects: list[str] = []
    for part in (*MAKEUP_PARTS, "adjustment"):
        tokens = int(makeup.get(part) or 0)
        if tokens <= 0:
            continue
        w = tokens * scale
        rects.append(
            _rect(x, 4, w, 16, f"part part-{part}", f"{part}: {tokens:,} tokens", part_href(part))
        )
        x += w
    reserve = int(makeup.get("reserve") or 0)
    if reserve:
        rects.append(
            _rect(
                width - reserve * scale,
                4,
                reserve * scale,
                16,
                "part part-reserve",
                f"output reserve: {reserve:,} tokens",
                None,
            )
        )
    if call.input_total is not None:
        tick = min(width, call.input_total * scale)
        rects.append(
            f'<line class="measured" x1="{_num(tick)}" y1="1" x2="{_num(tick)}" y2="23">'
            f"<title>provider's measured input: {call.input_total:,} tokens</title></line>"
        )
    return (
        f'<svg class="callbar" viewBox="0 0 {_num(width)} 24" width="{_num(width)}" height="24" '
        f'role="img" aria-label="request make-up">'
        f'<rect class="window" x="0" y="4" width="{_num(width)}" height="16"/>{"".join(rects)}</svg>'
    )


def _sampled(values: Sequence[float]) -> list[tuple[int, float]]:
    if len(values) <= PLOT_POINTS:
        return list(enumerate(values))
    step = len(values) / PLOT_POINTS
    picked = [(int(i * step), values[int(i * step)]) for i in range(PLOT_POINTS)]
    picked.append((len(values) - 1, values[-1]))
    return picked


_PLOT_X, _PLOT_Y, _PLOT_W, _PLOT_H = 64.0, 24.0, 856.0, 180.0


def _plot_x(index: int, n: int) -> float:
    return _PLOT_X + (index / max(n - 1, 1)) * _PLOT_W


def _plot_y(value: float, top: float) -> float:
    return _PLOT_Y + _PLOT_H - (value / top) * _PLOT_H if top else _PLOT_Y + _PLOT_H


def _polyline(points: list[tuple[int, float]], n: int, top: float, cls: str) -> str:
    if not points:
        return ""
    coords = " ".join(f"{_num(_plot_x(i, n))},{_num(_plot_y(v, top))}" for i, v in points)
    return f'<polyline class="{cls}" points="{coords}"/>'


def token_ticks(highest: float) -> list[int]:
    """The input-token axis: ticks from 0 in steps of 1, 2, 2.5 or 5 times a power of ten,
    four to seven of them, the last one at or above ``highest`` plus a little headroom.

    Examples:
        >>> token_ticks(4096)
        [0, 1000, 2000, 3000, 4000, 5000]
        >>> token_ticks(128_000)
        [0, 50000, 100000, 150000]
        >>> token_ticks(0)
        [0, 1, 2, 3, 4]
    """
    wanted = max(highest * 1.06, 4.0)  # the highest line never sits on the frame's top edge
    rough = wanted / 5
    power = max(1, 10 ** math.floor(math.log10(rough)))
    factors = (1, 2, 2.5, 5, 10) if power >= 10 else (1, 2, 5, 10)
    step = int(next(f * power for f in factors if f * power >= rough))
    return list(range(0, math.ceil(wanted / step) * step + 1, step))


def _runs(values: Sequence[int | None]) -> list[tuple[int, int, int]]:
    """Consecutive calls that share a known value: ``(first, last, value)``; a call with no
    value (one ``ctx_budget`` did not prepare, a summarizer call) continues the run around it."""
    runs: list[tuple[int, int, int]] = []
    for i, value in enumerate(values):
        if value is None:
            continue
        if runs and runs[-1][2] == value:
            runs[-1] = (runs[-1][0], i, value)
        else:
            runs.append((i, i, value))
    return runs


def _measured_label(calls: Sequence[CallPoint], top_tokens: float) -> str:
    """The input-token line's label: its maximum over the calls that reported usage; calls
    that reported none are drawn at 0 and said so, never shown as if measured."""
    unknown = sum(c.input_total is None for c in calls)
    if calls and unknown == len(calls):
        return "no usage reported"
    known = f"max {int(top_tokens):,}"
    return f"{known}; {unknown:,} calls with no usage reported" if unknown else known


def _level_lines(values: Sequence[int | None], top: float, name: str) -> tuple[str, str]:
    """A horizontal line at each run of the same value (the window, the trigger), and the
    label of the newest, at its right end (drawn last, over the plot's lines)."""
    runs = _runs(values)
    parts = []
    for n, (first, last, value) in enumerate(runs):
        y = _num(_plot_y(value, top))
        x1 = _PLOT_X if n == 0 else _plot_x(first, len(values))
        x2 = _PLOT_X + _PLOT_W if n == len(runs) - 1 else _plot_x(last, len(values))
        text = f"{name} {value:,} tokens"
        parts.append(
            f'<line class="plot-{name}" x1="{_num(x1)}" y1="{y}" x2="{_num(x2)}" y2="{y}">'
            f"<title>{escape(text)}, calls {first + 1}-{last + 1}</title></line>"
        )
    if not runs:
        return "", ""
    value = runs[-1][2]
    label = (
        f'<text class="axis plot-{name}-label" x="{_num(_PLOT_X + _PLOT_W - 4)}" '
        f'y="{_num(_plot_y(value, top) - 4)}" text-anchor="end">{name} {value:,} tokens</text>'
    )
    return "".join(parts), label


def calls_plot(calls: Sequence[CallPoint]) -> str:
    """The measured input tokens call by call on a scale from 0 with the context window and
    the compaction trigger as horizontal lines (from each call's make-up, where recorded),
    and the cumulative cost on a scale of its own (the top right says its total)."""
    tokens = [float(c.input_total or 0) for c in calls]
    cumulative: list[float] = []
    total = 0.0
    for call in calls:
        total += call.cost or 0.0
        cumulative.append(total)
    top_tokens = max(tokens, default=0.0)
    windows = [c.window for c in calls]
    triggers = [c.trigger for c in calls]
    ticks = token_ticks(max([top_tokens, *(w for w in windows if w is not None)]))
    top = float(ticks[-1])
    grid = "".join(
        f'<line class="plot-grid" x1="{_num(_PLOT_X)}" y1="{_num(_plot_y(t, top))}" '
        f'x2="{_num(_PLOT_X + _PLOT_W)}" y2="{_num(_plot_y(t, top))}"/>'
        f'<text class="axis tick" x="{_num(_PLOT_X - 6)}" y="{_num(_plot_y(t, top))}" '
        f'text-anchor="end" dominant-baseline="middle">{t:,}</text>'
        for t in ticks
    )
    (window_lines, window_label) = _level_lines(windows, top, "window")
    (trigger_lines, trigger_label) = _level_lines(triggers, top, "trigger")
    lines = _polyline(_sampled(tokens), len(tokens), top, "plot-tokens")
    lines += _polyline(_sampled(cumulative), len(cumulative), total, "plot-cost")
    lines = f"{window_lines}{trigger_lines}{lines}{window_label}{trigger_label}"
    right = _num(_PLOT_X + _PLOT_W)
    labels = (
        f'<text class="axis" x="{_num(_PLOT_X)}" y="219">call 1</text>'
        f'<text class="axis" x="{right}" y="219" text-anchor="end">call {len(calls)}</text>'
        f'<text class="axis plot-tokens-label" x="{_num(_PLOT_X)}" y="14">input tokens '
        f"({_measured_label(calls, top_tokens)})"
        f"</text>"
        f'<text class="axis plot-cost-label" x="{right}" y="14" text-anchor="end">cumulative cost '
        f"${total:,.4f}</text>"
    )
    return (
        '<svg class="plot" viewBox="0 0 940 224" width="100%" role="img" '
        f'aria-label="input tokens and cumulative cost over {len(calls)} calls">'
        f'<rect class="plot-frame" x="{_num(_PLOT_X)}" y="{_num(_PLOT_Y)}" width="{_num(_PLOT_W)}" '
        f'height="{_num(_PLOT_H)}"/>{grid}{lines}{labels}</svg>'
    )
