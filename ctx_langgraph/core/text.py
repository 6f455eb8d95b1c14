"""The words search matches, split once in Python so that both backends agree.

A word is a run of letters, digits and combining marks, lower-cased (non-ASCII NFC-normalized);
unspaced scripts (CJK, kana, Hangul, Thai...) are indexed as characters and character pairs. A
word the engines could split or drop (non-ASCII, or over :data:`MAX_WORD`) becomes an ASCII
digest. Plain text is indexed by the engines directly; other text gets a search document of its
distinct tokens, and ranked search adds the stems (:mod:`ctx_langgraph.core.stem`) that differ.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Container, Iterable, Iterator
from functools import lru_cache

from ctx_langgraph.core.stem import stem
from ctx_langgraph.core.stopwords import STOPWORDS

__all__ = [
    "DOCUMENT_LIMIT",
    "MAX_WORD",
    "PLAIN_LIMIT",
    "STEMS_MARK",
    "match_tokens",
    "query_terms",
    "rank_terms",
    "rank_tokens",
    "search_document",
    "stem_counts",
    "token_document",
]

MAX_WORD = 100
"""Longest word indexed as it is; longer words are indexed by digest."""

PLAIN_LIMIT = 100_000
"""Longest text the engines tokenize themselves (PostgreSQL's tsvector has a 1 MB limit)."""

DOCUMENT_LIMIT = 400_000
"""Most characters of a search document (its first distinct tokens and stems)."""

STEMS_MARK = "|"
"""Separates a search document's tokens from its stems."""

_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
_PLAIN = re.compile(r"[\t\n\r\x20-\x7e]*")
_LONG_ASCII_WORD = re.compile(rf"[A-Za-z0-9]{{{MAX_WORD + 1}}}")
# PostgreSQL's parser splits "1e5tku" into "1e5" and "tku": such text gets a search document.
_SPLIT_BY_POSTGRES = re.compile(r"(?<![A-Za-z0-9])[0-9]+[eE][0-9]+[A-Za-z]")

# Thai, Lao, Myanmar, Hangul Jamo, Khmer, ideographic marks, kana, Hangul, CJK ideographs
_UNSPACED = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005\u3006\u3007\u3040-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_UNSPACED_RUN = re.compile(f"[{_UNSPACED}]+")


@lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern[str]:
    """A run of letters, digits and combining marks: one class of the BMP's word characters
    (fast), then one for words of the other planes."""
    category = unicodedata.category
    word = re.compile(r"[^\W_]")
    codes = [c for c in range(0x10000) if word.match(chr(c)) or category(chr(c))[0] == "M"]
    ranges: list[str] = []
    start = previous = codes[0]
    for code in [*codes[1:], -1]:
        if code != previous + 1:
            ranges.append(f"{re.escape(chr(start))}-{re.escape(chr(previous))}")
            start = code
        previous = code
    return re.compile(f"[{''.join(ranges)}]+|[^\\W_\\x00-\\uffff]+")


def _words(text: str, *, unigrams: bool) -> Iterator[str]:
    """The words of ``text``; unspaced runs as character pairs, plus single characters when
    ``unigrams`` (documents) or for a one-character run (queries)."""
    if text.isascii():
        yield from _ASCII_WORD.findall(text.lower())
        return
    for word in _word_pattern().findall(unicodedata.normalize("NFC", text).lower()):
        if word.isascii() or _UNSPACED_RUN.search(word) is None:
            yield word
            continue
        position = 0
        for unspaced in _UNSPACED_RUN.finditer(word):
            if unspaced.start() > position:
                yield word[position : unspaced.start()]
            chars = unspaced.group()
            if unigrams or len(chars) == 1:
                yield from chars
            yield from (chars[i : i + 2] for i in range(len(chars) - 1))
            position = unspaced.end()
        if position < len(word):
            yield word[position:]


def query_terms(query: str) -> list[str]:
    """The lower-cased words search matches in free text."""
    return list(_words(query, unigrams=False))


def _token(word: str) -> str:
    """The word itself when short ASCII, else its digest."""
    if word.isascii() and len(word) <= MAX_WORD:
        return word
    return _digest_token(word)


@lru_cache(maxsize=8192)
def _digest_token(word: str) -> str:
    """``x`` and a 52-bit digest of ``word``."""
    digest = hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=7)
    return "x" + digest.hexdigest()[:13]


def _distinct_tokens(words: Iterable[str]) -> Iterator[str]:
    seen_words: set[str] = set()
    seen_tokens: set[str] = set()
    for word in words:
        if word not in seen_words:
            seen_words.add(word)
            token = _token(word)
            if token not in seen_tokens:
                seen_tokens.add(token)
                yield token


def match_tokens(query: str) -> list[str]:
    """The distinct index tokens a query must all match (empty: nothing searchable)."""
    return list(_distinct_tokens(_words(query, unigrams=False)))


def _plain(text: str) -> bool:
    """Whether the engines index ``text`` itself."""
    return (
        len(text) <= PLAIN_LIMIT
        and _PLAIN.fullmatch(text) is not None
        and _LONG_ASCII_WORD.search(text) is None
        and _SPLIT_BY_POSTGRES.search(text) is None
    )


def token_document(text: str) -> str | None:
    """None for plain text, else its distinct tokens (schema versions 4 and 5's document)."""
    if _plain(text):
        return None
    kept: list[str] = []
    size = -1
    for token in _distinct_tokens(_words(text, unigrams=True)):
        size += len(token) + 1
        if size > DOCUMENT_LIMIT:
            break
        kept.append(token)
    return " ".join(kept)


def _rank_token(word: str) -> str:
    """What a word ranks by: its stem (short ASCII), else its index token."""
    if len(word) <= MAX_WORD and word.isascii():
        return stem(word) if word.isalpha() else word
    return _digest_token(word)


def search_document(text: str) -> str | None:
    """What the index holds beside the text: its distinct tokens (none when plain), then
    :data:`STEMS_MARK` and the stems that differ from their word; None when both are empty."""
    if _plain(text):
        words = dict.fromkeys(_ASCII_WORD.findall(text.lower()))
        own = dict.fromkeys(s for word in words if (s := _rank_token(word)) != word)
        return STEMS_MARK + " ".join(own) if own else None
    tokens: dict[str, None] = {}
    stems: dict[str, None] = {}
    seen: set[str] = set()
    size = -1
    for word in _words(text, unigrams=True):
        if word in seen:
            continue
        seen.add(word)
        token, stemmed = _token(word), _rank_token(word)
        add_token = token not in tokens
        add_stem = stemmed != token and stemmed not in stems
        size += (len(token) + 1) * add_token + (len(stemmed) + 1) * add_stem
        if size > DOCUMENT_LIMIT:
            break
        if add_token:
            tokens[token] = None
        if add_stem:
            stems[stemmed] = None
    return " ".join(tokens) + (STEMS_MARK + " ".join(stems) if stems else "")


def rank_terms(query: str) -> list[str]:
    """The distinct stems of the query's words, stopwords left out."""
    words = _words(query, unigrams=False)
    return list(dict.fromkeys(_rank_token(word) for word in words if word not in STOPWORDS))


def rank_tokens(text: str) -> list[str]:
    """Every word of a text as it ranks, in order and with repeats."""
    return [_rank_token(word) for word in _words(text, unigrams=True)]


def stem_counts(
    text: str, stems: Container[str], memo: dict[str, str] | None = None
) -> tuple[dict[str, int], int]:
    """How often each of ``stems`` occurs among :func:`rank_tokens` of ``text``, and their
    number (``memo`` caches word to token across texts)."""
    words = Counter(_words(text, unigrams=True))
    known = {} if memo is None else memo
    counts: dict[str, int] = {}
    for word, times in words.items():
        token = known.get(word)
        if token is None:
            token = known[word] = _rank_token(word)
        if token in stems:
            counts[token] = counts.get(token, 0) + times
    return counts, sum(words.values())
