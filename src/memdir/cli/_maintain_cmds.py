"""``memdir maintain``, ``memdir consolidate`` and ``memdir memory history``."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import click

from memdir.cli._common import (
    EXIT_HELP,
    CliState,
    ParsedType,
    base_url_option,
    echo_json,
    info,
    pass_state,
    plural,
    progress_bar,
)
from memdir.errors import ConfigError
from memdir.store.workspace import Workspace

_JSON_HELP = "Print JSON on stdout instead of text."
_MODEL_HELP = (
    "Model for consolidation: 'extractive' (offline) or provider:model such as "
    "'openai:gpt-4o-mini' [env MEMDIR_MODEL; default extractive]."
)
_model_option = click.option(
    "--model", "model_spec", envvar="MEMDIR_MODEL", default="extractive", help=_MODEL_HELP
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_duration(text: str, *, allow_zero: bool = False) -> timedelta:
    """``"6h"``, ``"30m"``, ``"1h30m"``, ``"90s"``, ``"1d"`` → :class:`timedelta` (with
    ``allow_zero``, ``"0"`` too)."""
    raw = text.strip().lower()
    if allow_zero and raw == "0":
        return timedelta(0)
    parts = _DURATION.findall(raw)
    if not parts or _DURATION.sub("", raw).strip():
        raise ConfigError(f"cannot read the duration {text!r}: write e.g. 6h, 30m, 1h30m or 1d")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0 and not allow_zero:
        raise ConfigError(f"the duration {text!r} must be positive")
    return timedelta(seconds=seconds)


def retention_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--retention-days`` and ``--session-retention-days`` (``memdir maintain``, ``memdir
    serve``)."""
    days = click.option(
        "--retention-days",
        type=click.IntRange(min=1),
        default=90,
        show_default=True,
        help="Archive ledgers older.",
    )
    sessions = click.option(
        "--session-retention-days",
        type=click.IntRange(min=1),
        default=180,
        show_default=True,
        help="Delete session logs older.",
    )
    return days(sessions(command))


# MemoryConsolidator's floor: a smaller MEMORY.md cannot hold even a few facts.
_MIN_MEMORY_TOKENS = 50


def _consolidator(
    state: CliState,
    model_spec: str,
    max_tokens: int,
    base_url: str | None = None,
    workspace: Workspace | None = None,
) -> Any:
    from memdir.cli._ingest_cmd import build_model
    from memdir.memory import MemoryConsolidator

    return MemoryConsolidator(
        workspace or state.workspace(create=False),
        build_model(model_spec, base_url),
        max_memory_tokens=max_tokens,
    )


@contextmanager
def _showing_batches(consolidator: Any, *, as_json: bool, label: str) -> Iterator[None]:
    """A progress bar of the consolidation batches, on a terminal and without --json only.

    A long backlog takes one model call per batch; without it the command looks stuck.
    """
    with progress_bar(label, enabled=sys.stderr.isatty() and not as_json) as bar:
        if bar is None:
            yield
            return

        def batches(done: int, total: int) -> None:
            bar(done, total, f"consolidating MEMORY.md: batch {min(done + 1, total)} of {total}")

        consolidator.progress = batches
        try:
            yield
        finally:
            consolidator.progress = None


def _result_dict(result: Any) -> dict[str, Any]:
    data = asdict(result)
    data["changed"] = [list(pair) for pair in result.changed]
    data["applied"] = result.applied
    return data


def _print_diff(added: Any, changed: Any, removed: Any, trimmed: Any = ()) -> None:
    for text in added:
        click.echo(f"  + {text}")
    for old, new in changed:
        click.echo(f"  ~ {old}\n    → {new}")
    for text in removed:
        click.echo(f"  - {text}")
    for text in trimmed:
        click.echo(f"  ✂ {text}")


def _print_consolidation(result: Any) -> None:
    if result.skipped and not result.batches:
        click.echo(f"consolidation: nothing applied ({result.skipped})")
        return
    verb = "would change" if result.dry_run else "changed"
    click.echo(
        f"consolidation: {verb} MEMORY.md: +{len(result.added)} ~{len(result.changed)} "
        f"-{len(result.removed)} (trimmed {len(result.trimmed)}); "
        f"{result.before_chars} → {result.after_chars} of {result.max_chars} chars; "
        f"{plural(result.entries, 'ledger entry', 'ledger entries')} from "
        f"{plural(len(result.files), 'file')}"
    )
    _print_diff(result.added, result.changed, result.removed)
    if result.skipped:
        click.echo(f"stopped early: {result.skipped}")


@click.command("consolidate", epilog=EXIT_HELP)
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@_model_option
@base_url_option
@click.option(
    "--max-tokens",
    type=click.IntRange(min=_MIN_MEMORY_TOKENS),
    default=4000,
    show_default=True,
    help="MEMORY.md budget in tokens.",
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@pass_state
def consolidate_cmd(
    state: CliState,
    dry_run: bool,
    model_spec: str,
    base_url: str | None,
    max_tokens: int,
    as_json: bool,
) -> None:
    """Merge new ledger entries into MEMORY.md now (the previous file goes to memory/.history/).

    A long backlog is sent to the model in batches; a progress bar shows them on a terminal.
    """
    consolidator = _consolidator(state, model_spec, max_tokens, base_url)
    with _showing_batches(consolidator, as_json=as_json, label="consolidating"):
        result = asyncio.run(consolidator.consolidate(dry_run=dry_run))
    if as_json:
        echo_json(_result_dict(result))
    else:
        _print_consolidation(result)


def _print_report(report: Any) -> None:
    moved = "would be moved" if report.dry_run else "moved"
    if report.skipped:
        click.echo(f"maintenance: skipped ({report.skipped}: another process is running it)")
        return
    click.echo(f"archived: {plural(len(report.archived), 'ledger')} {moved} to memory/archive/")
    for name in report.archived:
        click.echo(f"  {name}")
    if report.consolidation is not None:
        _print_consolidation(report.consolidation)
    deleted = (
        len(report.sessions_deleted),
        len(report.tool_results_deleted),
        len(report.cursors_deleted),
    )
    verb = "would be deleted" if report.dry_run else "deleted"
    click.echo(
        f"pruned: {deleted[0]} session log(s), {deleted[1]} tool result(s), "
        f"{deleted[2]} flush cursor(s) {verb}"
    )
    if report.index is not None:
        click.echo(
            f"index: {report.index.files_indexed} file(s) indexed, "
            f"{report.index.files_removed} removed"
        )
    if report.vectors is not None:
        click.echo(
            f"vectors: {plural(report.vectors.embedded, 'line')} embedded, "
            f"{report.vectors.pending} pending"
        )
    for error in report.errors:
        info(f"error: {error}")


@click.command("maintain", epilog=EXIT_HELP)
@click.option("--once", is_flag=True, help="Run one pass and exit (the default).")
@click.option(
    "--every",
    type=ParsedType("duration", parse_duration),
    metavar="DURATION",
    help="Run a pass every DURATION (6h, 30m…) until ^C.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be done; change nothing.")
@click.option(
    "--all-namespaces",
    is_flag=True,
    help="Maintain the workspace root and every namespace under ns/, one after another.",
)
@_model_option
@base_url_option
@retention_options
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@pass_state
def maintain_cmd(
    state: CliState,
    once: bool,
    every: timedelta | None,
    dry_run: bool,
    all_namespaces: bool,
    model_spec: str,
    base_url: str | None,
    retention_days: int,
    session_retention_days: int,
    as_json: bool,
) -> None:
    """Archive old ledgers, consolidate MEMORY.md, prune old session files, reindex.

    With --all-namespaces, each namespace of the workspace in turn (a failure in one does not
    stop the others). Exit code 1 if any step failed (the other steps still ran).
    """
    from memdir.memory import MaintenanceConfig, MemoryMaintenanceScheduler

    if once and every:
        raise click.UsageError("--once and --every exclude each other")
    if all_namespaces and state.namespace:
        raise click.UsageError("--all-namespaces and --namespace exclude each other")
    if all_namespaces:
        state.refuse_remote("--all-namespaces")
    config = MaintenanceConfig(
        daily_file_retention_days=retention_days, session_retention_days=session_retention_days
    )
    failed = False
    while True:
        targets = [state.workspace(create=False)]
        if all_namespaces:
            root = targets[0]
            targets += [root.namespaced(name, create=False) for name in root.namespaces()]
        for ws in targets:
            consolidator = _consolidator(
                state, model_spec, config.max_memory_tokens, base_url, workspace=ws
            )
            scheduler = MemoryMaintenanceScheduler(ws, consolidator, config=config)
            with _showing_batches(consolidator, as_json=as_json, label="maintenance"):
                report = scheduler.run_once(dry_run=dry_run)
            failed = failed or bool(report.errors)
            if as_json:
                data = asdict(report)
                data["namespace"] = ws.namespace
                if report.consolidation is not None:
                    data["consolidation"] = _result_dict(report.consolidation)
                # JSON Lines: one object per pass and namespace, each on a line of its own.
                click.echo(json.dumps(data, ensure_ascii=False, default=str))
            else:
                if all_namespaces:
                    click.echo(f"[{ws.namespace or 'root'}]")
                _print_report(report)
        if every is None:
            break
        info(f"next pass in {every}")
        time.sleep(every.total_seconds())
    if failed:
        raise click.exceptions.Exit(1)


@click.group("memory", epilog=EXIT_HELP)
def memory_group() -> None:
    """Inspect long-term memory."""


@memory_group.command("history", epilog=EXIT_HELP)
@click.option("--limit", "-n", type=click.IntRange(min=1), help="Only the last N runs.")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@pass_state
def history_cmd(state: CliState, limit: int | None, as_json: bool) -> None:
    """What each consolidation, and each replace by a person or a client, changed in
    MEMORY.md, oldest first."""
    from memdir.memory import read_consolidation_log

    records = read_consolidation_log(state.workspace(create=False), limit=limit)
    if as_json:
        echo_json(records)
        return
    if not records:
        info("no consolidation has run in this workspace yet")
        return
    for record in records:
        counts = record.get("counts") or {}
        status = record.get("status", "?")
        reason = f" ({record['reason']})" if record.get("reason") else ""
        summary = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        size = ""
        if "after_chars" in record:
            budget = f"/{record['budget_chars']}" if record.get("budget_chars") else ""
            size = f" {record.get('before_chars')}→{record['after_chars']}{budget} chars"
        # A consolidation names its model; an edit by a person or a client, who made it.
        who = record.get("model") or (f"by {record['by']}" if record.get("by") else "?")
        click.echo(f"{record.get('at', '?')} {status}{reason} [{who}] {summary}{size}")
        _print_diff(
            record.get("added", ()),
            record.get("changed", ()),
            record.get("removed", ()) or record.get("would_remove", ()),
            record.get("trimmed", ()),
        )
