"""The package's rules are stated for any conversation: no docstring or comment outside the
evaluation names the people or topics of the benchmark its figures are measured on (LoCoMo),
so a rule is never justified by one benchmark's questions (docs/design.md §4 gives the
figures instead)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ctx_langgraph"
EVALUATION = {"eval", "cli"}

# LoCoMo's speakers whose names are not common words, and its questions' telltale topics
BENCHMARK_WORDS = re.compile(r"\b(Caroline|Melanie|Gina|Joanna|Nate|Maria|LGBTQ)\b")


def _prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and string literal (docstrings included) of a module."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            found.append((token.start[0], token.string))
    return found


def test_no_docstring_or_comment_names_the_benchmark_people():
    named = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {match.group()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not EVALUATION & set(path.relative_to(PACKAGE).parts)
        for line, text in _prose(path.read_text(encoding="utf-8"))
        for match in BENCHMARK_WORDS.finditer(text)
    ]
    assert not named, "say the rule for any conversation:\n" + "\n".join(named)


def test_the_check_finds_a_name_in_a_docstring_and_a_comment():
    source = '"""Ranks what Caroline said."""\nx = 1  # as Joanna asked\ny = "Nate"\n'
    assert [line for line, text in _prose(source) if BENCHMARK_WORDS.search(text)] == [1, 2, 3]
