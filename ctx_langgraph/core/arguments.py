"""Arguments checked where they are given, with messages that say what was expected."""

from __future__ import annotations

import math
import numbers

__all__ = [
    "check_amount",
    "check_count",
    "check_seconds",
    "described",
    "is_count",
    "is_number",
    "require_instance",
]


def described(value: object) -> str:
    """What ``value`` is, for an error message: its type, a short value, never a secret."""
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"the class {value.__name__} (not an instance)"
    if isinstance(value, str):
        if "://" in value or "=" in value or "@" in value:
            return "a connection string"  # it may hold a password
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
    """Raise ``TypeError("<where> expects <what>, got ...: <advice>")`` unless ``value`` is an
    instance of ``expected``."""
    if isinstance(value, expected):
        return
    message = f"{where} expects {what}, got {described(value)}"
    raise TypeError(f"{message}: {advice}" if advice else message)


def is_count(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_count(
    owner: str, name: str, value: object, minimum: int, *, optional: bool = False
) -> None:
    """``<owner>.<name>`` is an int of at least ``minimum`` (or None when ``optional``)."""
    if value is None and optional:
        return
    if not is_count(value):
        expected = "an int" + (" or None" if optional else "")
        raise TypeError(
            f"{owner}.{name}={value!r} ({type(value).__name__}): expected {expected}, "
            f"at least {minimum:,}"
        )
    if value < minimum:  # type: ignore[operator]  # an Integral
        raise ValueError(f"{owner}.{name}={value!r}: expected at least {minimum:,}")


def check_seconds(
    owner: str, name: str, value: object, *, zero: bool = False, optional: bool = False
) -> None:
    """``<owner>.<name>`` is a finite number of seconds, positive (or >= 0 with ``zero``)."""
    if value is None and optional:
        return
    bound = ">= 0" if zero else "> 0"
    if not is_number(value):
        raise TypeError(
            f"{owner}.{name}={value!r} ({type(value).__name__}): expected seconds, a "
            f"number {bound}" + (" or None" if optional else "")
        )
    number = float(value)  # type: ignore[arg-type]  # a Real
    if not (math.isfinite(number) and (number >= 0 if zero else number > 0)):
        raise ValueError(f"{owner}.{name}={value!r}: expected a finite number {bound}")


def check_amount(owner: str, name: str, value: object, *, zero: bool = False) -> None:
    """``<owner>.<name>`` is a token count (int) or a fraction (float in (0, 1]; [0, 1]
    and a count >= 0 with ``zero``)."""
    low = "[0, 1]" if zero else "(0, 1]"
    expected = (
        f"a fraction of the usable window (a float in {low}, e.g. 0.8) or a number of tokens "
        "(an int, e.g. 90_000)"
    )
    if not is_number(value):
        raise TypeError(f"{owner}.{name}={value!r} ({type(value).__name__}): expected {expected}")
    if is_count(value):
        if value < 0 or (value == 0 and not zero):  # type: ignore[operator]  # an Integral
            raise ValueError(
                f"{owner}.{name}={value!r}: a number of tokens must be "
                + ("at least 0" if zero else "positive")
            )
        return
    number = float(value)  # type: ignore[arg-type]  # a Real
    if not (math.isfinite(number) and (number >= 0 if zero else number > 0) and number <= 1):
        raise ValueError(f"{owner}.{name}={value!r}: expected {expected}")
