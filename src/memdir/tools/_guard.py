"""What every tool function shares: errors as text, and the workspace argument."""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeAlias

from memdir.errors import MemdirError
from memdir.store.workspace import Workspace

__all__ = ["WorkspaceArg", "clip", "lines_within", "one_line", "tool", "workspace_of"]

logger = logging.getLogger("memdir.tools")
_P = ParamSpec("_P")
WorkspaceArg: TypeAlias = Workspace | str | os.PathLike[str] | None


def tool(fn: Callable[_P, str]) -> Callable[_P, str]:
    """Turn every failure into ``Error: ...`` text: a tool must never raise into the loop."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> str:
        try:
            return fn(*args, **kwargs)
        except MemdirError as exc:
            return f"Error: {exc}"
        except (sqlite3.Error, OSError) as exc:
            logger.warning("%s failed: %s", fn.__name__, type(exc).__name__)
            return (
                f"Error: the memory store could not be read ({type(exc).__name__}: {exc}); "
                "try again later"
            )
        except Exception as exc:
            logger.exception("%s failed unexpectedly", fn.__name__)
            return f"Error: {fn.__name__} failed unexpectedly ({type(exc).__name__}); try again"

    return wrapper


def workspace_of(workspace: WorkspaceArg, namespace: str | None = None) -> Workspace:
    """The workspace a tool works on (in the caller's namespace)."""
    return Workspace.coerce(workspace, namespace)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def one_line(text: str) -> str:
    """``text`` with every run of white space (newlines too) made one space."""
    return " ".join(text.split())


FOOTER_RESERVE = 120
"""Characters kept free for the "more not shown" line while lines remain."""


def lines_within(
    header: str, lines: Sequence[str], char_cap: int, more: str, noun: tuple[str, str]
) -> str:
    """``header`` and as many ``lines`` as fit in ``char_cap``, then a note on the rest.

    ``noun`` is the singular and plural of what a line is; ``more`` says what to do about
    the lines left out. The first line is always shown.
    """
    out = [header]
    used = len(header) + 1
    for shown, line in enumerate(lines):
        # Leave room for the footer whenever lines remain after this one.
        reserve = FOOTER_RESERVE if shown + 1 < len(lines) else 0
        if shown > 0 and used + len(line) + 1 + reserve > char_cap:
            rest = len(lines) - shown
            out.append(f"... {rest} more {noun[rest != 1]} not shown (output limit); {more}")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)
