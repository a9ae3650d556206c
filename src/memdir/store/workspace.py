"""The workspace: one agent's (or one user's) memory, kept as plain files.

::

    <workspace>/
    ├── AGENTS.md                  standing instructions (optional)
    ├── MEMORY.md                  curated long-term memory (rewritten by the consolidator)
    ├── memory/YYYY-MM-DD.md       daily ledgers (append-only)
    ├── memory/archive/            ledgers past retention (still searchable)
    ├── memory/.history/           previous versions of MEMORY.md
    ├── sessions/<id>.log.jsonl    raw messages offloaded before compaction
    ├── large_tool_results/        evicted tool results
    └── .index/memory_index.db     search index (derived, rebuildable)

Every path a caller or a model gives is confined to the workspace. Reads and rewrites walk the
path from the workspace root without letting the kernel follow a symlink
(:mod:`memdir.store._safeopen`): a link is followed only inside the workspace and only within
one part of it (the memory files, ``sessions/``, ``large_tool_results/``, ``.index/``,
everything else), and only regular files are read, so a FIFO cannot block a read and a link
swapped in meanwhile is never followed.
Rewrites are atomic (temp file + fsync + ``os.replace``); appends are one ``write`` under an
``fcntl`` lock, so several processes can share one workspace.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memdir.errors import ConfigError, WorkspaceError
from memdir.store._base import Entry, FileStat, Store, Versioned
from memdir.store._fileio import (
    atomic_write,
    file_lock,
    fsync_dir,
    locked_append,
)
from memdir.store._files import FileStore
from memdir.store._safeopen import (
    Area,
    PathMissing,
    PathRefused,
    below_root,
    locate,
    warn_skipped,
)
from memdir.store._urls import is_postgres_url, is_remote_url, redact_url
from memdir.store.namespaces import NAMESPACES_DIR, list_namespaces, validate_namespace

if TYPE_CHECKING:
    from memdir.client._remote import RemoteMemory

__all__ = [
    "FILE_TOOL_AREA",
    "MEMORY_AREA",
    "WORKSPACE_AREA",
    "Clock",
    "Workspace",
    "area_of",
    "atomic_write",
    "file_lock",
    "fsync_dir",
    "list_namespaces",
    "locked_append",
    "resolve_workspace_root",
]

Clock = Callable[[], datetime]
"""A callable returning the current instant as an aware :class:`datetime`."""

WORKSPACE_ENV = "MEMDIR_WORKSPACE"
TIMEZONE_ENV = "MEMDIR_TZ"
DEFAULT_WORKSPACE = Path(".memdir") / "workspace"

MEMORY_MD = "MEMORY.md"
AGENTS_MD = "AGENTS.md"
MEMORY_DIR = "memory"
ARCHIVE_DIR = "memory/archive"
HISTORY_DIR = "memory/.history"
SESSIONS_DIR = "sessions"
LARGE_RESULTS_DIR = "large_tool_results"
INDEX_DIR = ".index"
SERVER_DIR = ".memdir-server"
"""The server's own files at the base of a workspace (``memdir serve``: its keys), never
exported and never readable by a tool."""

_LEDGER_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")
logger = logging.getLogger("memdir.store.workspace")
_PATH_MAX = 4_095  # what other programs can still open by name (Linux PATH_MAX, minus NUL)

WORKSPACE_AREA = Area(label="the workspace")
"""Every file in the workspace."""
MEMORY_AREA = Area(
    label="the memory files (MEMORY.md and memory/)", only=frozenset({MEMORY_MD, MEMORY_DIR})
)
"""What ``memory_get``, ``memdir get`` and the index read: ``MEMORY.md`` and ``memory/**``."""
FILE_TOOL_AREA = Area(
    label="the files read_file may read (all but .index/, .memdir-server/ and the namespaces "
    "in ns/)",
    never=frozenset({INDEX_DIR, NAMESPACES_DIR, SERVER_DIR}),
)
"""What the agent's ``read_file`` and ``edit_file`` read: the workspace except ``.index/``,
the server's keys in ``.memdir-server/`` (and, at the root of a workspace with namespaces,
``ns/``: other callers' memories)."""
_OWN_AREAS = (
    MEMORY_AREA,
    Area(label="ns/", only=frozenset({NAMESPACES_DIR})),
    Area(label="sessions/", only=frozenset({SESSIONS_DIR})),
    Area(label="large_tool_results/", only=frozenset({LARGE_RESULTS_DIR})),
    Area(label=".index/", only=frozenset({INDEX_DIR})),
    Area(label=".memdir-server/", only=frozenset({SERVER_DIR})),
)
_OTHER_AREA = Area(
    label="the workspace files outside MEMORY.md, memory/, sessions/, large_tool_results/, "
    ".index/ and .memdir-server/",
    never=frozenset(
        {
            MEMORY_MD,
            MEMORY_DIR,
            SESSIONS_DIR,
            LARGE_RESULTS_DIR,
            INDEX_DIR,
            NAMESPACES_DIR,
            SERVER_DIR,
        }
    ),
)


def area_of(rel: str) -> Area:
    """The part of the workspace ``rel`` lies in; a symlink there may only lead within it.

    The parts are the memory files, ``sessions/``, ``large_tool_results/``, ``.index/``, the
    server's ``.memdir-server/`` and everything else (``AGENTS.md``, the user's own files), so
    a link never turns a read of ``AGENTS.md`` or ``memory/x.md`` into a read of a session
    log, or a write to a notes file into a write to a ledger (or to the server's keys).
    """
    for area in _OWN_AREAS:
        if area.holds(rel):
            return area
    return _OTHER_AREA


def _check_namespace_dirs(base: Path, namespace: str) -> None:
    """Refuse a namespace whose directory (or ``ns/``) is a symlink: it could lead into
    another namespace or out of the workspace."""
    for path in (base / NAMESPACES_DIR, base / NAMESPACES_DIR / namespace):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        except OSError as exc:
            raise WorkspaceError(f"cannot open namespace {namespace!r}: {exc.strerror}") from exc
        if not stat.S_ISDIR(mode):
            raise WorkspaceError(
                f"namespace {namespace!r} cannot be opened: {path} is not a directory (a "
                "symlink there could lead into another namespace)"
            )


def _utc_now() -> datetime:
    return datetime.now(UTC)


def workspace_url(root: str | os.PathLike[str] | None) -> str | None:
    """The URL that ``root`` (or, without one, ``$MEMDIR_WORKSPACE``) gives, if any: a
    PostgreSQL database, or a ``memdir serve`` server."""
    chosen: object = root
    if chosen is None or (isinstance(chosen, str) and not chosen.strip()):
        chosen = os.environ.get(WORKSPACE_ENV, "").strip()
    if isinstance(chosen, str) and (
        is_postgres_url(chosen.strip()) or is_remote_url(chosen.strip())
    ):
        return chosen.strip()
    return None


def resolve_workspace_root(root: str | os.PathLike[str] | None = None) -> Path:
    """Return the workspace directory.

    ``root``, else ``$MEMDIR_WORKSPACE``, else ``./.memdir/workspace``.
    Blank values count as unset. The result is absolute; it need not exist yet.
    """
    if root is not None and not isinstance(root, str | os.PathLike):
        raise WorkspaceError(f"workspace path must be a str or a path, not {type(root).__name__}")
    chosen: str | os.PathLike[str] | None = root
    if chosen is None or not str(chosen).strip():
        env = os.environ.get(WORKSPACE_ENV, "").strip()
        chosen = env or DEFAULT_WORKSPACE
    if "\x00" in str(chosen):
        raise WorkspaceError("workspace path contains a NUL byte")
    try:
        return Path(chosen).expanduser().absolute()
    except (TypeError, RuntimeError) as exc:  # bytes paths; "~" without a home directory
        raise WorkspaceError(f"cannot use {chosen!r} as the workspace path: {exc}") from None


def _parse_zone(tz: tzinfo | str | None) -> tzinfo | None:
    if tz is None:
        env = os.environ.get(TIMEZONE_ENV, "").strip()
        if not env:
            return None
        tz = env
    if isinstance(tz, str):
        if tz.upper() in {"UTC", "Z"}:
            return UTC
        try:
            return ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(
                f"unknown time zone {tz!r}: use an IANA name such as 'Europe/Paris' or 'UTC'"
            ) from exc
    if not isinstance(tz, tzinfo):
        raise ConfigError(
            f"time zone must be a tzinfo or an IANA name such as 'UTC', not {type(tz).__name__}"
        )
    return tz


_READ_ONLY_WARNED: set[Path] = set()


def _warn_read_only(root: Path) -> None:
    if root not in _READ_ONLY_WARNED:
        _READ_ONLY_WARNED.add(root)
        logging.getLogger("memdir.store.workspace").warning(
            "workspace %s may not be written: it is read and searched as it is, and writes "
            "to it will fail",
            root,
        )


class Workspace:
    """A memory workspace directory, or one namespace of it.

    Args:
        root: the directory, a PostgreSQL URL (``postgresql://user@host:5432/db``, with
            ``pip install 'memdir[postgres]'``: the files are then rows, shared by any number
            of hosts; see ``docs/scale-out.md``), or the URL of a ``memdir serve`` server
            (``https://host[/base]``, ``http://`` on loopback: the memory is the server's,
            which searches, flushes and consolidates it; see ``docs/client.md``); ``None``
            resolves ``$MEMDIR_WORKSPACE`` then ``./.memdir/workspace``.
        namespace: one isolated memory of the workspace (a user's, a session's, an agent's),
            kept in ``<root>/ns/<namespace>/``; ``None`` (default) is the root itself. See
            :mod:`memdir.store.namespaces` for valid names and :func:`namespace_for`. On a
            server, one of the key's namespaces (``acme.alice``); ``None``: the one the key
            is bound to.
        tz: time zone for daily file names (a :class:`tzinfo` or an IANA name); default
            ``$MEMDIR_TZ`` or the machine's local zone.
        clock: returns the current instant (aware); inject one in tests or replays.
        create: create the directory layout if it is missing.
        api_key: the key of a server workspace (default ``$MEMDIR_API_KEY``, else the file
            named by ``$MEMDIR_API_KEY_FILE``); never shown in ``repr`` or messages.

    Raises:
        WorkspaceError: the root exists but is not a directory, or cannot be created.
        ConfigError: the time zone is unknown; on a server, no key, a bad URL, or no
            namespace the key reaches.
        RemoteError: the server cannot be reached, or refuses the key.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        tz: tzinfo | str | None = None,
        clock: Clock | None = None,
        create: bool = True,
        namespace: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.namespace = validate_namespace(namespace) if namespace is not None else None
        """The namespace, or ``None`` for the root."""
        self.url = workspace_url(root)
        """The URL of a workspace kept in PostgreSQL or on a ``memdir serve`` server, else
        ``None``."""
        self.remote: RemoteMemory | None = None
        """On a server: the namespace's calls that the server runs (search, add, sessions,
        flush, consolidation, maintenance), else ``None``."""
        self._api_key = _Secret(api_key) if api_key is not None else None
        self._base: Path | None = None
        self._root: Path | None = None
        self.store: Store
        """Where the files are kept (see :mod:`memdir.store._base`)."""
        if api_key is not None and not is_remote_url(self.url):
            raise ConfigError("api_key is for a workspace on a memdir server (https://...)")
        if is_remote_url(self.url):
            assert self.url is not None
            from memdir.client._remote import open_remote

            self.remote, self.store = open_remote(self.url, self.namespace, api_key)
            self.namespace = self.remote.name
        elif self.url is not None:
            from memdir.store.postgres import PostgresStore

            self.store = PostgresStore(self.url, self.namespace)
        else:
            self._base = resolve_workspace_root(root)
            self._root = (
                self._base / NAMESPACES_DIR / self.namespace if self.namespace else self._base
            )
            self.store = FileStore(self._root, self._base)
        self.tz = _parse_zone(tz)
        if clock is not None and not callable(clock):
            raise ConfigError(
                f"clock must be a callable returning an aware datetime, not {type(clock).__name__}"
            )
        self._clock: Clock = clock or _utc_now
        if self._root is not None:
            if self.namespace is not None:
                _check_namespace_dirs(self.base, self.namespace)
            if self._root.exists() and not self._root.is_dir():
                raise WorkspaceError(f"workspace {self._root} exists and is not a directory")
        if create:
            self.init()

    @property
    def base(self) -> Path:
        """The workspace directory (the root, whatever the namespace).

        Raises:
            WorkspaceError: the workspace is kept in PostgreSQL or on a server (it has no
                directory).
        """
        if self._base is None:
            raise WorkspaceError(f"{self!r} is kept {self._where()}: it has no directory")
        return self._base

    @property
    def root(self) -> Path:
        """The directory this workspace's files are in: the root, or the namespace's.

        Raises:
            WorkspaceError: the workspace is kept in PostgreSQL or on a server (it has no
                directory).
        """
        if self._root is None:
            raise WorkspaceError(f"{self!r} is kept {self._where()}: it has no directory")
        return self._root

    def _where(self) -> str:
        return "on a memdir server" if self.remote is not None else "in PostgreSQL"

    @property
    def is_local(self) -> bool:
        """Whether the files are in a directory on this machine (else in PostgreSQL or on a
        server)."""
        return self._root is not None

    def exists(self) -> bool:
        """Whether a workspace is here (created by :meth:`init` or by a first write)."""
        return self.store.exists()

    def describe(self) -> str:
        """Where the files are, for messages: a directory, or a database and namespace."""
        return self.store.describe()

    def __repr__(self) -> str:
        where = redact_url(self.url) if self.url is not None else str(self._base)
        if self.namespace is not None:
            return f"Workspace({where!r}, namespace={self.namespace!r})"
        return f"Workspace({where!r})"

    def namespaced(self, namespace: str | None, *, create: bool = True) -> Workspace:
        """The same workspace (root, zone, clock) in ``namespace`` (``None``: the root; on a
        server, the key's own namespace)."""
        return type(self)(
            self.url if self.url is not None else self.base,
            tz=self.tz,
            clock=self._clock,
            create=create,
            namespace=namespace,
            api_key=self._api_key.value if self._api_key is not None else None,
        )

    def with_clock(self, clock: Clock) -> Workspace:
        """The same workspace (and namespace) read and written with another clock."""
        return type(self)(
            self.url if self.url is not None else self.base,
            tz=self.tz,
            clock=clock,
            create=False,
            namespace=self.namespace,
            api_key=self._api_key.value if self._api_key is not None else None,
        )

    def namespaces(self) -> list[str]:
        """The namespaces the workspace holds, sorted."""
        return self.store.namespaces()

    @classmethod
    def coerce(
        cls,
        workspace: Workspace | str | os.PathLike[str] | None,
        namespace: str | None = None,
    ) -> Workspace:
        """Return ``workspace`` itself, or a :class:`Workspace` opened at that path.

        With ``namespace``, the workspace in that namespace (of the same root).
        """
        if not isinstance(workspace, Workspace) and is_remote_url(workspace_url(workspace)):
            return cls(workspace, namespace=namespace)  # a server has no root to open first
        ws = workspace if isinstance(workspace, Workspace) else cls(workspace)
        if namespace is None or namespace == ws.namespace:
            return ws
        return ws.namespaced(namespace)

    # -- layout -------------------------------------------------------------------------

    def init(self) -> None:
        """Create the directory layout (idempotent). Existing files are never touched.

        An existing workspace that may not be written (a read-only copy or mount) stays as it
        is, with a warning: it can be read and searched, and a write fails when it is tried.
        """
        if self._root is None:
            self.store.init()
            return
        existed = self.root.is_dir()
        for rel in (MEMORY_DIR, ARCHIVE_DIR, SESSIONS_DIR, LARGE_RESULTS_DIR, INDEX_DIR):
            try:
                (self.root / rel).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                if existed and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    _warn_read_only(self.root)
                    return
                raise WorkspaceError(
                    f"cannot create workspace at {self.root}: {exc.strerror}"
                ) from exc

    @property
    def memory_md(self) -> Path:
        """Absolute path of ``MEMORY.md``."""
        return self.root / MEMORY_MD

    @property
    def agents_md(self) -> Path:
        """Absolute path of ``AGENTS.md``."""
        return self.root / AGENTS_MD

    @property
    def memory_dir(self) -> Path:
        """Absolute path of ``memory/``."""
        return self.root / MEMORY_DIR

    @property
    def archive_dir(self) -> Path:
        """Absolute path of ``memory/archive/``."""
        return self.root / ARCHIVE_DIR

    @property
    def history_dir(self) -> Path:
        """Absolute path of ``memory/.history/``."""
        return self.root / HISTORY_DIR

    @property
    def sessions_dir(self) -> Path:
        """Absolute path of ``sessions/``."""
        return self.root / SESSIONS_DIR

    @property
    def large_results_dir(self) -> Path:
        """Absolute path of ``large_tool_results/``."""
        return self.root / LARGE_RESULTS_DIR

    @property
    def index_dir(self) -> Path:
        """Absolute path of ``.index/``."""
        return self.root / INDEX_DIR

    # -- time ---------------------------------------------------------------------------

    def _instant(self) -> datetime:
        instant = self._clock()
        if not isinstance(instant, datetime) or instant.tzinfo is None:
            raise ConfigError("the workspace clock must return an aware datetime")
        return instant

    def now(self) -> datetime:
        """The current instant in the workspace's zone (aware)."""
        instant = self._instant()
        return instant.astimezone(self.tz) if self.tz is not None else instant.astimezone()

    def utc_now(self) -> datetime:
        """The current instant in UTC."""
        return self._instant().astimezone(UTC)

    def today(self) -> date:
        """Today's date in the workspace's zone."""
        return self.now().date()

    def zone_name(self) -> str:
        """A readable name for the workspace's zone (``'Asia/Shanghai'``, ``'UTC'``, ``'CET'``)."""
        if isinstance(self.tz, ZoneInfo):
            return self.tz.key
        return self.now().tzname() or "local"

    def ledger_rel(self, day: date | None = None) -> str:
        """Workspace-relative path of the daily ledger for ``day`` (default today)."""
        return f"{MEMORY_DIR}/{(day or self.today()).isoformat()}.md"

    # -- paths --------------------------------------------------------------------------

    def relpath(self, path: str | os.PathLike[str]) -> str:
        """Normalise a caller- or model-given path to a confined, workspace-relative POSIX path.

        Accepts ``memory/x.md``, ``./memory/x.md`` and absolute paths that lie inside the
        workspace. Raises :class:`WorkspaceError` for NUL bytes, empty paths, ``..`` that
        leaves the workspace, absolute paths outside it, and symlinks that lead out of it.
        """
        if not isinstance(path, str | os.PathLike):
            raise WorkspaceError(f"path must be a str or a path, not {type(path).__name__}")
        raw = os.fspath(path)
        if not isinstance(raw, str):
            raise WorkspaceError("path must be text, not bytes")
        if "\x00" in raw:
            raise WorkspaceError("path contains a NUL byte")
        if not raw.strip():
            raise WorkspaceError("path is empty")
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise WorkspaceError("path is not valid UTF-8 text") from exc
        text = raw.strip().replace("\\", "/")
        if text.startswith("/"):
            if self._root is None:
                raise WorkspaceError(
                    f"absolute path {raw!r}: this workspace is kept {self._where()}, give a "
                    "path relative to it"
                )
            inner = below_root(self.root, os.path.normpath(text))
            if inner is None:
                raise WorkspaceError(
                    f"absolute path {raw!r} is outside the workspace; give a path relative to it"
                )
            text = inner
        parts: list[str] = []
        for part in PurePosixPath(text).parts:
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise WorkspaceError(f"path {raw!r} leaves the workspace")
                parts.pop()
                continue
            parts.append(part)
        if not parts:
            raise WorkspaceError(f"path {raw!r} names the workspace itself, not a file in it")
        rel = "/".join(parts)
        if self._root is None:
            if len(rel.encode("utf-8")) > _PATH_MAX:
                raise WorkspaceError(f"path is too long (the limit is {_PATH_MAX:,} bytes)")
            return rel
        size = len(os.fsencode(self.root)) + 1 + len(rel.encode("utf-8"))
        if size > _PATH_MAX:
            raise WorkspaceError(
                f"path is too long ({size:,} bytes with the workspace's own path; the limit "
                f"is {_PATH_MAX:,})"
            )
        try:
            locate(self.root, rel, WORKSPACE_AREA)
        except PathRefused as exc:
            if exc.reason != "outside":
                raise
            raise PathRefused(
                f"path {raw!r} leads outside the workspace through a symlink", reason="outside"
            ) from None
        return rel

    def path(self, rel: str | os.PathLike[str]) -> Path:
        """Absolute path for a confined workspace-relative path (see :meth:`relpath`)."""
        return self.root / self.relpath(rel)

    def memory_files(self) -> list[str]:
        """Workspace-relative paths of every searchable memory file, sorted.

        ``MEMORY.md``, ``memory/*.md`` and ``memory/archive/*.md``; dot-files are skipped, and
        so are symlinks that lead out of the memory files or loop, FIFOs, sockets and devices
        (logged once as a warning): nothing is listed that ``memory_get`` cannot read back.
        """
        found: list[str] = []
        try:
            if self.store.stat(MEMORY_MD, MEMORY_AREA) is not None:
                found.append(MEMORY_MD)
        except WorkspaceError as exc:  # a link out, a loop, a FIFO...
            warn_skipped(logger, self.describe(), exc)
        for rel_dir in (MEMORY_DIR, ARCHIVE_DIR):
            names = self._memory_file_names(rel_dir, lambda name: name.endswith(".md"))
            found.extend(f"{rel_dir}/{name}" for name in names)
        return found

    def _memory_file_names(self, rel_dir: str, wanted: Callable[[str], bool]) -> list[str]:
        """Names of readable memory files in ``rel_dir`` that ``wanted`` accepts, sorted."""
        try:
            entries = self.store.listdir(rel_dir, MEMORY_AREA)
        except WorkspaceError as exc:
            warn_skipped(logger, self.describe(), exc)
            return []
        return [
            e.name
            for e in entries
            if e.kind == "file" and not e.name.startswith(".") and wanted(e.name)
        ]

    def ledgers(self, *, archived: bool = False) -> list[tuple[date, str]]:
        """Daily ledgers as ``(date, rel path)`` sorted by date; ``archived`` lists the archive.

        Like :meth:`memory_files`, only files that can be read back are listed.
        """
        prefix = ARCHIVE_DIR if archived else MEMORY_DIR
        out: list[tuple[date, str]] = []
        for name in self._memory_file_names(prefix, lambda name: bool(_LEDGER_NAME.match(name))):
            match = _LEDGER_NAME.match(name)
            assert match is not None
            try:
                day = date(int(match[1]), int(match[2]), int(match[3]))
            except ValueError:
                continue
            out.append((day, f"{prefix}/{name}"))
        out.sort()
        return out

    # -- I/O ----------------------------------------------------------------------------

    def read_text(self, rel: str | os.PathLike[str], *, missing_ok: bool = True) -> str:
        """Read a workspace file as UTF-8 (undecodable bytes replaced).

        A missing file reads as ``""`` when ``missing_ok``; otherwise it raises. See
        :meth:`read_bytes` for what is refused.
        """
        try:
            data = self.read_bytes(rel)
        except PathMissing:
            if missing_ok:
                return ""
            raise
        return data.decode("utf-8", errors="replace")

    def read_bytes(self, rel: str | os.PathLike[str], *, area: Area | None = None) -> bytes:
        """Read a workspace file's bytes, opened race-free from the workspace root.

        A symlink is followed only to a file in the same part of the workspace (see
        :func:`area_of`); directories, FIFOs, sockets and devices are refused, never opened.

        Raises:
            WorkspaceError: the path is not confined, leads through a symlink out of its
                part of the workspace or loops, is not a regular file, or cannot be read;
                a missing file raises its subclass that is also a ``FileNotFoundError``.
        """
        confined = self.relpath(rel)
        return self.store.read(confined, area or area_of(confined))

    def read_versioned(self, rel: str | os.PathLike[str]) -> Versioned | None:
        """The file's bytes and version, read together (for :meth:`replace_if`); ``None`` if
        it does not exist."""
        confined = self.relpath(rel)
        return self.store.read_versioned(confined, area_of(confined))

    def read_from(self, rel: str | os.PathLike[str], offset: int) -> bytes:
        """The file's bytes from byte ``offset`` on (``b""`` past its end).

        Raises:
            WorkspaceError: as :meth:`read_bytes` (``PathMissing`` for a missing file).
        """
        confined = self.relpath(rel)
        return self.store.read_from(confined, offset, area_of(confined))

    def stat(self, rel: str | os.PathLike[str], *, area: Area | None = None) -> FileStat | None:
        """Size, change time and change tag of a file; ``None`` if it does not exist.

        ``area``: the part of the workspace a symlink may lead to (default: the part ``rel``
        is in). Raises :class:`WorkspaceError` for a path that is not a readable file.
        """
        confined = self.relpath(rel)
        return self.store.stat(confined, area or area_of(confined))

    def listdir(self, rel_dir: str | os.PathLike[str] = "") -> list[Entry]:
        """The files and sub-directories directly in ``rel_dir`` (default: the top), by name."""
        confined = self.relpath(rel_dir) if str(rel_dir).strip(" ./") else ""
        return self.store.listdir(confined, area_of(confined) if confined else WORKSPACE_AREA)

    def walk(self, rel_dir: str) -> Iterator[tuple[str, FileStat]]:
        """Every file under ``rel_dir`` (recursively, dot-names included), with its stat."""
        todo = [rel_dir]
        while todo:
            current = todo.pop()
            for entry in self.listdir(current):
                rel = f"{current}/{entry.name}" if current else entry.name
                if entry.kind == "dir":
                    todo.append(rel)
                elif entry.stat is not None:
                    yield rel, entry.stat

    def delete(self, rel: str | os.PathLike[str]) -> bool:
        """Remove a file; whether it existed."""
        confined = self.relpath(rel)
        return self.store.delete(confined, area_of(confined))

    def replace_if(
        self, rel: str | os.PathLike[str], text: str | bytes, version: str | None
    ) -> bool:
        """Replace a file only if it still has ``version`` (from :meth:`read_versioned`;
        ``None``: only if it does not exist yet). Returns whether it was replaced."""
        confined = self.relpath(rel)
        data = text if isinstance(text, bytes) else _encode(text)
        return self.store.replace_if(confined, data, version, area_of(confined))

    def write_bytes(self, rel: str | os.PathLike[str], data: bytes) -> None:
        """:meth:`write_text` for bytes."""
        if not isinstance(data, bytes):
            raise WorkspaceError(f"data must be bytes, not {type(data).__name__}")
        confined = self.relpath(rel)
        self.store.write(confined, data, area_of(confined))

    def write_text(self, rel: str | os.PathLike[str], text: str) -> None:
        """Replace a file atomically: temp file in the same directory, fsync, ``os.replace``.

        Readers see the old file or the new one, never a mix, even if the process dies. The
        file keeps its permissions; a symlink is written through (the link stays a link) when
        it leads to a file in the same part of the workspace (see :func:`area_of`).

        Raises:
            WorkspaceError: the path is not confined, a symlink leads out of its part of the
                workspace or loops, the path is a directory, FIFO, socket or device, the text
                is not encodable, or the write failed (the old file is then left as it was).
        """
        confined = self.relpath(rel)
        self.store.write(confined, _encode(text), area_of(confined))

    def create_text(self, rel: str | os.PathLike[str], text: str | bytes) -> bool:
        """Create a file with ``text`` unless it exists; never replaces an existing file.

        The file appears complete or not at all, and a file another process creates at the
        same moment wins. Returns whether this call created it.
        """
        confined = self.relpath(rel)
        data = text if isinstance(text, bytes) else _encode(text)
        return self.store.create(confined, data, area_of(confined))

    def append_text(
        self, rel: str | os.PathLike[str], text: str, *, fsync: bool = True
    ) -> tuple[int, int]:
        """Append ``text`` to a file in one ``write`` under an exclusive ``fcntl`` lock.

        If the file does not end in a newline (a torn earlier write), a newline is written
        first, in the same ``write``. Returns the ``(start, end)`` byte offsets of ``text``.
        Like :meth:`write_text`, a symlink is appended through only to a file in the same part
        of the workspace.
        """
        confined = self.relpath(rel)
        return self.store.append(confined, _encode(text), area_of(confined), fsync=fsync)

    def append_bytes(
        self, rel: str | os.PathLike[str], data: bytes, *, fsync: bool = True
    ) -> tuple[int, int]:
        """:meth:`append_text` for bytes (already encoded)."""
        if not isinstance(data, bytes):
            raise WorkspaceError(f"data must be bytes, not {type(data).__name__}")
        confined = self.relpath(rel)
        return self.store.append(confined, data, area_of(confined), fsync=fsync)

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """Hold an exclusive cross-process lock named ``name`` (a file under ``.index/locks``).

        Raises:
            WorkspaceError: the name is not 1-100 characters of ``A-Z a-z 0-9 _ . -``, or the
                lock file cannot be created.
        """
        with self.store.lock(name):
            yield

    @contextlib.asynccontextmanager
    async def async_lock(self, name: str, *, timeout: float) -> AsyncIterator[None]:
        """The lock of :meth:`lock`, awaited without blocking the event loop.

        Raises:
            WorkspaceError: the name is invalid, or the lock file cannot be created.
            MemdirError: the lock was not free within ``timeout`` seconds.
        """
        async with self.store.async_lock(name, timeout=timeout):
            yield


@dataclass(frozen=True, slots=True)
class _Secret:
    """A key kept out of every ``repr`` (of the workspace's attributes too)."""

    value: str = field(repr=False)


def _encode(text: str) -> bytes:
    if not isinstance(text, str):
        raise WorkspaceError(f"text must be a str, not {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkspaceError(
            f"text has a lone surrogate at character {exc.start} (not valid Unicode); "
            "nothing was written"
        ) from None


# Older private name, still imported by memdir.memory._retention.
_fsync_dir = fsync_dir
