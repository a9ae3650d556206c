"""Argument checks of the memory classes: one-line :class:`~memdir.errors.ConfigError`\\ s.

A wrong type must fail where it is passed, saying which argument and what to pass, not later
inside a background thread as a ``TypeError`` from a comparison.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memdir.errors import ConfigError

__all__ = [
    "check_callable",
    "check_duration",
    "check_int",
    "check_model",
    "check_number",
    "check_text",
]


def check_int(owner: str, name: str, value: object, *, minimum: int) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{owner} {name} must be an integer >= {minimum}, not {value!r}")
    return value


def check_number(
    owner: str, name: str, value: object, *, low: float = 0.0, high: float | None = None
) -> float:
    """``value`` if it is a number above ``low`` (and at most ``high``, inclusive, if given).

    With ``high`` set, ``low`` is inclusive too (a ratio); otherwise it is exclusive (a time).
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if (low <= number <= high) if high is not None else number > low:
            return number
    bounds = f"between {low:g} and {high:g}" if high is not None else f"above {low:g}"
    raise ConfigError(f"{owner} {name} must be a number {bounds}, not {value!r}")


def check_duration(owner: str, name: str, value: object, *, allow_zero: bool = False) -> timedelta:
    """``value`` if it is a positive (or, with ``allow_zero``, non-negative) ``timedelta``."""
    zero = timedelta(0)
    if not isinstance(value, timedelta) or value < zero or (value == zero and not allow_zero):
        what = "non-negative" if allow_zero else "positive"
        raise ConfigError(
            f"{owner} {name} must be a {what} datetime.timedelta (e.g. timedelta(minutes=30)), "
            f"not {value!r}"
        )
    return value


def check_text(owner: str, name: str, value: object) -> str | None:
    """``value`` if it is ``None`` or a non-blank string."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"{owner} {name} must be a non-blank string or None")
    return value


def check_callable(owner: str, name: str, value: object, *, method: str | None = None) -> Any:
    """``value`` if it is ``None``, callable, or (with ``method``) has that method."""
    if value is None:
        return None
    target: object = getattr(value, method, None) if method else value
    if not callable(target):
        need = f"an object with {method}()" if method else "a function"
        raise ConfigError(f"{owner} {name} must be {need}, not {type(value).__name__}")
    return value


def check_model(owner: str, model: object) -> Any:
    """``model`` if it is a chat model (has ``generate()``)."""
    if not callable(getattr(model, "generate", None)):
        raise ConfigError(
            f"{owner} needs a ChatModel (an object with generate()), not {type(model).__name__}; "
            'use memdir.models.model_from_string("extractive") for an offline one'
        )
    return model
