"""The inspector's pictures as SVG drawn on the server (no script, no style attribute, every text
escaped): the coverage bar over a thread's seqs, one stacked bar per model call, and the plot
of input tokens and cumulative cost per call."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from html import escape

from ctx_langgraph.history import CompactionCheckpoint
from ctx_langgraph.inspect.reads import CallPoint, CallRow, ThreadData
from ctx_langgraph.makeup import MAKEUP_PARTS

LANES_SHOWN = 24
"""Summary generations drawn on the coverage bar (the newest)."""

PLOT_POINTS = 1000
"""Points a plot line keeps at most (a longer series is sampled evenly, the last kept)."""

_W = 1000
_LANE = 14
_BAR = 600.0
_PLOT_X, _PLOT_Y, _PLOT_W, _PLOT_H = 64.0, 24.0, 856.0, 180.0


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def fallback_of(version: CompactionCheckpoint) -> bool:
    """Whether the offline fallback summarizer wrote this version (as its metadata says)."""
    compaction = version.metadata.get("compaction")
    return bool(isinstance(compaction, dict) and compaction.get("fallback"))


def _rect(
    x: float, y: float, w: float, h: float, cls: str, title: str, href: str | None = None
) -> str:
    rect = (
        f'<rect class="{cls}" x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}">'
        f"<title>{escape(title)}</title></rect>"
    )
    return f'<a href="{escape(href)}">{rect}</a>' if href else rect


def _line(cls: str, x1: float, y1: float, x2: float, y2: float, title: str = "") -> str:
    line = f'<line class="{cls}" x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}"'
    return f"{line}><title>{title}</title></line>" if title else f"{line}/>"


def _text(x: float, y: float, text: str, cls: str = "axis", anchor: str = "") -> str:
    anchor = f' text-anchor="{anchor}"' if anchor else ""
    return f'<text class="{cls}" x="{_num(x)}" y="{_num(y)}"{anchor}>{text}</text>'


def coverage_bar(
    data: ThreadData,
    version_href: Callable[[CompactionCheckpoint], str | None],
    seq_href: Callable[[int], str | None],
) -> str:
    """Each summary generation's covered range (the newest :data:`LANES_SHOWN`), the segments,
    the raw tail after the active summary, and the active pointer, over the thread's seqs."""
    head_seq, active_id = data.info.head_seq, data.info.active_checkpoint_id
    active_through = data.covered_through

    def x(seq: float) -> float:
        return max(0.0, min(_W, (seq - 1) / max(head_seq, 1) * _W))

    def bar(first: int, last: int, cls: str, title: str, href: str | None) -> str:
        return _rect(x(first), y, max(1.5, x(last + 1) - x(first)), _LANE - 3, cls, title, href)

    parts: list[str] = []
    y = 18.0
    for version in data.versions[-LANES_SHOWN:]:
        cls: str = "active" if version.id == active_id else version.status
        if version.id != active_id and version.status != "failed" and fallback_of(version):
            cls = "fallback"
        first, through = version.first_seq, version.covered_through_seq
        label = f"generation {version.generation} ({cls}): seqs {first}-{through}"
        href = version_href(version)
        if first > 1:
            carried = f"{label}, carried from earlier generations 1-{first - 1}"
            parts.append(_rect(0, y, x(first), _LANE - 3, f"cov carried {cls}", carried, href))
        parts.append(bar(first, through, f"cov {cls}", label, href))
        y += _LANE
    for s in data.segments:
        title, href = f"segment {s.first_seq}-{s.last_seq} ({s.status})", seq_href(s.first_seq)
        parts.append(bar(s.first_seq, s.last_seq, f"cov segment seg-{s.status}", title, href))
    y += _LANE if data.segments else 0
    tail = active_through + 1
    if head_seq > active_through:
        title = f"raw tail: seqs {tail}-{head_seq}"
        parts.append(bar(tail, head_seq, "cov tail", title, seq_href(tail)))
    y += _LANE
    said = f"active summary covers through seq {active_through}"
    parts.append(_line("pointer", x(tail), 12, x(tail), y, said))
    axis = (
        _text(0, 10, "seq 1")
        + _text(_W, 10, f"seq {head_seq}", anchor="end")
        + _text(x(tail), y + 12, said, anchor="end" if x(tail) > _W / 2 else "start")
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
    scale = _BAR / window
    x = 0.0
    rects: list[str] = []
    for part in (*MAKEUP_PARTS, "adjustment"):
        tokens = int(makeup.get(part) or 0)
        if tokens > 0:
            title = f"{part}: {tokens:,} tokens"
            rects.append(
                _rect(x, 4, tokens * scale, 16, f"part part-{part}", title, part_href(part))
            )
            x += tokens * scale
    if reserve := int(makeup.get("reserve") or 0):
        title = f"output reserve: {reserve:,} tokens"
        rects.append(
            _rect(_BAR - reserve * scale, 4, reserve * scale, 16, "part part-reserve", title)
        )
    if call.input_total is not None:
        tick = min(_BAR, call.input_total * scale)
        said = f"provider's measured input: {call.input_total:,} tokens"
        rects.append(_line("measured", tick, 1, tick, 23, said))
    return (
        f'<svg class="callbar" viewBox="0 0 {_num(_BAR)} 24" width="{_num(_BAR)}" height="24" '
        f'role="img" aria-label="request make-up">'
        f'<rect class="window" x="0" y="4" width="{_num(_BAR)}" height="16"/>{"".join(rects)}</svg>'
    )


def _plot_x(index: int, n: int) -> float:
    return _PLOT_X + (index / max(n - 1, 1)) * _PLOT_W


def _plot_y(value: float, top: float) -> float:
    return _PLOT_Y + _PLOT_H - (value / top) * _PLOT_H if top else _PLOT_Y + _PLOT_H


def _polyline(values: Sequence[float], top: float, cls: str) -> str:
    """The values as a line, sampled evenly to :data:`PLOT_POINTS` (the last one kept)."""
    n = len(values)
    if not values:
        return ""
    picked = list(enumerate(values))
    if n > PLOT_POINTS:
        step = n / PLOT_POINTS
        picked = [(int(i * step), values[int(i * step)]) for i in range(PLOT_POINTS)]
        picked.append((n - 1, values[-1]))
    coords = " ".join(f"{_num(_plot_x(i, n))},{_num(_plot_y(v, top))}" for i, v in picked)
    return f'<polyline class="{cls}" points="{coords}"/>'


def token_ticks(highest: float) -> list[int]:
    """The input-token axis: four to seven ticks from 0 in steps of 1, 2, 2.5 or 5 times a power
    of ten, the last at or above ``highest`` plus a little headroom.

    Examples:
        >>> token_ticks(4096)
        [0, 1000, 2000, 3000, 4000, 5000]
        >>> token_ticks(128_000)
        [0, 50000, 100000, 150000]
        >>> token_ticks(0)
        [0, 1, 2, 3, 4]
    """
    wanted = max(highest * 1.06, 4.0)
    rough = wanted / 5
    power = max(1, 10 ** math.floor(math.log10(rough)))
    factors = (1, 2, 2.5, 5, 10) if power >= 10 else (1, 2, 5, 10)
    step = int(next(f * power for f in factors if f * power >= rough))
    return list(range(0, math.ceil(wanted / step) * step + 1, step))


def _level_lines(values: Sequence[int | None], top: float, name: str) -> tuple[str, str]:
    """A horizontal line at each run of calls sharing a value (the window, the trigger; a call
    without one continues the run), and the newest's label at its right end."""
    runs: list[tuple[int, int, int]] = []
    for i, value in enumerate(values):
        if value is not None and runs and runs[-1][2] == value:
            runs[-1] = (runs[-1][0], i, value)
        elif value is not None:
            runs.append((i, i, value))
    if not runs:
        return "", ""
    lines = ""
    for n, (first, last, value) in enumerate(runs):
        x1 = _PLOT_X if n == 0 else _plot_x(first, len(values))
        x2 = _PLOT_X + _PLOT_W if n == len(runs) - 1 else _plot_x(last, len(values))
        y, label = _plot_y(value, top), f"{name} {value:,} tokens"
        lines += _line(f"plot-{name}", x1, y, x2, y, f"{label}, calls {first + 1}-{last + 1}")
    return lines, _text(_PLOT_X + _PLOT_W - 4, y - 4, label, f"axis plot-{name}-label", "end")


def calls_plot(calls: Sequence[CallPoint]) -> str:
    """The measured input tokens call by call on a scale from 0 with the context window and
    the compaction trigger as horizontal lines (from each call's make-up, where recorded),
    and the cumulative cost on a scale of its own (the top right says its total)."""
    tokens = [float(c.input_total or 0) for c in calls]
    cumulative = list(itertools.accumulate(c.cost or 0.0 for c in calls))
    total = cumulative[-1] if cumulative else 0.0
    top_tokens = max(tokens, default=0.0)
    windows = [c.window for c in calls]
    ticks = token_ticks(max([top_tokens, *(w for w in windows if w is not None)]))
    top = float(ticks[-1])
    right = _PLOT_X + _PLOT_W
    grid = "".join(
        _line("plot-grid", _PLOT_X, _plot_y(t, top), right, _plot_y(t, top))
        + f'<text class="axis tick" x="{_num(_PLOT_X - 6)}" y="{_num(_plot_y(t, top))}" '
        f'text-anchor="end" dominant-baseline="middle">{t:,}</text>'
        for t in ticks
    )
    window_lines, window_label = _level_lines(windows, top, "window")
    trigger_lines, trigger_label = _level_lines([c.trigger for c in calls], top, "trigger")
    unknown = sum(c.input_total is None for c in calls)
    measured = f"max {int(top_tokens):,}"
    if calls and unknown == len(calls):
        measured = "no usage reported"
    elif unknown:
        measured += f"; {unknown:,} calls with no usage reported"
    labels = (
        _text(_PLOT_X, 219, "call 1")
        + _text(right, 219, f"call {len(calls)}", anchor="end")
        + _text(_PLOT_X, 14, f"input tokens ({measured})", "axis plot-tokens-label")
        + _text(right, 14, f"cumulative cost ${total:,.4f}", "axis plot-cost-label", "end")
    )
    return (
        '<svg class="plot" viewBox="0 0 940 224" width="100%" role="img" '
        f'aria-label="input tokens and cumulative cost over {len(calls)} calls">'
        f'<rect class="plot-frame" x="{_num(_PLOT_X)}" y="{_num(_PLOT_Y)}" width="{_num(_PLOT_W)}" '
        f'height="{_num(_PLOT_H)}"/>{grid}{window_lines}{trigger_lines}'
        f"{_polyline(tokens, top, 'plot-tokens')}{_polyline(cumulative, total, 'plot-cost')}"
        f"{window_label}{trigger_label}{labels}</svg>"
    )
