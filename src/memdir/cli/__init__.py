"""The ``memdir`` command.

Exit codes: 0 success, 1 error (one line on stderr; ``-v`` shows the traceback),
2 usage error, 130 interrupted.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from typing import Any

import click

from memdir import __version__
from memdir.cli._common import EXIT_HELP, CliState
from memdir.errors import ConfigError, MemdirError
from memdir.store.namespaces import validate_namespace


class _Group(click.Group):
    """A group that turns memdir and OS errors into one line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MemdirError as exc:
            self._fail(ctx, str(exc))
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): not an error worth a traceback.
            sys.stderr.close()
            ctx.exit(1)
        except (OSError, sqlite3.Error) as exc:
            # The machine's fault (disk full, permission denied, a locked database): one line.
            self._fail(ctx, f"{exc} ({type(exc).__name__})")

    @staticmethod
    def _fail(ctx: click.Context, message: str) -> None:
        state = ctx.find_object(CliState)
        if state is not None and state.verbose:
            raise  # the exception being handled, with its traceback (-v)
        click.echo(f"Error: {message}", err=True)
        ctx.exit(1)


@click.group(cls=_Group, epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--workspace",
    "-w",
    envvar="MEMDIR_WORKSPACE",
    metavar="DIR",
    help="Workspace directory [env MEMDIR_WORKSPACE; default ./.memdir/workspace].",
)
@click.option(
    "--namespace",
    "-n",
    envvar="MEMDIR_NAMESPACE",
    metavar="NAME",
    help="One isolated memory of the workspace (a user's, an agent's), kept in ns/NAME/ "
    "[env MEMDIR_NAMESPACE; default: the workspace root].",
)
@click.option("--verbose", "-v", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(__version__, "--version", prog_name="memdir")
@click.pass_context
def cli(ctx: click.Context, workspace: str | None, namespace: str | None, verbose: bool) -> None:
    """Durable, file-based memory for LLM agents."""
    state = ctx.ensure_object(CliState)
    state.workspace_arg = workspace
    if namespace is None and os.environ.get("MEMDIR_NAMESPACE") == "":
        namespace = ""  # click reads an empty variable as unset; it is a mistake, not the root
    if namespace is not None:
        try:
            validate_namespace(namespace)
        except ConfigError as exc:
            raise click.BadParameter(
                str(exc), param_hint="'--namespace' / $MEMDIR_NAMESPACE"
            ) from None
    state.namespace = namespace
    state.verbose = verbose
    if verbose:
        import logging

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)


def _register() -> None:
    from memdir.cli import _demo, _hook_cmd, _mcp_cmd, _memory_cmds, _search_cmds

    for command in [*_memory_cmds.COMMANDS, *_search_cmds.COMMANDS, *_demo.COMMANDS]:
        cli.add_command(command)
    cli.add_command(_mcp_cmd.mcp_cmd)
    cli.add_command(_hook_cmd.hook_cmd)
    from memdir.cli import _maintain_cmds

    for command in _maintain_cmds.COMMANDS:
        cli.add_command(command)
    from memdir.cli._compact_cmd import compact_cmd

    cli.add_command(compact_cmd)
    from memdir.cli._chat_cmd import chat_cmd
    from memdir.cli._ingest_cmd import ingest_cmd

    cli.add_command(ingest_cmd)
    cli.add_command(chat_cmd)
    from memdir.cli._namespace_cmds import namespaces_cmd
    from memdir.cli._sessions_cmds import sessions_cmd

    cli.add_command(namespaces_cmd)
    cli.add_command(sessions_cmd)
    from memdir.cli import _transfer_cmds

    for command in _transfer_cmds.COMMANDS:
        cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="memdir")
