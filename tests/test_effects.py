"""The effect driver: typed, bound calls, run sync or async; no method named by a string."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctx_langgraph.core.effects import Flow, arun, call, run

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ctx_langgraph"
# ``call(store, "append", ...)``, ``call(\n    store.memory, 'batch'``, ``Call(x, "name")``: a target
# then a method name as a string literal
EFFECT = ("call", "Call")
STRING_NAMED = re.compile(r"""\b[cC]all\(\s*[\w.]+(?:\([^()]*\))?\s*,\s*["'][A-Za-z_]\w*["']""")


class Store:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def get(self, key: str, *, suffix: str = "") -> str:
        self.seen.append("sync")
        if key == "boom":
            raise KeyError(key)
        return key.upper() + suffix

    async def aget(self, key: str, *, suffix: str = "") -> str:
        self.seen.append("async")
        if key == "boom":
            raise KeyError(key)
        return key.upper() + suffix

    def pure(self, n: int) -> int:
        self.seen.append("pure")
        return n + 1


def flow(store: Store) -> Flow[str]:
    value = yield from call(store.get, store.aget, "a", suffix="!")
    try:
        yield from call(store.get, store.aget, "boom")
    except KeyError:  # thrown into the flow at the yield
        value += "?"
    n = yield from call(store.pure, None, 1)
    legacy = yield call(store.get, store.aget, "b")  # a bare yield still works, untyped
    return f"{value}{n}{legacy}"


def test_run_calls_the_sync_twin_and_throws_errors_into_the_flow():
    store = Store()
    assert run(flow(store)) == "A!?2B"
    assert store.seen == ["sync", "sync", "pure", "sync"]


async def test_arun_awaits_the_async_twin_and_calls_a_sync_only_effect():
    store = Store()
    assert await arun(flow(store)) == "A!?2B"
    assert store.seen == ["async", "async", "pure", "async"]


def test_an_error_the_flow_does_not_catch_reaches_the_caller_and_closes_the_flow():
    closed: list[bool] = []

    def failing(store: Store) -> Flow[str]:
        try:
            return (yield from call(store.get, store.aget, "boom"))
        finally:
            closed.append(True)

    with pytest.raises(KeyError):
        run(failing(Store()))
    assert closed == [True]


def test_no_effect_names_its_method_by_a_string():
    """Every effect is a bound, typed call: ``call(store.append, store.aappend, ...)``, never
    ``call(store, "append", ...)`` (which hides the arguments from the type checker and the
    callers from "find usages"). Code and docstrings alike."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in STRING_NAMED.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call) or getattr(node.func, "id", None) not in EFFECT:
                continue
            first, second = [*node.args, None, None][:2]
            named = isinstance(second, ast.Constant) and isinstance(second.value, str)
            if named and not isinstance(first, ast.Constant):  # (not the eval's Call("tool", ..))
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    for path in sorted((ROOT / "docs").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for m in STRING_NAMED.finditer(text)]
    assert not found, "effects named by a string:\n" + "\n".join(found)


def test_the_pattern_finds_a_string_named_effect():
    assert STRING_NAMED.search('x = yield call(s.store, "get_event", scope)')
    assert STRING_NAMED.search("yield call(\n    _Off(store), 'batch', ops)")
    assert not STRING_NAMED.search("yield from call(store.get_event, store.aget_event, scope)")


SNIPPET = """
from effects import Flow, call


class Store:
    def get(self, key: str, *, limit: int = 1) -> list[str]:
        return [key] * limit

    async def aget(self, key: str, *, limit: int = 1) -> list[str]:
        return [key] * limit

    async def aget_wide(self, key: int, *, limit: int = 1) -> list[str]:
        return [str(key)] * limit


def flow(store: Store) -> Flow[list[str]]:
    rows = yield from call(store.get, store.aget, {arguments})
    {after}
    return rows
"""


def _mypy(tmp_path: Path, arguments: str, after: str = "pass") -> subprocess.CompletedProcess[str]:
    shutil.copy(PACKAGE / "core" / "effects.py", tmp_path / "effects.py")
    (tmp_path / "snippet.py").write_text(SNIPPET.format(arguments=arguments, after=after))
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "snippet.py"]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("arguments", "after", "error"),
    [
        ("3", "pass", 'Argument 3 to "call" has incompatible type "int"; expected "str"'),
        ('"k", limit="2"', "pass", 'incompatible type "str"; expected "int"'),
        ('"k", top=2', "pass", 'Unexpected keyword argument "top"'),
        ('"k"', "count: int = rows", 'expression has type "list[str]", variable has type "int"'),
    ],
    ids=["positional", "keyword", "unknown-keyword", "result"],
)
def test_mypy_strict_checks_the_arguments_and_the_result_of_an_effect(
    tmp_path, arguments, after, error
):
    result = _mypy(tmp_path, arguments, after)
    assert result.returncode == 1 and error in result.stdout, result.stdout + result.stderr


def test_mypy_strict_checks_the_async_twin_against_the_same_arguments(tmp_path):
    (tmp_path / "extra.py").write_text(
        "from effects import call\nfrom snippet import Store\n\n"
        "def bad(store: Store) -> None:\n"
        "    call(store.get, store.aget_wide, 'k')\n"
    )
    shutil.copy(PACKAGE / "core" / "effects.py", tmp_path / "effects.py")
    (tmp_path / "snippet.py").write_text(SNIPPET.format(arguments='"k"', after="pass"))
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "extra.py"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and 'Argument 2 to "call"' in result.stdout, result.stdout


def test_mypy_strict_passes_a_well_typed_effect(tmp_path):
    result = _mypy(tmp_path, '"k", limit=2', "first: str = rows[0]")
    assert result.returncode == 0, result.stdout + result.stderr
