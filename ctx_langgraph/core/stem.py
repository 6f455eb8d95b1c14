"""English stems (Snowball, irregular forms through their base form), so that a ranked search
for "went" finds "go", "goes" and "going". Only words of ASCII letters are stemmed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from types import MappingProxyType

import snowballstemmer  # type: ignore[import-untyped]

__all__ = ["IRREGULAR", "stem"]

_IRREGULAR_FORMS = """
begin began begun; break broke broken; bring brought; build built; buy bought;
catch caught; child children; choose chose chosen; come came; do did done does;
drink drank drunk; drive drove driven; eat ate eaten; fall fell fallen; feel felt;
fight fought; find found; fly flew flown; foot feet; forget forgot forgotten;
get got gotten; give gave given; go went gone goes; grow grew grown; hear heard; hold held;
keep kept; know knew known; lose lost; man men; make made; mean meant; meet met;
mouse mice; pay paid; person people; ride rode ridden; run ran; say said; see saw seen;
sell sold; send sent; sing sang sung; sit sat; sleep slept; speak spoke spoken;
spend spent; stand stood; swim swam swum; take took taken; teach taught; tell told;
think thought; throw threw thrown; tooth teeth; understand understood; wear wore worn;
win won; woman women; write wrote written
"""
IRREGULAR = MappingProxyType(
    {form: base for base, *forms in map(str.split, _IRREGULAR_FORMS.split(";")) for form in forms}
)
"""Frequent irregular English forms and the base form whose stem they take (``went``: ``go``)."""

_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _snowball() -> Callable[[str], str]:
    """The English Snowball stemmer's word function; threads take turns with the stemmer."""
    stemmer = snowballstemmer.stemmer("english")

    def stem_word(word: str) -> str:
        with _LOCK:
            return str(stemmer.stemWord(word))

    return stem_word


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The stem of a lower-case word; a word that is not all ASCII letters is its own stem."""
    if not (word.isascii() and word.isalpha()):
        return word
    return _snowball()(IRREGULAR.get(word, word))
