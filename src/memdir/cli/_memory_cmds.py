"""``memdir init`` and ``memdir add``."""

from __future__ import annotations

import sys

import click

from memdir.cli._common import CliState, info, pass_state
from memdir.errors import MemdirError


@click.command()
@pass_state
def init(state: CliState) -> None:
    """Create the workspace layout (idempotent; never touches existing files)."""
    ws = state.workspace()
    for rel, text in (("MEMORY.md", "# Memory\n"), ("AGENTS.md", "")):
        target = ws.root / rel
        if not target.exists() and text:
            ws.write_text(rel, text)
    click.echo(str(ws.root))
    info(f"workspace ready at {ws.root}")


@click.command()
@click.argument("text")
@pass_state
def add(state: CliState, text: str) -> None:
    """Append TEXT as a bullet to today's ledger ('-' reads stdin; one bullet per line).

    The ledger is re-indexed right away, so 'memdir search' finds the new bullets.
    """
    from memdir._toolcore import add_memory

    raw = sys.stdin.read() if text == "-" else text
    if not raw.strip():
        raise MemdirError("nothing to add: the text is blank")
    result = add_memory(state.workspace(), raw)
    click.echo(result.citation)
    if result.index_error:
        info(f"warning: saved, but the search index was not updated: {result.index_error}")


COMMANDS: list[click.Command] = [init, add]
