"""``memdir export``, ``memdir import`` and ``memdir db upgrade``: moving memory between stores."""

from __future__ import annotations

from pathlib import Path

import click

from memdir.cli._common import EXIT_HELP, CliState, echo_json, info, pass_state, plural

__all__ = ["db_group", "export_cmd", "import_cmd"]

_ALL_HELP = "The workspace root and every namespace (as ns/NAME/ in the directory)."


@click.command("export", epilog=EXIT_HELP)
@click.option(
    "--to",
    "directory",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="An empty (or new) directory to write the workspace into.",
)
@click.option("--all-namespaces", is_flag=True, help=_ALL_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report on stdout.")
@pass_state
def export_cmd(state: CliState, directory: Path, all_namespaces: bool, as_json: bool) -> None:
    """Write the workspace's files (from any store) into a plain directory.

    The copy can be read, grepped and backed up, opened as a workspace with -w, and loaded
    back with memdir import. The search index is not copied: it is rebuilt from the files.
    """
    from memdir.store.transfer import export_workspace

    if all_namespaces and state.namespace:
        raise click.UsageError("--all-namespaces and --namespace exclude each other")
    report = export_workspace(
        state.workspace(create=False), directory, all_namespaces=all_namespaces
    )
    if as_json:
        echo_json({"files": report.files, "bytes": report.bytes, "namespaces": report.namespaces})
        return
    info(f"exported {plural(report.files, 'file')} ({report.bytes:,} bytes) to {directory}")


@click.command("import", epilog=EXIT_HELP)
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--all-namespaces", is_flag=True, help=_ALL_HELP)
@click.option(
    "--replace",
    is_flag=True,
    help="Overwrite files that hold something else (default: keep them, and say which).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report on stdout.")
@pass_state
def import_cmd(
    state: CliState, directory: Path, all_namespaces: bool, replace: bool, as_json: bool
) -> None:
    """Load a plain workspace directory (such as an export) into this workspace, on any store.

    A file that already holds the same bytes is skipped; one that holds something else is
    kept and reported (exit code 1) unless --replace. Searches re-index what was loaded.
    """
    from memdir.store.transfer import import_workspace

    if all_namespaces and state.namespace:
        raise click.UsageError("--all-namespaces and --namespace exclude each other")
    report = import_workspace(
        directory, state.workspace(), all_namespaces=all_namespaces, replace=replace
    )
    if as_json:
        echo_json(
            {
                "files": report.files,
                "unchanged": report.unchanged,
                "conflicts": report.conflicts,
                "bytes": report.bytes,
                "namespaces": report.namespaces,
            }
        )
    else:
        for rel in report.conflicts:
            click.echo(f"kept (holds something else; --replace overwrites): {rel}", err=True)
        info(
            f"imported {plural(report.files, 'file')} ({report.bytes:,} bytes); "
            f"{report.unchanged} unchanged, {plural(len(report.conflicts), 'conflict')}"
        )
    if report.conflicts:
        raise click.exceptions.Exit(1)


@click.group("db", epilog=EXIT_HELP)
def db_group() -> None:
    """The database of a PostgreSQL workspace (-w postgresql://...)."""


@db_group.command("upgrade", epilog=EXIT_HELP)
@pass_state
def db_upgrade_cmd(state: CliState) -> None:
    """Create memdir's tables, or bring them to this version's schema (safe to run any time,
    from several hosts at once)."""
    from memdir.store.postgres import PostgresStore, schema_version

    ws = state.workspace(create=False, must_exist=False)
    if not isinstance(ws.store, PostgresStore):
        raise click.UsageError("db upgrade needs a PostgreSQL workspace: -w postgresql://...")
    ws.store.init()
    click.echo(f"schema {ws.store.db.schema} at version {schema_version()} ({ws.describe()})")
