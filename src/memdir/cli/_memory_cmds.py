"""``memdir init``, ``memdir add`` and ``memdir why``."""

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
    result = add_memory(state.workspace(), raw, origin="person")
    click.echo(result.citation)
    if result.masked:
        info(masked_note(result.masked))
    if result.index_error:
        info(f"warning: saved, but the search index was not updated: {result.index_error}")


@click.command(epilog=EXIT_HELP)
@click.argument("citation")
@click.option("--json", "as_json", is_flag=True, help="Print the chain as JSON.")
@pass_state
def why(state: CliState, citation: str, as_json: bool) -> None:
    """Show where the bullet at CITATION came from, down to the conversation.

    CITATION is a line of MEMORY.md or of a daily ledger: MEMORY.md#L12,
    memory/2026-11-30.md#L3 (or MEMORY.md:12). Each step prints its citation, its text, its
    origin (user, model, tool, ingest, person, client, unknown) and how it came to be.
    """
    import dataclasses
    import json

    from memdir.provenance._why import render
    from memdir.provenance._why import why as chain_of

    chain = chain_of(state.workspace(), citation)
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(chain), ensure_ascii=False, indent=1))
    else:
        click.echo(render(chain))
