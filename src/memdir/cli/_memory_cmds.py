"""``memdir init`` and ``memdir add``."""

from __future__ import annotations

import sys

import click

from memdir.cli._common import EXIT_HELP, CliState, info, pass_state
from memdir.errors import MemdirError


@click.command(epilog=EXIT_HELP)
@pass_state
def init(state: CliState) -> None:
    """Create the workspace layout and an empty MEMORY.md (never touches existing files).

    Prints the workspace directory on stdout.
    """
    ws = state.workspace()
    ws.create_text("MEMORY.md", "# Memory\n")  # atomic: a file made meanwhile is kept
    click.echo(ws.describe())
    info(f"workspace ready at {ws.describe()}")


@click.command(epilog=EXIT_HELP)
@click.argument("text")
@pass_state
def add(state: CliState, text: str) -> None:
    """Append TEXT as a bullet to today's ledger ('-' reads stdin; one bullet per line).

    The ledger is re-indexed right away, so 'memdir search' finds the new bullets. Prints
    the citation of what was written (PATH#Lstart-Lend) on stdout.
    """
    from memdir.tools._core import add_memory, masked_note

    raw = sys.stdin.read() if text == "-" else text
    if not raw.strip():
        raise MemdirError("nothing to add: the text is blank")
    result = add_memory(state.workspace(), raw)
    click.echo(result.citation)
    if result.masked:
        info(masked_note(result.masked))
    if result.index_error:
        info(f"warning: saved, but the search index was not updated: {result.index_error}")
