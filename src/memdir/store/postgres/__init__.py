"""The PostgreSQL store: a workspace whose files are rows, shared by any number of hosts.

``Workspace("postgresql://user@host:5432/db")`` (``pip install 'memdir[postgres]'``) keeps every
file of a workspace (or of a namespace of it) in the database, under the same relative paths
as on disk, so the memory code, the CLI and the tools work unchanged:

- a file is a row of ``files`` (size, version, change time) and its content the ordered
  ``chunks`` rows. An append is one statement (the ``append_chunk`` function, one round
  trip) that adds one chunk under the file row's lock: appends from any number of hosts are
  ordered, never torn, never lost;
- a rewrite replaces the chunks in one transaction and bumps the version, so
  :meth:`replace_if` is a compare-and-swap; ``MEMORY.md`` is replaced that way and its previous
  versions are kept (``memory/.history/``, rows as well);
- every write carries a key (:mod:`memdir.store.postgres._writes`): one run again after a
  dropped connection is recognised and not made twice, and one whose answer was lost with the
  server raises :class:`~memdir.errors.OutcomeUnknownError`, whose key :meth:`was_written`
  looks up once the server is back;
- named locks are rows with an expiry (:mod:`memdir.store.postgres._locks`).

The schema lives in its own PostgreSQL schema (``memdir`` unless the URL says
``?schema=...``), created and migrated on first use.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

from memdir.errors import WorkspaceError
from memdir.store.postgres._connect import INSTALL_HINT

try:
    from psycopg import sql
except ImportError as exc:  # without the extra: one line saying what to install
    raise WorkspaceError(INSTALL_HINT) from exc

from memdir.store._base import LENT_LOCK_SECONDS, Entry, FileStat, Store, Versioned
from memdir.store._files import lock_name
from memdir.store._safeopen import Area, PathMissing, PathRefused, shown_path
from memdir.store.postgres._connect import Database, database, is_postgres_url, redact_url
from memdir.store.postgres._locks import RowLock
from memdir.store.postgres._schema import SCHEMA_VERSION, migrate
from memdir.store.postgres._writes import Writes

__all__ = ["PostgresStore", "is_postgres_url", "redact_url"]


def _check(rel: str, area: Area) -> None:
    """A database has no symlinks: a path is in an area by its name alone."""
    if rel and not area.holds(rel):
        raise PathRefused(
            f"{shown_path(rel)} is outside {area.label}; it cannot be opened here", reason="area"
        )


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class PostgresStore(Store):
    """The files of one namespace (``""``: the workspace root) in a PostgreSQL database.

    Args:
        url: the database (see :class:`~memdir.store.postgres._connect.Database`).
        namespace: the namespace, or ``None`` for the root.
    """

    kind: ClassVar[str] = "postgresql"

    def __init__(self, url: str, namespace: str | None) -> None:
        self.db: Database = database(url)
        self.ns = namespace or ""
        s = self.db.schema
        self._files = sql.Identifier(s, "files")
        self._chunks = sql.Identifier(s, "chunks")
        self._namespaces = sql.Identifier(s, "namespaces")
        self._writes = Writes(self.db)
        self._ready = False

    def describe(self) -> str:
        where = f" (namespace {self.ns!r})" if self.ns else ""
        return f"{self.db.shown}{where}"

    def init(self) -> None:
        self._prepare()
        self._tx(
            lambda cur: cur.execute(
                sql.SQL("INSERT INTO {} (ns) VALUES (%s) ON CONFLICT DO NOTHING").format(
                    self._namespaces
                ),
                (self.ns,),
            )
        )

    def _prepare(self) -> None:
        if self._ready:
            return
        if not self.db.migrated:
            migrate(self.db.transaction, self.db.schema)
            self.db.migrated = True
        self._ready = True

    def _tx(self, fn: Any, *, read_only: bool = False, autocommit: bool = False) -> Any:
        self._prepare()
        return self.db.transaction(fn, read_only=read_only, autocommit=autocommit)

    def close(self) -> None:
        return None  # the pool is shared by every namespace of the database

    # -- reading ----------------------------------------------------------------------------

    def _content(self, cur: Any, rel: str) -> bytes:
        cur.execute(
            sql.SQL(
                "SELECT coalesce(string_agg(data, ''::bytea ORDER BY start), ''::bytea) "
                "FROM {} WHERE ns = %s AND path = %s"
            ).format(self._chunks),
            (self.ns, rel),
        )
        row = cur.fetchone()
        return bytes(row[0]) if row is not None else b""

    def read(self, rel: str, area: Area) -> bytes:
        found = self.read_versioned(rel, area)
        if found is None:
            raise PathMissing(f"file not found: {rel}")
        return found.data

    def read_versioned(self, rel: str, area: Area) -> Versioned | None:
        _check(rel, area)

        def read(cur: Any) -> Versioned | None:
            cur.execute(
                sql.SQL("SELECT version FROM {} WHERE ns = %s AND path = %s").format(self._files),
                (self.ns, rel),
            )
            row = cur.fetchone()
            if row is None:
                return None
            return Versioned(data=self._content(cur, rel), version=str(row[0]))

        result: Versioned | None = self._tx(read, read_only=True)
        return result

    def read_from(self, rel: str, offset: int, area: Area) -> bytes:
        _check(rel, area)

        def read(cur: Any) -> bytes | None:
            cur.execute(
                sql.SQL("SELECT 1 FROM {} WHERE ns = %s AND path = %s").format(self._files),
                (self.ns, rel),
            )
            if cur.fetchone() is None:
                return None
            cur.execute(
                sql.SQL(
                    "SELECT start, data FROM {} WHERE ns = %s AND path = %s "
                    "AND start + length(data) > %s ORDER BY start"
                ).format(self._chunks),
                (self.ns, rel, offset),
            )
            rows = cur.fetchall()
            if not rows:
                return b""
            first = rows[0][0]
            data = b"".join(bytes(r[1]) for r in rows)
            return data[max(0, offset - first) :]

        result: bytes | None = self._tx(read, read_only=True)
        if result is None:
            raise PathMissing(f"file not found: {rel}")
        return result

    def stat(self, rel: str, area: Area) -> FileStat | None:
        _check(rel, area)

        def read(cur: Any) -> FileStat | None:
            cur.execute(
                sql.SQL(
                    "SELECT size, version, (extract(epoch from mtime) * 1e9)::bigint, generation "
                    "FROM {} WHERE ns = %s AND path = %s"
                ).format(self._files),
                (self.ns, rel),
            )
            row = cur.fetchone()
            if row is None:
                return None
            return FileStat(
                size=int(row[0]), mtime_ns=int(row[2]), tag=str(row[1]), identity=str(row[3])
            )

        result: FileStat | None = self._tx(read, read_only=True)
        return result

    def listdir(self, rel_dir: str, area: Area) -> list[Entry]:
        _check(rel_dir, area)
        prefix = f"{rel_dir}/" if rel_dir else ""

        def read(cur: Any) -> list[Any]:
            cur.execute(
                sql.SQL(
                    "SELECT path, size, version, (extract(epoch from mtime) * 1e9)::bigint, "
                    "generation FROM {} WHERE ns = %s AND path LIKE %s"
                ).format(self._files),
                (self.ns, _like_prefix(prefix)),
            )
            rows: list[Any] = cur.fetchall()
            return rows

        entries: dict[str, Entry] = {}
        for path, size, version, mtime, generation in self._tx(read, read_only=True):
            rest = path[len(prefix) :]
            name, sep, _ = rest.partition("/")
            if sep:
                entries.setdefault(name, Entry(name=name, kind="dir"))
            else:
                entries[name] = Entry(
                    name=name,
                    kind="file",
                    stat=FileStat(
                        size=int(size),
                        mtime_ns=int(mtime),
                        tag=str(version),
                        identity=str(generation),
                    ),
                )
        return [entries[name] for name in sorted(entries)]

    # -- writing ----------------------------------------------------------------------------

    def write(self, rel: str, data: bytes, area: Area) -> None:
        _check(rel, area)
        self._prepare()
        self._writes.write(self.ns, rel, data)

    def create(self, rel: str, data: bytes, area: Area) -> bool:
        _check(rel, area)
        self._prepare()
        return self._writes.create(self.ns, rel, data)

    def replace_if(self, rel: str, data: bytes, version: str | None, area: Area) -> bool:
        _check(rel, area)
        if version is None:
            return self.create(rel, data, area)
        try:
            expected = int(version)
        except ValueError:
            return False
        self._prepare()
        return self._writes.replace_if(self.ns, rel, data, expected)

    def append(self, rel: str, data: bytes, area: Area, *, fsync: bool = True) -> tuple[int, int]:
        _check(rel, area)
        self._prepare()
        return self._writes.append(self.ns, rel, data)

    def delete(self, rel: str, area: Area) -> bool:
        _check(rel, area)
        self._prepare()
        return self._writes.delete(self.ns, rel)

    def was_written(self, key: str | uuid.UUID) -> bool:
        """Whether the write whose outcome was unknown was made (see
        :class:`~memdir.errors.OutcomeUnknownError`): its key is kept with an append, and for
        a day with any other write.

        Raises:
            WorkspaceError: ``key`` is not a write key, or the database cannot be reached.
        """
        try:
            found = key if isinstance(key, uuid.UUID) else uuid.UUID(str(key))
        except ValueError:
            raise WorkspaceError(f"not a write key: {str(key)[:80]!r}") from None
        self._prepare()
        return self._writes.keys.was_written(self.db, found)

    # -- coordination -----------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, name: str) -> Iterator[None]:
        self._prepare()
        with RowLock(self.db, self.ns, lock_name(name)).held():
            yield

    @contextlib.asynccontextmanager
    async def async_lock(self, name: str, *, timeout: float) -> AsyncIterator[None]:
        self._prepare()
        async with RowLock(self.db, self.ns, lock_name(name)).held_async(timeout=timeout):
            yield

    def lent_lock(self, name: str) -> RowLock:
        self._prepare()
        return RowLock(self.db, self.ns, lock_name(name), ttl=LENT_LOCK_SECONDS)

    def exists(self) -> bool:
        def read(cur: Any) -> bool:
            cur.execute(
                sql.SQL("SELECT 1 FROM {} WHERE ns = %s").format(self._namespaces), (self.ns,)
            )
            if cur.fetchone() is not None:
                return True
            cur.execute(
                sql.SQL("SELECT 1 FROM {} WHERE ns = %s LIMIT 1").format(self._files), (self.ns,)
            )
            return cur.fetchone() is not None

        found: bool = self._tx(read, read_only=True)
        return found

    def namespaces(self) -> list[str]:
        def read(cur: Any) -> list[str]:
            cur.execute(
                sql.SQL("SELECT ns FROM {} WHERE ns <> '' ORDER BY ns").format(self._namespaces)
            )
            return [row[0] for row in cur.fetchall()]

        names: list[str] = self._tx(read, read_only=True)
        return names


def schema_version() -> int:
    """The schema version this memdir writes."""
    return SCHEMA_VERSION


def check_url(url: str) -> str:
    """``url`` if it names a PostgreSQL database, else :class:`WorkspaceError`."""
    if not is_postgres_url(url):
        raise WorkspaceError(f"not a PostgreSQL URL: {redact_url(url)!r}")
    return url
