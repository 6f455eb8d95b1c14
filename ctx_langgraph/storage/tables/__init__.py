"""Each domain's table declarations, numbered by schema version, for the storage core to compose.

Why here and not in the domain packages: ``setup()`` must create every table, and the storage
core sits below the stores (history, usage ledger), so it cannot import them. Each domain keeps
its DDL in its own module of this package (``branches``, ``events``, ``search``,
``summaries``: the history store's; ``usage``: the usage ledger's), as data plus the backfills
a version needs; :mod:`ctx_langgraph.storage.migrations` concatenates them per version in a
fixed domain order, so the statements a database runs are exactly those of the numbered list
the schema has always had.

A domain module declares ``SQLITE`` and ``POSTGRES``: ``{version: [step, ...]}``, a step
being SQL text or a :class:`Backfill`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Backfill", "Step", "Steps"]


@dataclass(frozen=True)
class Backfill:
    """A migration step that is not SQL: an operation fills a new column from Python."""

    name: str
    run: Callable[[], Generator[Any, Any, int]] = field(compare=False, repr=False)
    """The operation (yields statements, returns how many rows it changed)."""


Step = str | Backfill
Steps = dict[int, list[Step]]
"""A domain's migration steps by schema version."""
