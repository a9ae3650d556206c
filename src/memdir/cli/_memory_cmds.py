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
    """Append TEXT as a bullet to today's ledger (``-`` reads stdin; one bullet per line)."""
    from memdir.ledger import append_bullets

    raw = sys.stdin.read() if text == "-" else text
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    if not lines:
        raise MemdirError("nothing to add: the text is blank")
    ws = state.workspace()
    rel, first, last = append_bullets(ws, lines, header="Memory Add")
    click.echo(f"{rel}#L{first}-L{last}")


COMMANDS: list[click.Command] = [init, add]
