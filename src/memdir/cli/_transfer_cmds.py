"""``memdir export``, ``memdir import`` and ``memdir db upgrade``: moving memory between stores."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from memdir.cli._common import EXIT_HELP, CliState, echo_json, info, pass_state, plural
from memdir.errors import WorkspaceError

if TYPE_CHECKING:
    from memdir.store.transfer import TransferReport
    from memdir.store.workspace import Workspace

__all__ = ["db_group", "export_cmd", "import_cmd"]

_ALL_HELP = "The workspace root and every namespace (as ns/NAME/ in the directory)."


@click.command("export", epilog=EXIT_HELP)
@click.option(
    "--to",
    "directory",
    required=True,
    type=click.Path(path_type=Path),
    help="An empty (or new) directory to write the workspace into, or a new .tar.gz file.",
)
@click.option("--all-namespaces", is_flag=True, help=_ALL_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report on stdout.")
@pass_state
def export_cmd(state: CliState, directory: Path, all_namespaces: bool, as_json: bool) -> None:
    """Write the workspace's files (from any store) into a plain directory, or an archive.

    The copy can be read, grepped and backed up, opened as a workspace with -w, and loaded
    back with memdir import. The search index is not copied: it is rebuilt from the files.
    A path ending in .tar.gz (or .tgz) gets the same files as one gzip-compressed tar.
    """
    from memdir.store.archive import is_archive_path
    from memdir.store.transfer import export_workspace

    if all_namespaces and state.namespace:
        raise click.UsageError("--all-namespaces and --namespace exclude each other")
    if all_namespaces:
        state.refuse_remote("--all-namespaces")
    ws = state.workspace(create=False)
    if is_archive_path(directory):
        report = _export_archive(ws, directory, all_namespaces=all_namespaces)
    else:
        report = export_workspace(ws, directory, all_namespaces=all_namespaces)
    if as_json:
        echo_json({"files": report.files, "bytes": report.bytes, "namespaces": report.namespaces})
        return
    info(f"exported {plural(report.files, 'file')} ({report.bytes:,} bytes) to {directory}")


def _export_archive(ws: Workspace, path: Path, *, all_namespaces: bool) -> TransferReport:
    """Write the archive beside ``path`` and rename it there once complete: an export that
    fails leaves no half archive behind."""
    from memdir.store.archive import write_archive

    if path.exists() or path.is_symlink():
        raise WorkspaceError(f"cannot export to {path}: it exists (give a new file name)")
    with tempfile.NamedTemporaryFile(
        dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False
    ) as tmp:
        try:
            report = write_archive(ws, tmp, all_namespaces=all_namespaces)
            tmp.flush()
            os.fsync(tmp.fileno())
        except BaseException:
            Path(tmp.name).unlink()
            raise
    os.replace(tmp.name, path)
    return report


@click.command("import", epilog=EXIT_HELP)
@click.argument("directory", type=click.Path(exists=True, path_type=Path))
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
    """Load a plain workspace directory or a .tar.gz (such as an export) into this workspace,
    on any store.

    A file that already holds the same bytes is skipped; one that holds something else is
    kept and reported (exit code 1) unless --replace. Searches re-index what was loaded. An
    archive is checked whole before anything is loaded (no links, devices or paths out of it).
    """
    from memdir.store.archive import import_archive, is_archive_path
    from memdir.store.transfer import import_workspace

    if all_namespaces and state.namespace:
        raise click.UsageError("--all-namespaces and --namespace exclude each other")
    if all_namespaces:
        state.refuse_remote("--all-namespaces")
    if directory.is_dir():
        report = import_workspace(
            directory, state.workspace(), all_namespaces=all_namespaces, replace=replace
        )
    elif is_archive_path(directory):
        with directory.open("rb") as source:
            report = import_archive(
                source, state.workspace(), all_namespaces=all_namespaces, replace=replace
            )
    else:
        raise click.UsageError(f"{directory} is neither a directory nor a .tar.gz archive")
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
