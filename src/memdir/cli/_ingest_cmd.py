"""``memdir ingest``: past agent conversations into the workspace's long-term memory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from memdir.cli._common import (
    EXIT_HELP,
    CliState,
    ProgressUpdate,
    base_url_option,
    context_window_option,
    echo_json,
    err_console,
    pass_state,
    plural,
    progress_bar,
)
from memdir.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from memdir.ingest import IngestProgress, IngestReport
    from memdir.models import ChatModel

__all__ = ["build_model", "ingest_cmd", "model_option", "print_report"]

MODEL_HELP = (
    'Model for summaries, fact extraction and MEMORY.md: "extractive" (offline, no API key), '
    '"openai:<model>", "anthropic:<model>", "ollama:<model>"... [env MEMDIR_MODEL]'
)


def model_option(
    default: str | None, *, help: str = MODEL_HELP
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The ``--model`` option shared by ``ingest`` and ``chat`` (``help`` says what it does)."""
    return click.option(
        "--model",
        "model_spec",
        envvar="MEMDIR_MODEL",
        default=default,
        show_default=default is not None,
        metavar="SPEC",
        help=help,
    )


def build_model(spec: str, base_url: str | None, *, context_window: int | None = None) -> ChatModel:
    """The model named by ``spec`` (see :func:`memdir.models.model_from_string`).

    ``context_window`` (``--context-window``) overrides what memdir knows of the model's
    window, or gives one to a model it does not know.
    """
    from memdir.models import model_from_string

    options: dict[str, object] = {}
    if context_window is not None:
        options["context_window"] = context_window
    if base_url:
        if spec.strip().lower() == "extractive":
            raise ConfigError(
                "--base-url needs a model served over HTTP: use --model openai:<name> (any "
                "OpenAI-compatible server) or anthropic:<name>"
            )
        options["base_url"] = base_url
    return model_from_string(spec, **options)


def _ingest_progress(update: ProgressUpdate | None) -> Callable[[IngestProgress], None] | None:
    """``update`` fed with ingest events: the file being replayed and its messages done."""
    if update is None:
        return None

    def on_event(event: IngestProgress) -> None:
        name = Path(event.source).name
        update(event.done, event.total, f"[{event.file_number}/{event.files}] {name}")

    return on_event


@click.command("ingest", epilog=EXIT_HELP)
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@model_option("extractive")
@base_url_option
@context_window_option
@click.option(
    "--session-id",
    metavar="ID",
    help="Session id for the transcripts [default: each file's own]; -2, -3... when taken.",
)
@click.option(
    "--trigger-messages",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Compact the replayed conversation at this many messages (0: off).",
)
@click.option(
    "--keep-messages",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Newest messages a compaction keeps verbatim.",
)
@click.option("--no-consolidate", is_flag=True, help="Do not merge new facts into MEMORY.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@pass_state
def ingest_cmd(
    state: CliState,
    files: tuple[Path, ...],
    model_spec: str,
    base_url: str | None,
    context_window: int | None,
    session_id: str | None,
    trigger_messages: int,
    keep_messages: int,
    no_consolidate: bool,
    as_json: bool,
) -> None:
    """Turn past agent conversations (FILES) into searchable long-term memory.

    Each file is replayed as its own session, as the agent would have lived it: huge tool
    results are evicted to large_tool_results/, the conversation is compacted when it passes
    the triggers (facts flushed to memory/YYYY-MM-DD.md, originals offloaded to
    sessions/<id>.log.jsonl, summary), the rest is flushed, new facts are merged into
    MEMORY.md and everything is indexed. Secrets are masked first.

    FILES are memdir session logs, OpenAI or Anthropic message lists (JSON), or Claude Code
    sessions (~/.claude/projects/<project>/*.jsonl); a directory stands for its *.json and
    *.jsonl files. Facts go to the ledger of the day they were said when the file has times
    (memdir, Claude Code), else to today's. Ingesting a file again writes nothing new.

    Exit code 1 if any file could not be ingested (the others are ingested all the same).
    """
    from memdir.compaction import CompactionConfig
    from memdir.ingest import ingest_sync

    if trigger_messages and keep_messages >= trigger_messages:
        raise click.UsageError("--keep-messages must be smaller than --trigger-messages")
    model = build_model(model_spec, base_url, context_window=context_window)
    ws = state.workspace()
    config = CompactionConfig(trigger_messages=trigger_messages, keep_messages=keep_messages)
    with progress_bar("ingesting", enabled=sys.stderr.isatty() and not as_json) as bar:
        report = ingest_sync(
            files,
            workspace=ws,
            model=model,
            compaction=config,
            session_id=session_id,
            consolidate=not no_consolidate,
            progress=_ingest_progress(bar),
        )
    if as_json:
        echo_json(report.to_dict())
        for line in _error_lines(report):
            err_console.print(line, markup=False)
    else:
        print_report(report)
    if report.failures:
        raise SystemExit(1)


def _error_lines(report: IngestReport) -> list[str]:
    """One ``Error: FILE: why`` line per file that could not be ingested."""
    lines = []
    for failure in report.failures:
        # Most errors already name their file; print it once.
        reason = failure.error.removeprefix(f"{failure.source}: ")
        line = reason if failure.source in reason else f"{failure.source}: {reason}"
        lines.append(f"Error: {line}")
    return lines


def print_report(report: IngestReport, *, console: Console | None = None) -> None:
    """The summary table, the errors, then the totals and the MEMORY.md line.

    On stderr unless ``console`` says otherwise.
    """
    from rich.console import Console
    from rich.table import Table

    out = console or err_console

    if report.sessions:
        table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
        table.add_column("file", overflow="fold")
        table.add_column("session", overflow="fold")
        for column in ("messages", "compactions", "facts", "evicted"):
            table.add_column(column, justify="right")
        table.add_column("")
        for s in report.sessions:
            table.add_row(
                Path(s.source).name,
                s.session_id,
                str(s.messages),
                str(s.compactions),
                str(len(s.bullets)),
                str(s.evicted),
                "ingested before" if s.already_ingested else "",
            )
        # Piped or captured output is not cut at 80 columns: a file name is worth a long line.
        wide = out if out.is_terminal else Console(file=out.file, width=1_000, highlight=False)
        wide.print(table)
        written: dict[str, int] = {}
        for s in report.sessions:
            for rel in s.ledgers:
                written[rel] = written.get(rel, 0) + 1
            for warning in s.warnings:
                out.print(f"Warning: {Path(s.source).name}: {warning}", markup=False)
        if written:
            out.print("facts written to " + ", ".join(sorted(written)), markup=False)
    for line in _error_lines(report):  # before the totals, which end the report
        out.print(line, markup=False)
    cons = report.consolidation
    if cons is None:
        why = "--no-consolidate" if report.sessions else "nothing was ingested"
        merged = f"not consolidated ({why})"
    elif cons.applied:
        entries = plural(cons.entries, "new ledger entry", "new ledger entries")
        if cons.added or cons.changed or cons.removed:
            merged = (
                f"{len(cons.added)} added, {len(cons.changed)} changed, {len(cons.removed)} "
                f"removed, from {entries}"
            )
        else:
            merged = f"unchanged ({entries}, all already in it)"
    else:
        merged = f"unchanged ({(cons.skipped or 'nothing new').replace('_', ' ')})"
    failed = f", {len(report.failures)} failed" if report.failures else ""
    out.print(
        f"{plural(len(report.sessions), 'file')} ingested{failed}, "
        f"{plural(report.messages, 'message')}, "
        f"{plural(report.compactions, 'compaction')}, {plural(report.bullets, 'fact')} written, "
        f"{plural(report.evicted, 'tool result')} evicted",
        markup=False,
    )
    out.print(
        f"MEMORY.md: {report.memory_chars:,} chars, {report.memory_lines} lines; {merged}",
        markup=False,
    )
