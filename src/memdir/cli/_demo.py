"""``memdir demo``: a sample workspace, indexed and searched, offline and without an API key.

The demo is a list of steps (:data:`DEMO_STEPS`); each gets the :class:`DemoContext` and
prints what it does. Add a step by appending a function.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.rule import Rule

from memdir.cli._common import out_console
from memdir.errors import MemdirError, WorkspaceError
from memdir.workspace import Workspace

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_CITATION = re.compile(r"^(?P<path>[^\s#]+)#L(?P<start>\d+)-L(?P<end>\d+)", re.MULTILINE)

DEMO_SEARCHES: tuple[str, ...] = (
    "database migration decision",
    "数据库迁移",
    "PostgreSQL 回滚",
    "Priya storefront API",
)
"""Queries the demo runs: English, Chinese and mixed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoContext:
    """What every demo step works with."""

    ws: Workspace
    console: Console


DemoStep = Callable[[DemoContext], None]


def sample_workspace_dir() -> Path:
    """The bundled sample workspace: in the wheel, or ``examples/`` of a source checkout."""
    for candidate in (
        _PACKAGE_DIR / "_examples" / "workspace",
        _PACKAGE_DIR.parent.parent / "examples" / "workspace",
    ):
        if (candidate / "MEMORY.md").is_file():
            return candidate
    raise MemdirError("the sample workspace is missing from this installation; reinstall memdir")


def create_demo_workspace(directory: Path | None) -> Workspace:
    """Copy the sample into ``directory`` (new or empty) or into a fresh temporary directory."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="memdir-demo-")) / "workspace"
    elif directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise WorkspaceError(f"{directory} is not empty; give a new or empty directory to --dir")
    try:
        shutil.copytree(sample_workspace_dir(), directory, dirs_exist_ok=True)
    except OSError as exc:
        raise WorkspaceError(f"cannot create the demo workspace in {directory}: {exc}") from exc
    return Workspace(directory)


def _title(ctx: DemoContext, text: str) -> None:
    ctx.console.print()
    ctx.console.print(Rule(text, align="left", style="cyan"))


def step_index(ctx: DemoContext) -> None:
    """Index the sample workspace."""
    from memdir.index import MemoryIndex

    _title(ctx, "1. Index the memory files (SQLite FTS5)")
    with MemoryIndex(ctx.ws) as index:
        stats = index.index_all_from_workspace()
    ctx.console.print(
        f"{stats.files_indexed} files, {stats.lines_indexed} lines indexed "
        f"in {stats.seconds:.2f} s  →  {ctx.ws.index_dir / 'memory_index.db'}",
        markup=False,
    )


def step_show_memory(ctx: DemoContext) -> None:
    """Show the head of MEMORY.md and the daily ledgers."""
    _title(ctx, "2. MEMORY.md (curated long-term memory), first lines")
    lines = ctx.ws.read_text("MEMORY.md").splitlines()
    for line in lines[:12]:
        ctx.console.print(f"  {line}", markup=False)
    if len(lines) > 12:
        ctx.console.print(f"  … {len(lines) - 12} more lines", style="dim", markup=False)
    _title(ctx, "3. Daily ledgers (append-only notes)")
    for archived in (False, True):
        for day, rel in ctx.ws.ledgers(archived=archived):
            count = sum(1 for x in ctx.ws.read_text(rel).splitlines() if x.startswith("- "))
            note = "  (archived)" if archived else ""
            ctx.console.print(f"  {rel}  {day:%a}  {count} bullets{note}", markup=False)


def step_search(ctx: DemoContext) -> None:
    """Run the demo searches through the same tool an agent calls, then follow one citation."""
    from memdir.tools import memory_get, memory_search

    _title(ctx, "4. memory_search: what the model sees (English, Chinese, mixed)")
    first: re.Match[str] | None = None
    for query in DEMO_SEARCHES:
        ctx.console.print(f'\n>>> memory_search("{query}", max_results=3)', style="bold")
        result = memory_search(query, 3, workspace=ctx.ws)
        ctx.console.print(result, markup=False)
        first = first or _CITATION.search(result)
    if first:
        path, start = first["path"], max(1, int(first["start"]) - 2)
        ctx.console.print(
            f'\n>>> memory_get("{path}", start_line={start}, num_lines=5)', style="bold"
        )
        ctx.console.print(memory_get(path, start, 5, workspace=ctx.ws), markup=False)


def step_next(ctx: DemoContext) -> None:
    """Say what to try next."""
    _title(ctx, "Try it yourself")
    root = str(ctx.ws.root)
    for command in (
        f"memdir -w {root} search 'Wang Lei 备份'",
        f"memdir -w {root} get MEMORY.md:1-10",
        f"memdir -w {root} add 'Jing prefers tabs over spaces'",
        f"memdir -w {root} mcp    # MCP server for Claude, Cursor (pip install 'memdir[mcp]')",
    ):
        ctx.console.print(f"  {command}", markup=False)


DEMO_STEPS: list[DemoStep] = [step_index, step_show_memory, step_search, step_next]
"""The demo, in order."""


@click.command("demo")
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    help="Create the demo workspace here (new or empty directory) instead of a temp dir.",
)
def demo(directory: Path | None) -> None:
    """Copy a sample bilingual workspace, index it and search it (offline, no API key).

    The global --workspace is not used: the demo never touches an existing workspace.
    """
    ws = create_demo_workspace(directory)
    console = out_console
    console.print(f"Demo workspace: {ws.root}", style="bold green", markup=False)
    ctx = DemoContext(ws=ws, console=console)
    for step in DEMO_STEPS:
        step(ctx)


COMMANDS: list[click.Command] = [demo]
