"""Each domain's table declarations by schema version, composed by
:mod:`ctx_langgraph.storage.migrations`: a module declares ``SQLITE`` and ``POSTGRES``, each
``{version: [step, ...]}``, a step being SQL text or a :class:`Backfill`."""

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


Step = str | Backfill
Steps = dict[int, list[Step]]
