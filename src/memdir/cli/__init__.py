"""The ``memdir`` command.

Exit codes: 0 success, 1 error (one line on stderr; ``-v`` shows the traceback),
2 usage error, 130 interrupted.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys
from typing import Any

import click

from memdir import __version__
from memdir.cli._common import EXIT_HELP, CliState
from memdir.errors import ConfigError, MemdirError
from memdir.store.namespaces import validate_namespace

# Each command's module is imported only when the command runs (or --help lists them), so
# that `memdir --version` or `memdir search` do not load the agent, the models and the rest.
_COMMANDS: dict[str, tuple[str, str]] = {
    "add": ("_memory_cmds", "add"),
    "chat": ("_chat_cmd", "chat_cmd"),
    "compact": ("_compact_cmd", "compact_cmd"),
    "consolidate": ("_maintain_cmds", "consolidate_cmd"),
    "db": ("_transfer_cmds", "db_group"),
    "demo": ("_demo", "demo"),
    "export": ("_transfer_cmds", "export_cmd"),
    "forget": ("_forget_cmd", "forget_cmd"),
    "get": ("_search_cmds", "get_cmd"),
    "hook": ("_hook_cmd", "hook_cmd"),
    "import": ("_transfer_cmds", "import_cmd"),
    "index": ("_search_cmds", "index_cmd"),
    "ingest": ("_ingest_cmd", "ingest_cmd"),
    "init": ("_memory_cmds", "init"),
    "keys": ("_keys_cmds", "keys_group"),
    "maintain": ("_maintain_cmds", "maintain_cmd"),
    "mcp": ("_mcp_cmd", "mcp_cmd"),
    "memory": ("_maintain_cmds", "memory_group"),
    "namespaces": ("_namespace_cmds", "namespaces_cmd"),
    "search": ("_search_cmds", "search_cmd"),
    "serve": ("_serve_cmd", "serve_cmd"),
    "sessions": ("_sessions_cmds", "sessions_cmd"),
    "ui": ("_ui_cmd", "ui_cmd"),
    "why": ("_memory_cmds", "why"),
}


class _Group(click.Group):
    """The top-level group: commands loaded on first use; memdir and OS errors become one
    line and exit code 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, sorted."""
        return sorted({*_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, its module imported now."""
        found = _COMMANDS.get(cmd_name)
        if found is None:
            return self.commands.get(cmd_name)
        module = importlib.import_module(f"{__name__}.{found[0]}")
        command = getattr(module, found[1])
        assert isinstance(command, click.Command)
        return command

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
    metavar="DIR|URL",
    help="Workspace: a directory, postgresql://..., or https://... a memdir serve server (key "
    "in $MEMDIR_API_KEY) [env MEMDIR_WORKSPACE; default ./.memdir/workspace].",
)
@click.option(
    "--namespace",
    "-n",
    envvar="MEMDIR_NAMESPACE",
    metavar="NAME",
    help="One isolated memory of the workspace (a user's, an agent's), kept in ns/NAME/; on "
    "a server, one of the key's (acme.NAME) [env MEMDIR_NAMESPACE; default: the workspace "
    "root, or on a server the key's own].",
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


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="memdir")
