"""English stems, so that a ranked search for "went" finds "go", "goes" and "going".

A word's stem is the English Snowball stem (the ``snowballstemmer`` package) of the word, or,
for one of the frequent irregular forms in :data:`IRREGULAR` ("went", "bought", "children"),
the Snowball stem of its base form. Only words of ASCII letters are stemmed: numbers, ids
with digits ("a1042") and words of other scripts are their own stem. Documents and queries
are stemmed by this one function (cached per word), so both sides agree.

Examples:
    >>> [stem(w) for w in ["going", "goes", "went", "gone", "groups", "bought", "a1042"]]
    ['go', 'go', 'go', 'go', 'group', 'buy', 'a1042']
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from types import MappingProxyType

import snowballstemmer  # type: ignore[import-untyped]

__all__ = ["IRREGULAR", "stem"]

# each entry: a base form, then its irregular forms (past tense, past participle, plural)
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
"""Frequent irregular English forms and the base form whose stem they take (``went``:
``go``). Ambiguous forms are left out ("left" is also a direction, "lay" a verb of its own)."""

_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _snowball() -> Callable[[str], str]:
    """The English Snowball stemmer's word function (built on first use). The stemmer object
    keeps its word in its own fields while it works, so threads take turns with it."""
    stemmer = snowballstemmer.stemmer("english")

    def stem_word(word: str) -> str:
        with _LOCK:
            return str(stemmer.stemWord(word))

    return stem_word


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The stem of a lower-case word: its English Snowball stem, or the stem of its base form
    for an irregular form (:data:`IRREGULAR`); a word that is not all ASCII letters (a number,
    an id, another script) is its own stem. Cached: the same words come back turn after turn.

    Examples:
        >>> stem("shipped"), stem("children"), stem("ate"), stem("2024"), stem("naïve")
        ('ship', 'child', 'eat', '2024', 'naïve')
    """
    if not (word.isascii() and word.isalpha()):
        return word
    return _snowball()(IRREGULAR.get(word, word))
