"""Shared plumbing for the ``memdir`` commands: context object, consoles, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import click
from rich.console import Console

from memdir.errors import WorkspaceError
from memdir.workspace import MEMORY_DIR, Workspace


@dataclass
class CliState:
    """What the top-level options decided, passed to every command."""

    workspace_arg: str | None = None
    verbose: bool = False
    _workspace: Workspace | None = field(default=None, repr=False)

    def workspace(self, *, create: bool = True) -> Workspace:
        """The workspace named by ``--workspace`` / ``$MEMDIR_WORKSPACE`` / the default.

        Commands that only read pass ``create=False``: a mistyped ``-w`` must fail instead
        of leaving a fresh, empty workspace behind.

        Raises:
            WorkspaceError: ``create`` is false and the directory holds no workspace.
        """
        if self._workspace is None:
            ws = Workspace(self.workspace_arg, create=create)
            if not create and not (ws.memory_md.is_file() or (ws.root / MEMORY_DIR).is_dir()):
                raise WorkspaceError(
                    f"no memdir workspace at {ws.root}: run 'memdir init' (or pass -w)"
                )
            self._workspace = ws
        return self._workspace


pass_state = click.make_pass_decorator(CliState, ensure=True)

EXIT_HELP = """\b
Exit codes: 0 success · 1 error · 2 usage error · 130 interrupted.
Data goes to stdout; progress and diagnostics go to stderr."""
"""The epilog of every command's ``--help``."""

#: Diagnostics, progress and tables go to stderr; stdout is reserved for data.
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
out_console = Console(highlight=False, soft_wrap=True)


def echo_json(obj: Any) -> None:
    """Print one JSON document on stdout (UTF-8, not ASCII-escaped)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``"1 ledger"``, ``"2 ledgers"``; ``nouns`` for irregular plurals (``"entries"``)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def info(message: str) -> None:
    """A diagnostic line on stderr."""
    err_console.print(message, markup=False)


class ProgressUpdate(Protocol):
    """Moves a progress bar: ``done`` of ``total``, optionally with a new description."""

    def __call__(self, done: int, total: int, description: str | None = None) -> None: ...


@contextmanager
def progress_bar(description: str, *, enabled: bool) -> Iterator[ProgressUpdate | None]:
    """A transient progress bar on stderr, or ``None`` when ``enabled`` is false.

    Commands enable it only when stderr is a terminal and ``--json`` is not given.
    """
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int, description: str | None = None) -> None:
            bar.update(task, completed=done, total=total, description=description)

        yield update
