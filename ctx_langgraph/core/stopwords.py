"""The glue words a ranked search ignores (history lookup and memory recall)."""

from __future__ import annotations

__all__ = ["STOPWORDS"]

_GLUE_WORDS = (
    "a an and are as at be been by can could did do does for from had has have how i if in "
    "into is it its me my of on or our she he so than that the their them then there these "
    "they this those to us was we were what when where which while who whom why will with "
    "would you your after before about his her him s t"
)
STOPWORDS = frozenset(_GLUE_WORDS.split(" "))
