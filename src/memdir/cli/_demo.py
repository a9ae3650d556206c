"""``memdir demo``: a sample workspace, three past conversations ingested into it, searched;
offline and without an API key.

The demo is a list of steps (:data:`DEMO_STEPS`); each gets the :class:`DemoContext` and
prints what it does. Add a step by appending a function.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.rule import Rule

from memdir.cli._common import EXIT_HELP, out_console
from memdir.compaction import CompactionConfig
from memdir.errors import MemdirError, WorkspaceError
from memdir.eviction import ToolResultEvictionConfig
from memdir.messages import SUMMARY_NAME
from memdir.store.workspace import Workspace

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_CITATION = re.compile(r"^(?P<path>[^\s#]+)#L(?P<start>\d+)-L(?P<end>\d+)", re.MULTILINE)

DEMO_SEARCHES: tuple[str, ...] = (
    "database migration decision",
    "数据库迁移",
    "PostgreSQL 回滚",
    "优惠券 coupon",
)
"""Queries the demo runs: English, Chinese and mixed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoContext:
    """What every demo step works with.

    Attributes:
        ws: the demo workspace.
        console: where the demo prints.
        results: what a step leaves for later steps (e.g. ``"ingest"``: the ingest report).
    """

    ws: Workspace
    console: Console
    results: dict[str, Any] = field(default_factory=dict)


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


def sample_transcripts_dir() -> Path:
    """The bundled sample transcripts: in the wheel, or ``examples/`` of a source checkout."""
    for candidate in (
        _PACKAGE_DIR / "_examples" / "transcripts",
        _PACKAGE_DIR.parent.parent / "examples" / "transcripts",
    ):
        if any(candidate.glob("*.json*")):
            return candidate
    raise MemdirError("the sample transcripts are missing from this installation; reinstall memdir")


def create_demo_workspace(directory: Path | None) -> Workspace:
    """Copy the sample into ``directory`` (new or empty) or into a fresh temporary directory."""
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="memdir-demo-")) / "workspace"
    elif directory.exists() and not directory.is_dir():
        raise WorkspaceError(f"{directory} is a file, not a directory; give a new or empty one")
    elif directory.exists() and any(directory.iterdir()):
        raise WorkspaceError(f"{directory} is not empty; give a new or empty directory to --dir")
    try:
        shutil.copytree(sample_workspace_dir(), directory, dirs_exist_ok=True)
    except OSError as exc:
        raise WorkspaceError(f"cannot create the demo workspace in {directory}: {exc}") from exc
    # The sample ships its consolidation watermark (memory/.consolidation_state), so only
    # what is added to its ledgers later is merged into MEMORY.md.
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

    _title(ctx, "6. memory_search: what the model sees (English, Chinese, mixed)")
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


def step_ingest(ctx: DemoContext) -> None:
    """Ingest the bundled transcripts with small limits, and show the report."""
    from memdir.cli._ingest_cmd import print_report
    from memdir.ingest import ingest_sync

    _title(ctx, "4. memdir ingest: three past agent conversations become memory")
    files = sorted(p for p in sample_transcripts_dir().iterdir() if p.suffix in {".json", ".jsonl"})
    for path in files:
        ctx.console.print(f"  {path.name}", markup=False)
    ctx.console.print(
        "Replayed with the extractive model (no LLM) and small limits, so that these short "
        f"samples show compaction and eviction: compact at {DEMO_COMPACTION.trigger_messages} "
        f"messages keeping {DEMO_COMPACTION.keep_messages}, evict tool results over "
        f"{DEMO_EVICTION.max_result_chars:,} characters (defaults: 50, 20, 80,000).\n",
        style="dim",
        markup=False,
    )
    report = ingest_sync(
        files, workspace=ctx.ws, compaction=DEMO_COMPACTION, tool_result_eviction=DEMO_EVICTION
    )
    ctx.results["ingest"] = report
    print_report(report, console=ctx.console)
    for failure in report.failures:
        ctx.console.print(f"Error: {failure.source}: {failure.error}", markup=False)


def step_show_ingested(ctx: DemoContext) -> None:
    """Show what the ingest wrote: ledgers of the conversations' days, MEMORY.md, logs."""
    from memdir.ingest import IngestReport

    report = ctx.results.get("ingest")
    if not isinstance(report, IngestReport):
        return
    ws, out = ctx.ws, ctx.console
    _title(ctx, "5. What the ingest wrote")
    ledgers = sorted({rel for s in report.sessions for rel in s.ledgers})
    for rel in ledgers:
        sample = sample_workspace_dir() / rel
        skip = len(sample.read_text(encoding="utf-8").splitlines()) if sample.is_file() else 0
        when = "today: transcripts without times" if rel == ws.ledger_rel() else "said that day"
        out.print(f"{rel}  ({when})", style="bold", markup=False)
        for line in ws.read_text(rel).splitlines()[skip:]:
            if line.strip():
                out.print(f"  {line}", markup=False)
    cons = report.consolidation
    if cons is not None and cons.applied:
        kept = f"; previous version kept in {cons.history_path}" if cons.history_path else ""
        out.print(f"\nMEMORY.md: {len(cons.added)} entries added{kept}", style="bold", markup=False)
        for bullet in cons.added:
            out.print(f"  + {bullet}", markup=False)
    _show_logs(ctx, report)


def _show_logs(ctx: DemoContext, report: Any) -> None:
    from memdir.sessions import SessionLog

    out = ctx.console
    out.print("\nSession logs (every message, in order; secrets masked):", style="bold")
    for session in report.sessions:
        log = SessionLog(ctx.ws, session.session_id)
        msgs = log.messages()
        summaries = sum(1 for m in msgs if m.name == SUMMARY_NAME)
        extra = f" + {summaries} folded compaction summaries" if summaries else ""
        out.print(f"  {log.rel_path}  {len(msgs) - summaries} messages{extra}", markup=False)
        for msg in msgs:
            at = msg.text.find("[REDACTED:")
            if at >= 0:
                out.print(f"    …{msg.text[max(0, at - 60) : at + 40]}…", markup=False)
    evicted = sorted(ctx.ws.large_results_dir.rglob("*.txt"))
    if evicted:
        note = "the context keeps a head and tail preview"
        out.print(f"\nEvicted tool results ({note}):", style="bold", markup=False)
        for path in evicted:
            size = len(path.read_text(encoding="utf-8", errors="replace"))
            out.print(f"  {ctx.ws.relpath(path)}  {size:,} characters", markup=False)


def step_next(ctx: DemoContext) -> None:
    """Say what to try next."""
    _title(ctx, "Try it yourself")
    root = str(ctx.ws.root)
    for command in (
        f"memdir -w {root} search 'Wang Lei 备份'",
        f"memdir -w {root} get MEMORY.md:1-10",
        f"memdir -w {root} add 'Jing prefers tabs over spaces'",
        f"memdir -w {root} ingest ~/.claude/projects/<project>/   # your own transcripts",
        f"memdir -w {root} chat --model openai:gpt-4o-mini        # or --model extractive",
        f"memdir -w {root} mcp    # MCP server for Claude, Cursor (pip install 'memdir[mcp]')",
        f"memdir -w {root} ui     # see and correct it in a browser (pip install 'memdir[server]')",
    ):
        ctx.console.print(f"  {command}", markup=False)


DEMO_COMPACTION = CompactionConfig(trigger_messages=8, keep_messages=4)
"""Compaction settings of the demo's ingest (small, for short samples)."""

DEMO_EVICTION = ToolResultEvictionConfig(max_result_chars=8_000, excluded_tool_names=frozenset())
"""Eviction settings of the demo's ingest (small, for short samples)."""

DEMO_STEPS: list[DemoStep] = [
    step_index,
    step_show_memory,
    step_ingest,
    step_show_ingested,
    step_search,
    step_next,
]
"""The demo, in order."""


@click.command("demo", epilog=EXIT_HELP)
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    help="Create the demo workspace here (new or empty directory) instead of a temp dir.",
)
def demo(directory: Path | None) -> None:
    """Copy a sample bilingual workspace, ingest three agent transcripts into it, search it.

    Offline, no API key, a few seconds.

    The global --workspace is not used: the demo never touches an existing workspace.
    """
    ws = create_demo_workspace(directory)
    console = out_console
    console.print(f"Demo workspace: {ws.root}", style="bold green", markup=False)
    ctx = DemoContext(ws=ws, console=console)
    for step in DEMO_STEPS:
        step(ctx)
