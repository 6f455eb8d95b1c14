"""The retention policy: which checkpoints of a thread are kept, and why."""

from __future__ import annotations

import datetime as dt
import operator
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import SupportsIndex

from langgraph.checkpoint.base.id import UUID

__all__ = ["CheckpointDecision", "RetentionPolicy", "created_at", "decide", "parse_age"]

INTERRUPT_CHANNEL = "__interrupt__"
_UUID_EPOCH = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01


@dataclass(frozen=True)
class RetentionPolicy:
    """What to keep of each thread's checkpoints (per checkpoint namespace).

    Args:
        keep_last: keep the newest N checkpoints, an ``int`` of at least 1 (the latest is always
            kept).
        keep_within: also keep every checkpoint younger than this positive ``timedelta``; None:
            age does not matter.

    Raises:
        TypeError: ``keep_last`` is not an ``int`` (a ``bool`` or a ``float`` such as ``2.0`` is
            refused too), or ``keep_within`` is neither None nor a ``timedelta``.
        ValueError: ``keep_last`` is below 1, or ``keep_within`` is not positive.

    Examples:
        >>> RetentionPolicy(keep_last=10, keep_within=dt.timedelta(days=7))
        RetentionPolicy(keep_last=10, keep_within=datetime.timedelta(days=7))
        >>> RetentionPolicy(keep_last=float("nan"))
        Traceback (most recent call last):
        ...
        TypeError: keep_last must be an int (a count of checkpoints), got float nan
    """

    keep_last: int = 10
    keep_within: dt.timedelta | None = None

    def __post_init__(self) -> None:
        given: object = self.keep_last
        # any integral type (numpy's too), never a float: neither 2.0 nor nan is a count
        if isinstance(given, bool) or not isinstance(given, SupportsIndex):
            raise TypeError(
                "keep_last must be an int (a count of checkpoints), got "
                f"{type(given).__name__} {given!r}"
            )
        keep_last = operator.index(given)
        if keep_last < 1:
            raise ValueError(f"keep_last must be at least 1, got {given!r}")
        object.__setattr__(self, "keep_last", keep_last)
        keep_within: object = self.keep_within
        if keep_within is None:
            return
        if not isinstance(keep_within, dt.timedelta):
            raise TypeError(
                "keep_within must be a datetime.timedelta or None (parse_age('7d') reads one "
                f"from text), got {type(keep_within).__name__} {keep_within!r}"
            )
        if keep_within <= dt.timedelta(0):
            raise ValueError(f"keep_within must be positive, got {keep_within!r}")


@dataclass(frozen=True)
class _Row:
    """What a backend reads of one checkpoint."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    bytes: int
    writes: int
    writes_bytes: int
    interrupted: bool
    root_id: str | None  # the root checkpoint a subgraph call started from
    delta: bool


@dataclass(frozen=True)
class CheckpointDecision:
    """What the policy decided for one checkpoint, and why."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    created_at: dt.datetime | None
    """From the checkpoint id (LangGraph's ids are time-ordered UUIDv6); None for other ids."""
    kept: bool
    reasons: tuple[str, ...]
    """Why it is kept (``latest``, ``keep_last``, ``keep_within``, ``pending_writes``,
    ``interrupt``, ``fork_point``), why it goes (``subgraph call of a removed checkpoint``), or
    empty."""
    bytes: int = 0
    """The checkpoint's and its writes' stored size (blobs are counted when deleted)."""


def created_at(checkpoint_id: str) -> dt.datetime | None:
    """The creation time a UUIDv6 checkpoint id carries (LangGraph's ``uuid6``), else None.

    Examples:
        >>> from langgraph.checkpoint.base.id import uuid6
        >>> abs(created_at(str(uuid6())) - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(seconds=5)
        True
        >>> created_at("not-a-uuid") is None
        True
    """
    try:
        value = UUID(checkpoint_id)
    except (ValueError, TypeError, AttributeError):
        return None
    if value.version != 6:
        return None
    # LangGraph's UUID reads the v6 time field (100-ns ticks since 1582-10-15)
    return dt.datetime.fromtimestamp((value.time - _UUID_EPOCH) / 1e7, dt.timezone.utc)


def _kept_since(policy: RetentionPolicy, now: dt.datetime) -> dt.datetime | None:
    """The oldest creation time ``keep_within`` keeps at ``now`` (naive: UTC), or None."""
    if policy.keep_within is None:
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.timezone.utc)
    try:
        return now - policy.keep_within
    except OverflowError:
        return dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def decide(
    thread_id: str, rows: Sequence[_Row], policy: RetentionPolicy, now: dt.datetime
) -> list[CheckpointDecision]:
    """The policy applied to one thread's checkpoints (all namespaces), newest first per namespace."""
    by_ns: dict[str, list[_Row]] = defaultdict(list)
    for row in rows:
        by_ns[row.checkpoint_ns].append(row)
    reasons: dict[tuple[str, str], list[str]] = {}
    since = _kept_since(policy, now)
    for ns, ns_rows in by_ns.items():
        ns_rows.sort(key=lambda r: r.checkpoint_id, reverse=True)
        children: dict[str, int] = defaultdict(int)
        for row in ns_rows:
            if row.parent_id:
                children[row.parent_id] += 1
        for index, row in enumerate(ns_rows):
            why: list[str] = []
            if index == 0:
                why.append("latest")
            if index < policy.keep_last:
                why.append("keep_last")
            born = created_at(row.checkpoint_id)
            if since is not None and born is not None and born >= since:
                why.append("keep_within")
            if row.writes and not children[row.checkpoint_id]:
                why.append("pending_writes")
                if row.interrupted:
                    why.append("interrupt")
            reasons[(ns, row.checkpoint_id)] = why
        # every branching ancestor of a kept checkpoint, however far up
        parents = {row.checkpoint_id: row.parent_id for row in ns_rows}
        visited: set[str] = set()
        for row in ns_rows:
            if not reasons[(ns, row.checkpoint_id)]:
                continue
            parent = parents.get(row.checkpoint_id)
            while parent in parents and parent not in visited:
                visited.add(parent)
                if children[parent] >= 2 and "fork_point" not in reasons[(ns, parent)]:
                    reasons[(ns, parent)].append("fork_point")
                parent = parents.get(parent)
    # a subgraph call's namespace goes with the root checkpoint it started from
    root_ids = {row.checkpoint_id for row in by_ns.get("", ())}
    gone_calls = {
        ns
        for ns, ns_rows in by_ns.items()
        if ":" in ns
        and any(r.root_id in root_ids and not reasons[("", str(r.root_id))] for r in ns_rows)
    }
    return [
        CheckpointDecision(
            thread_id,
            ns,
            row.checkpoint_id,
            row.parent_id,
            created_at(row.checkpoint_id),
            ns not in gone_calls and bool(reasons[(ns, row.checkpoint_id)]),
            ("subgraph call of a removed checkpoint",)
            if ns in gone_calls
            else tuple(reasons[(ns, row.checkpoint_id)]),
            row.bytes + row.writes_bytes,
        )
        for ns in sorted(by_ns)
        for row in by_ns[ns]
    ]


def parse_age(text: str) -> dt.timedelta:
    """``7d``, ``12h``, ``30m``, ``45s`` or ``2w`` as a timedelta (the CLI's ``--keep-within``).

    Examples:
        >>> parse_age("7d"), parse_age("36h")
        (datetime.timedelta(days=7), datetime.timedelta(days=1, seconds=43200))
    """
    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
    if not isinstance(text, str):
        raise TypeError(f"an age is a string such as '7d', got {type(text).__name__} {text!r}")
    text = text.strip().lower()
    number = text[:-1]
    if len(text) < 2 or text[-1] not in units or not (number.isascii() and number.isdigit()):
        raise ValueError(f"an age looks like 7d, 12h, 30m, 45s or 2w; got {text!r}")
    try:
        return dt.timedelta(**{units[text[-1]]: int(number)})
    except OverflowError:
        raise ValueError(
            f"age {text!r} is longer than a timedelta can hold ({dt.timedelta.max.days} days)"
        ) from None
