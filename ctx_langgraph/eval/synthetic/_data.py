"""The word tables and text templates of a generated session, read once from ``data/*.json``.

Names, places and products (``words.json``), the subjects of planted facts (``subjects.json``,
no word of which appears in any other text), the phrases around a turn (``phrases.json``),
the kinds of planted facts (``facts.json``), the giant tool outputs (``giants.json``), the
filler turns' texts (``turns.json``) and the tools (``tools.json``). Templates are
:meth:`str.format` strings.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["FACTS", "GIANTS", "PHRASES", "SUBJECTS", "TOOLS", "TURNS", "WORDS"]


def _load(name: str) -> Any:
    return json.loads(
        resources.files(__package__).joinpath("data").joinpath(name).read_text("utf-8")
    )


def _tables(name: str) -> dict[str, tuple[str, ...]]:
    return {key: tuple(values) for key, values in _load(name).items()}


TOOLS: list[dict[str, str]] = _load("tools.json")
"""Each tool's ``name``, ``description``, its one ``argument`` and what that argument is."""

WORDS = _tables("words.json")
"""Everything else a session talks about: people, cities, companies, items, services..."""

SUBJECTS = _tables("subjects.json")
"""The subjects of planted facts (customers, companies, products) and their months."""

PHRASES: dict[str, Any] = _load("phrases.json")
"""Openers, closers, contexts, follow-ups, prefaces, replies, and the chats (questions answered
without a tool)."""

FACTS: dict[str, dict[str, Any]] = _load("facts.json")
"""The kinds of planted facts: how each is stated, asked about and corrected."""

GIANTS: dict[str, dict[str, Any]] = _load("giants.json")
"""The giant outputs: request, tool, arguments, header and reply with ``{rows}``."""

TURNS: dict[str, Any] = _load("turns.json")
"""The filler turns' requests, commands and replies."""
