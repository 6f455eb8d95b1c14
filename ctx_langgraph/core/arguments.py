"""Arguments checked where they are given: a builder that takes a store, a configuration or a
ledger says at build time what it got and what it expects, instead of an ``AttributeError``
from deep inside the first invoke."""

from __future__ import annotations

__all__ = ["described", "require_instance"]


def _looks_like_a_secret(text: str) -> bool:
    """A connection string (``postgresql://user:pw@host``, ``host=... password=...``), never
    echoed: it may hold a password."""
    return "://" in text or "=" in text or "@" in text


def described(value: object) -> str:
    """What ``value`` is, for an error message: its type, a short value, never a secret.

    Examples:
        >>> described("history.sqlite"), described(None), described(dict)
        ("the string 'history.sqlite'", 'None', 'the class dict (not an instance)')
        >>> described("postgresql://app:pw@db/app"), described(3.5), described(3)
        ('a connection string', 'a float', 'an int')
    """
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"the class {value.__name__} (not an instance)"
    if isinstance(value, str):
        if _looks_like_a_secret(value):
            return "a connection string"
        return f"the string {value[:80]!r}"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def require_instance(
    value: object,
    expected: type | tuple[type, ...],
    *,
    where: str,
    what: str,
    advice: str = "",
) -> None:
    """Raise a ``TypeError`` unless ``value`` is an instance of ``expected``.

    Args:
        value: the argument as given.
        expected: the type (or types) it must be an instance of.
        where: the call and argument, as the user wrote them (``add_context_management(store=...)``).
        what: what it expects, in words (``a HistoryStore instance``).
        advice: how to make one, appended to the message.

    Examples:
        >>> require_instance(3, int, where="f(n=...)", what="an int")
        >>> require_instance("3", int, where="f(n=...)", what="an int", advice="pass 3")
        Traceback (most recent call last):
        ...
        TypeError: f(n=...) expects an int, got the string '3': pass 3
    """
    if isinstance(value, expected):
        return
    message = f"{where} expects {what}, got {described(value)}"
    raise TypeError(f"{message}: {advice}" if advice else message)
