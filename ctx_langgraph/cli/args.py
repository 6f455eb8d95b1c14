"""Argument parsing for the ``ctx-langgraph`` command line: typed converters and input checks.

Every check here runs before a command starts its work, and every failure is a
:class:`UsageError` (or argparse's own error) that ``main()`` prints as one line,
``ctx-langgraph <command>: error: <message>``, with exit status 2. A message names the option
and the value at fault, and says what would be accepted instead.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "MIN_WINDOW",
    "ArgumentParser",
    "HelpFormatter",
    "UsageError",
    "age",
    "check_postgres",
    "compare",
    "existing_file",
    "existing_path",
    "int_between",
    "new_sqlite_file",
    "non_empty",
    "non_negative_int",
    "one_line",
    "output_dir",
    "output_file",
    "positive_int",
    "seed_list",
    "sqlite_tables",
    "strategies",
    "window",
]


class UsageError(Exception):
    """The command line names something the command cannot use: a value out of range, a file
    that is missing or of the wrong kind, a database that cannot be reached.

    ``prog`` is the command that refused it (``ctx-langgraph export``), when known.
    """

    def __init__(self, message: str, *, prog: str | None = None) -> None:
        super().__init__(message)
        self.prog = prog


def one_line(text: object) -> str:
    """``text`` on one line: driver messages (psycopg's) span several."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; every option's default appended to its help.

    Options whose default is ``None`` or ``False`` (flags) get nothing appended: their help
    says what happens without them.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        unset = action.default is None or action.default is False
        if (
            action.option_strings
            and not unset
            and action.default != argparse.SUPPRESS
            and "default" not in text
        ):
            text += " (default: %(default)s)"
        return text


class ArgumentParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are raised as :class:`UsageError`, not printed with
    the usage block and exited from, so ``main()`` reports them in one line and returns 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')", prog=self.prog)


# --------------------------------------------------------------------------- numbers


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def int_between(low: int, high: int | None = None, *, what: str = "") -> Callable[[str], int]:
    """A converter for an integer in ``[low, high]`` (no upper bound when ``high`` is None)."""
    noun = f" ({what})" if what else ""

    def convert(text: str) -> int:
        value = _integer(text)
        if value < low or (high is not None and value > high):
            bound = f"at least {low:,}" if high is None else f"between {low:,} and {high:,}"
            raise argparse.ArgumentTypeError(f"must be {bound}{noun}, got {text!r}")
        return value

    convert.__name__ = "integer"
    return convert


positive_int = int_between(1)
non_negative_int = int_between(0)


def seed_list(text: str) -> list[int]:
    """``--seeds``: comma-separated integers, each once (``0,1,2``)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 0,1,2, got {text!r}"
        )
    seeds = [_integer(part) for part in parts]
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"each seed once, got {repeated} more than once")
    return seeds


def age(text: str) -> dt.timedelta:
    """A positive age: ``7d``, ``12h``, ``30m``, ``45s`` or ``2w``."""
    from ctx_langgraph.retention import parse_age

    try:
        value = parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= dt.timedelta(0):
        raise argparse.ArgumentTypeError(f"an age must be positive, got {text!r}")
    return value


def non_empty(text: str) -> str:
    """A name such as a thread id: anything but empty or blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty, got {text!r}")
    return text


# --------------------------------------------------------------------------- paths


def existing_path(text: str) -> Path:
    """A file or directory that exists."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file or directory: {text!r}")
    return path


def existing_file(text: str) -> Path:
    """A file that exists (not a directory)."""
    path = existing_path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file")
    return path


def _creatable(path: Path, text: str) -> None:
    """The nearest existing ancestor of ``path`` must be a directory we can write into."""
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text!r} cannot be created: {ancestor} is not a directory"
        )


def output_dir(text: str) -> Path:
    """A directory to write into: an existing one, or one that can be created."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not a directory")
    _creatable(path, text)
    return path


def output_file(text: str) -> Path:
    """A file to write: its directory must exist, and it must not be a directory itself."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file")
    if not path.absolute().parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: no such directory {str(path.parent)!r}")
    return path


def new_sqlite_file(text: str) -> Path:
    """A SQLite file a demo creates: not there yet (or empty), in a directory that exists."""
    path = output_file(text)
    if path.exists() and path.stat().st_size > 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} already exists: the demo writes a new history store; pass a new path "
            "or delete the file"
        )
    return path


def sqlite_tables(path: Path | str, option: str) -> set[str]:
    """The tables of an existing SQLite database, read without writing anything to it."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{option} {str(path)!r}: no such file")
    if path.is_dir():
        raise UsageError(f"{option} {str(path)!r} is a directory, not a SQLite database file")
    from ctx_langgraph.storage.sqlite import table_names

    try:
        return table_names(path)
    except sqlite3.Error as exc:
        raise UsageError(f"{option} {str(path)!r} is not a SQLite database ({exc})") from None


# --------------------------------------------------------------------------- PostgreSQL


def _without(dsn: str, exc: BaseException) -> str:
    """The driver's message on one line, the connection string (which psycopg may quote whole,
    password and all) left out."""
    return one_line(exc).replace(dsn, "<the connection string>")


def check_postgres(
    dsn: str, option: str, *, table: str | None = None, hint: str = "", timeout: int = 5
) -> None:
    """Connect once to ``dsn`` (at most ``timeout`` seconds), and check ``table`` is there.

    A malformed string, a server that does not answer, refused credentials or a missing
    ``table`` (followed by ``hint``) are a :class:`UsageError` naming the server, never its
    password.
    """
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise UsageError(f"{option} needs psycopg: pip install 'ctx-langgraph[postgres]'") from None
    if not dsn.strip():
        raise UsageError(
            f"{option}: an empty connection string; write it as "
            "postgresql://user@host:5432/dbname or 'host=... dbname=...'"
        )
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise UsageError(
            f"{option}: not a PostgreSQL connection string ({_without(dsn, exc)}); write it as "
            "postgresql://user@host:5432/dbname or 'host=... dbname=...'"
        ) from None
    server = (
        f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}/"
        f"{params.get('dbname') or params.get('user') or ''}"
    )
    try:
        with psycopg.connect(dsn, connect_timeout=timeout, autocommit=True) as conn:
            found = (
                conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
                if table
                else (True,)
            )
    except psycopg.Error as exc:
        raise UsageError(
            f"{option}: cannot connect to PostgreSQL at {server}: {_without(dsn, exc)}"
        ) from None
    if not (found and found[0]):
        raise UsageError(f"{option}: PostgreSQL at {server} has no {table!r} table{hint}")


# --------------------------------------------------------------------------- strategies


MIN_WINDOW = 1024
"""The smallest ``--window``: below it the output reserve and the compaction target leave the
offline summary less room than its empty skeleton takes. Whether a conversation fits a given
window still depends on its largest turn and its tool schemas."""


def window(text: str) -> int:
    """``--window``: tokens, at least :data:`MIN_WINDOW`, and a budget that resolves."""
    from ctx_langgraph.eval.strategies import eval_config

    tokens = int_between(MIN_WINDOW, what="tokens of context window")(text)
    try:
        eval_config(tokens).resolve()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"no budget fits a {tokens:,}-token window: {exc}"
        ) from None
    return tokens


def strategies(text: str) -> list[str]:
    """``--strategies``: ``all`` or comma-separated strategy names."""
    from ctx_langgraph.eval.strategies import STRATEGIES, unknown_strategies

    if text.strip() == "all":
        return list(STRATEGIES)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = unknown_strategies(names)
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown strategies {unknown or [text]}; choose all or a comma-separated list of "
            f"{', '.join(STRATEGIES)}"
        )
    return list(dict.fromkeys(names))


def compare(text: str) -> tuple[str, ...]:
    """``--compare``: ``peers``, ``all``, ``none``, or comma-separated strategy names."""
    from ctx_langgraph.eval.demo import compared_strategies

    try:
        names = compared_strategies(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not names and text.strip() != "none":
        raise argparse.ArgumentTypeError(
            f"no strategy in {text!r}; choose peers, all, none or comma-separated names"
        )
    return names
