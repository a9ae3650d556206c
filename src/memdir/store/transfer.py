"""Export and import: any workspace, on any store, as a plain directory a person can read.

:func:`export_workspace` writes a workspace's files (one namespace, or the root and every
namespace under ``ns/``) into a directory with the layout of a file workspace; the copy can be
read, grepped, diffed and backed up, and opened as a workspace itself. :func:`import_workspace`
loads such a directory into any workspace, PostgreSQL included. The index (``.index/``) is
derived and never copied: it is rebuilt from the files; nor is the server's ``.memdir-server/``
(its keys). A round trip is exact, byte for byte.

An import never overwrites a file that holds something else unless asked to (``replace``):
the file is reported as a conflict and left as it was.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from memdir.errors import ConfigError, WorkspaceError
from memdir.store.namespaces import NAMESPACES_DIR, validate_namespace
from memdir.store.workspace import INDEX_DIR, SERVER_DIR, Workspace

__all__ = [
    "TransferReport",
    "export_sources",
    "export_workspace",
    "import_workspace",
    "workspace_files",
]


@dataclass(slots=True, kw_only=True)
class TransferReport:
    """What an export or import did.

    Attributes:
        files: files written.
        unchanged: files that already held the same bytes.
        conflicts: files that hold something else and were left as they were (import).
        bytes: bytes written.
        namespaces: the namespaces transferred (``None`` for the root).
    """

    files: int = 0
    unchanged: int = 0
    conflicts: list[str] = field(default_factory=list)
    bytes: int = 0
    namespaces: list[str | None] = field(default_factory=list)


_SKIPPED = (INDEX_DIR, NAMESPACES_DIR, SERVER_DIR)


def workspace_files(ws: Workspace, *, leave_out: tuple[str, ...] = ()) -> list[str]:
    """Every file of ``ws`` an export holds, sorted: not the derived index (``.index/``), not
    other namespaces (``ns/``), not the server's keys (``.memdir-server/``), nor what is in
    the directories ``leave_out``."""
    found: list[str] = []
    for entry in ws.listdir(""):
        if entry.name in _SKIPPED:
            continue
        if entry.kind == "dir":
            found.extend(rel for rel, _ in ws.walk(entry.name))
        else:
            found.append(entry.name)
    return sorted(r for r in found if not any(r.startswith(d.rstrip("/") + "/") for d in leave_out))


def export_sources(ws: Workspace, *, all_namespaces: bool = False) -> list[tuple[Workspace, str]]:
    """What an export of ``ws`` holds: each workspace and the prefix of its files in the export
    (``""`` for ``ws`` itself, or for the root; ``"ns/<name>/"`` for a namespace)."""
    if not all_namespaces:
        return [(ws, "")]
    root = ws.namespaced(None, create=False)
    spaces = [root.namespaced(n, create=False) for n in root.namespaces()]
    return [(root, ""), *((s, f"{NAMESPACES_DIR}/{s.namespace}/") for s in spaces)]


def export_workspace(
    ws: Workspace, directory: str | os.PathLike[str], *, all_namespaces: bool = False
) -> TransferReport:
    """Write the files of ``ws`` (or, with ``all_namespaces``, of its root and every namespace)
    into ``directory`` as a plain workspace.

    Raises:
        WorkspaceError: ``directory`` holds files already, or cannot be written.
    """
    out = Path(directory).expanduser().absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WorkspaceError(f"cannot export into {out}: it exists and is not an empty directory")
    report = TransferReport()
    for source, prefix in export_sources(ws, all_namespaces=all_namespaces):
        base = Workspace(out)
        dest = base.namespaced(source.namespace) if prefix else base
        report.namespaces.append(source.namespace)
        for rel in workspace_files(source):
            data = source.read_bytes(rel)
            dest.write_bytes(rel, data)
            report.files += 1
            report.bytes += len(data)
    return report


def import_workspace(
    directory: str | os.PathLike[str],
    ws: Workspace,
    *,
    all_namespaces: bool = False,
    replace: bool = False,
) -> TransferReport:
    """Load a plain workspace directory (such as an export) into ``ws``.

    With ``all_namespaces`` the directory's root goes to the root of ``ws`` and each
    ``ns/<name>/`` to that namespace; otherwise the directory's root files go to ``ws`` as it
    is (its namespace, if it has one).

    Raises:
        WorkspaceError: ``directory`` is not a directory.
        ConfigError: a namespace directory has an invalid name.
    """
    src_root = Path(directory).expanduser().absolute()
    if not src_root.is_dir():
        raise WorkspaceError(f"cannot import {src_root}: not a directory")
    sources: list[tuple[Workspace, Workspace]] = [
        (Workspace(src_root, create=False), ws if not all_namespaces else ws.namespaced(None))
    ]
    if all_namespaces:
        for name in Workspace(src_root, create=False).namespaces():
            validate_namespace(name)
            sources.append((Workspace(src_root, create=False, namespace=name), ws.namespaced(name)))
    elif (src_root / NAMESPACES_DIR).is_dir():
        raise ConfigError(
            f"{src_root} holds namespaces (ns/): pass all_namespaces=True (--all-namespaces) "
            "to import them, or import one namespace's own directory"
        )
    report = TransferReport()
    for source, dest in sources:
        report.namespaces.append(dest.namespace)
        for rel in workspace_files(source):
            data = source.read_bytes(rel)
            current = dest.read_versioned(rel)
            if current is not None and current.data == data:
                report.unchanged += 1
                continue
            if current is not None and not replace:
                shown = f"{dest.namespace}:{rel}" if dest.namespace else rel
                report.conflicts.append(shown)
                continue
            dest.write_bytes(rel, data)
            report.files += 1
            report.bytes += len(data)
    return report
