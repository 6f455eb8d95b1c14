"""The words search matches, split once in Python so that both backends agree.

The full-text engines split text their own way (PostgreSQL's parser depends on the database
locale and drops words such as ``½`` or very long ones; SQLite's ``unicode61`` keeps a CJK
sentence as one word). So the store decides what a word is here, for documents and queries
alike, and hands the engines only tokens that both split the same way:

- a word is a run of letters, digits and combining marks (underscore splits);
- letters are lower-cased, non-ASCII text is NFC-normalized first;
- scripts written without spaces (CJK, kana, Hangul, Thai, Lao, Khmer, Myanmar) are indexed as
  every character and every pair of neighbouring characters; a query of such a run matches its
  pairs (or the character itself when the run has one), so ``你好`` finds ``我说你好世界``;
- a token the engines could split or drop (non-ASCII, or longer than :data:`MAX_WORD`) is
  replaced by a short ASCII digest, the same in documents and queries.

Search is an AND of a query's distinct tokens, each matching a whole token of an event (no
prefixes, no phrases). Text that is plain (printable ASCII, no word over :data:`MAX_WORD`, none
PostgreSQL's parser splits differently, at most :data:`PLAIN_LIMIT` characters) is indexed by
the engines directly, as before; any other text gets a *token document*: the distinct tokens
of its text, which the index reads instead.

Ranked search matches *stems* (:mod:`ctx_langgraph.core.stem`: a word of ASCII letters is
stemmed, "went" and "going" are both ``go``; any other word ranks by its token). The index
holds, beside a text's tokens, the distinct stems that differ from their word; the stored
*search document* (:func:`search_document`) carries both.
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
"""Longest word the engines index as it is; longer words are indexed by digest."""

PLAIN_LIMIT = 100_000
"""Longest text the engines tokenize themselves (PostgreSQL's tsvector of a longer text can pass
its 1 MB limit); a longer one gets a search document of its distinct tokens."""

DOCUMENT_LIMIT = 400_000
"""Most characters of a search document: the distinct tokens of a text in order of first
appearance (and their stems), as many as fit. Words first seen beyond it in a huge text are not
searchable."""

STEMS_MARK = "|"
"""Separates a search document's tokens from its stems (tokens and stems never hold it)."""

_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
_PLAIN = re.compile(r"[\t\n\r\x20-\x7e]*")
_LONG_ASCII_WORD = re.compile(rf"[A-Za-z0-9]{{{MAX_WORD + 1}}}")
# PostgreSQL's parser reads a word starting like "1e5" as a number and splits off what follows
# ("1e5tku" -> "1e5", "tku"): such text gets a search document too.
_SPLIT_BY_POSTGRES = re.compile(r"(?<![A-Za-z0-9])[0-9]+[eE][0-9]+[A-Za-z]")

# Scripts written without spaces between words: indexed by characters and character pairs.
_UNSPACED = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1100-\u11ff"  # Hangul Jamo
    "\u1780-\u17ff"  # Khmer
    "\u3005\u3006\u3007"  # ideographic iteration and closing marks, number zero
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\U00020000-\U0003134f"  # CJK extensions B to G
)
_UNSPACED_RUN = re.compile(f"[{_UNSPACED}]+")


@lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern[str]:
    """A word: a run of letters, digits and combining marks (so ``naïve`` in decomposed form,
    Devanagari or Thai words stay whole). Built once, on the first non-ASCII text, as one class
    listing the BMP's word characters (a class the regex engine tests in constant time; an
    alternation with a class of marks is five times slower), then a class for words of the
    other planes (CJK extensions, mathematical letters), whose marks split words."""
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
    """The words of ``text``; unspaced runs as character pairs, with every single character
    too when ``unigrams`` (documents) or only for a one-character run (queries)."""
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
    """Split free text into the lower-cased words search matches (see the module docstring).

    Examples:
        >>> query_terms("Invoice INV-2023-0042, paid?")
        ['invoice', 'inv', '2023', '0042', 'paid']
        >>> query_terms("日本語とEnglish")
        ['日本', '本語', '語と', 'english']
    """
    return list(_words(query, unigrams=False))


def _token(word: str) -> str:
    """The index token of a word: itself when both engines keep it whole (short ASCII), else
    ``x`` and a 52-bit digest (a word the engines would split, change or drop)."""
    if word.isascii() and len(word) <= MAX_WORD:
        return word
    return _digest_token(word)


@lru_cache(maxsize=8192)
def _digest_token(word: str) -> str:
    """``x`` and a 52-bit digest of ``word``. Cached: the same messages are recorded turn
    after turn. Only these words are: a word that is its own token costs nothing to find, and
    most such words (numbers, ids, hashes) never come back, so caching them would only fill
    memory."""
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
    """The distinct index tokens a query must all match (empty: nothing searchable).

    Examples:
        >>> match_tokens("Refund refund A-1042")
        ['refund', 'a', '1042']
    """
    return list(_distinct_tokens(_words(query, unigrams=False)))


def _plain(text: str) -> bool:
    """Whether the engines index ``text`` itself (see the module docstring)."""
    return (
        len(text) <= PLAIN_LIMIT
        and _PLAIN.fullmatch(text) is not None
        and _LONG_ASCII_WORD.search(text) is None
        and _SPLIT_BY_POSTGRES.search(text) is None
    )


def token_document(text: str) -> str | None:
    """The tokens the full-text index holds for a text: None when the engines can index the
    text itself (plain), else its distinct tokens separated by single spaces (at most
    :data:`DOCUMENT_LIMIT` characters). The search document of schema versions 4 and 5.

    Examples:
        >>> token_document("order A-1042 shipped") is None
        True
        >>> token_document("header\\x00 payload")
        'header payload'
    """
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
    """What a word ranks by: its stem when it is ASCII letters the engines keep whole, else its
    index token (numbers, ids, other scripts, digests). Not cached itself: stems and digests
    are (a cache of every word seen would mostly hold numbers and ids never seen again)."""
    if len(word) <= MAX_WORD and word.isascii():
        return stem(word) if word.isalpha() else word
    return _digest_token(word)


def search_document(text: str) -> str | None:
    """What the full-text index holds for a text beside the text itself: None when the engines
    index the text (plain) and no word of it has a stem of its own; else the text's distinct
    tokens (none for plain text, which the engines read), then, when a word's stem differs
    from it, :data:`STEMS_MARK` and those distinct stems. Tokens and stems are separated by
    single spaces, at most :data:`DOCUMENT_LIMIT` characters together. One pass over the
    words, each stemmed once (cached).

    Examples:
        >>> search_document("order A-1042") is None
        True
        >>> search_document("order A-1042 shipped")
        '|ship'
        >>> search_document("header\\x00 payloads")
        'header payloads|payload'
    """
    if _plain(text):  # the engines read the words; each is its own token (short ASCII)
        words = dict.fromkeys(_ASCII_WORD.findall(text.lower()))
        own = dict.fromkeys(s for word in words if (s := _rank_token(word)) != word)
        return STEMS_MARK + " ".join(own) if own else None
    tokens: dict[str, None] = {}
    stems: dict[str, None] = {}
    seen: set[str] = set()
    size = -1  # the document's length so far: one separator between any two items
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
    """What a ranked search weighs: the distinct stems of the query's words, glue words
    (:data:`~ctx_langgraph.core.stopwords.STOPWORDS`) left out; empty when none is left.

    Examples:
        >>> rank_terms("Where did we go for the groups' dinners?")
        ['go', 'group', 'dinner']
    """
    words = _words(query, unigrams=False)
    return list(dict.fromkeys(_rank_token(word) for word in words if word not in STOPWORDS))


def rank_tokens(text: str) -> list[str]:
    """Every word of a text as it ranks (its stem, or its index token), in order and with
    repeats: what a ranked search counts a term's frequency and a text's length in.

    Examples:
        >>> rank_tokens("Went going, gone: 3 GOES")
        ['go', 'go', 'go', '3', 'go']
    """
    return [_rank_token(word) for word in _words(text, unigrams=True)]


def stem_counts(
    text: str, stems: Container[str], memo: dict[str, str] | None = None
) -> tuple[dict[str, int], int]:
    """:func:`rank_tokens` of ``text`` as BM25 reads it: how often each of ``stems`` occurs
    among them (those that occur) and how many there are, without building the list: each
    distinct word is turned into its token once (``memo``: the words a caller already turned,
    across texts).

    Examples:
        >>> stem_counts("Went going, gone: 3 GOES to go", {"go", "3"})
        ({'go': 5, '3': 1}, 7)
    """
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
