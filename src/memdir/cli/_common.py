"""Shared plumbing for the ``memdir`` commands: context object, consoles, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import click
from click.core import ParameterSource
from rich.console import Console

from memdir.errors import ConfigError, WorkspaceError
from memdir.store._urls import is_remote_url
from memdir.store.workspace import Workspace


@dataclass
class CliState:
    """What the top-level options decided, passed to every command."""

    workspace_arg: str | None = None
    namespace: str | None = None
    verbose: bool = False
    _workspace: Workspace | None = field(default=None, repr=False)

    def refuse_remote(self, what: str) -> None:
        """A usage error if the workspace is on a ``memdir serve`` server: ``what`` needs the
        store itself.

        Raises:
            click.UsageError: ``-w`` (or ``$MEMDIR_WORKSPACE``) is a server's URL.
        """
        from memdir.store.workspace import workspace_url

        if is_remote_url(workspace_url(self.workspace_arg)):
            raise click.UsageError(
                f"{what} needs the store itself (-w DIR or -w postgresql://...), not a memdir "
                "server's URL"
            )

    def workspace(self, *, create: bool = True, must_exist: bool = True) -> Workspace:
        """The workspace named by ``--workspace`` / ``$MEMDIR_WORKSPACE`` / the default, in the
        namespace of ``--namespace`` / ``$MEMDIR_NAMESPACE`` (the root without one).

        Commands that only read pass ``create=False``: a mistyped ``-w`` must fail instead
        of leaving a fresh, empty workspace behind.

        Raises:
            WorkspaceError: ``create`` is false and the directory holds no workspace.
        """
        if self._workspace is None:
            try:
                ws = Workspace(self.workspace_arg, create=create, namespace=self.namespace)
            except ConfigError as exc:
                raise click.BadParameter(str(exc), param_hint="'--namespace'") from None
            if not create and must_exist and not ws.exists():
                raise WorkspaceError(_missing(ws))
            self._workspace = ws
        return self._workspace


def _missing(ws: Workspace) -> str:
    """Why ``ws`` cannot be read: no workspace at all, or no such namespace in it."""
    if ws.remote is not None:
        return (
            f"no namespace {ws.namespace!r} on the server at {ws.url} yet: 'memdir -w "
            f"{ws.url} -n {ws.namespace} init' creates it (so does a first write)"
        )
    if ws.namespace is not None:
        root = ws.namespaced(None, create=False)
        if not root.exists():
            return f"no memdir workspace at {root.describe()}: run 'memdir init' (or pass -w)"
        names = root.namespaces()
        known = f"it has {len(names)}: 'memdir namespaces' lists them" if names else "it has none"
        return (
            f"no namespace {ws.namespace!r} in the workspace at {root.describe()} ({known}); "
            f"'memdir -n {ws.namespace} init' creates it"
        )
    return f"no memdir workspace at {ws.describe()}: run 'memdir init' (or pass -w)"


pass_state = click.make_pass_decorator(CliState, ensure=True)


def _take_workspace(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(CliState).workspace_arg = value


own_workspace_option = click.option(
    "--workspace",
    "-w",
    metavar="DIR|URL",
    expose_value=False,
    callback=_take_workspace,
    help="The workspace: a directory or postgresql://... (as 'memdir -w'; this one wins).",
)
"""``-w`` on a command itself (``memdir serve -w DIR``), beside the group's ``memdir -w DIR``."""

if TYPE_CHECKING:
    _ParamType = click.ParamType[Any]
else:  # click < 8.2 (still supported) has no generic ParamType
    _ParamType = click.ParamType


class ParsedType(_ParamType):
    """A click parameter read by ``parse``; its :class:`ConfigError` is a usage error (exit 2).

    Args:
        name: what the help calls the value (``"duration"``).
        parse: text to value; raises :class:`ConfigError` with what to write instead.
    """

    def __init__(self, name: str, parse: Callable[[str], object]) -> None:
        self.name = name
        self.parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Return ``value`` parsed, or fail with :class:`click.BadParameter`."""
        if not isinstance(value, str):
            return value  # a default, or already converted
        try:
            return self.parse(value)
        except ConfigError as exc:
            from_env = (
                ctx is not None
                and param is not None
                and param.name is not None
                and ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT
            )
            where = f" (from ${param.envvar})" if from_env and param is not None else ""
            self.fail(f"{exc}{where}", param, ctx)


def parse_context_window(text: str) -> int:
    """``"8192"`` → ``8192``: a context window is a positive whole number of tokens."""
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit() and int(digits) > 0):
        raise ConfigError(
            f"the context window must be a positive whole number of tokens, such as 8192, "
            f"not {text!r}"
        )
    return int(digits)


context_window_option = click.option(
    "--context-window",
    "context_window",
    type=ParsedType("tokens", parse_context_window),
    envvar="MEMDIR_CONTEXT_WINDOW",
    metavar="TOKENS",
    help="The model's context window, for models memdir does not know (Ollama, llama.cpp: "
    "what the server was started with); compaction and overflow recovery use it "
    "[env MEMDIR_CONTEXT_WINDOW].",
)
"""The ``--context-window`` option shared by ``chat``, ``ingest`` and ``compact``."""

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


base_url_option = click.option(
    "--base-url",
    metavar="URL",
    help="Base URL of an OpenAI-compatible server for --model (e.g. http://localhost:8000/v1).",
)
