"""Building blocks of commands with many options (``memdir serve``, ``memdir mcp``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

__all__ = ["Decorator", "shown", "stacked"]

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
"""What ``click.option`` returns: it adds an option to the command it decorates."""


def shown(
    name: str, type: click.ParamType[Any] | None, default: object, help: str, **attrs: Any
) -> Decorator:
    """The option ``name`` whose default ``--help`` shows.

    Args:
        name: the option (``"--port"``).
        type: its click type; ``None`` takes the type of ``default``.
        default: its value when it is not given.
        help: what ``--help`` says of it.
        **attrs: more arguments of :func:`click.option` (``metavar``...).
    """
    return click.option(name, type=type, default=default, show_default=True, help=help, **attrs)


def stacked(*options: Decorator) -> Decorator:
    """The options as one decorator, as if written one above the other in this order (the
    order ``--help`` lists them in)."""

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            command = option(command)
        return command

    return apply
