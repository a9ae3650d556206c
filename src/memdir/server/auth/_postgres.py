"""The keys of a PostgreSQL workspace: the ``api_keys`` table (schema migration 7).

Adding or revoking a key bumps ``api_key_changes.generation`` in the same transaction; a
server process reads that one row about once a second (:meth:`PgKeyStore.change_token`) and
forgets the keys it had cached when it moved, so a revocation reaches every replica within
seconds at one tiny query a second per process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from psycopg import sql

from memdir.errors import ConfigError
from memdir.server.auth._keys import KeyRecord, Scope, check_record
from memdir.store.postgres._connect import Database
from memdir.store.postgres._schema import ensure_migrated

__all__ = ["PgKeyStore"]

logger = logging.getLogger("memdir.server.auth")
_COLUMNS: Final = (
    "key_id, secret_sha256, tenant, namespace_prefix, namespace, scope, label, created_at, "
    "expires_at, revoked_at, last_used_at"
)


class PgKeyStore:
    """The keys of the memdir schema of ``db``.

    Raises (from every method):
        WorkspaceError: the database cannot be reached.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._keys = sql.Identifier(db.schema, "api_keys")
        self._changes = sql.Identifier(db.schema, "api_key_changes")
        self._select = sql.SQL(f"SELECT {_COLUMNS} FROM {{}}").format(self._keys)

    def describe(self) -> str:
        return f"{self.db.shown} (table {self.db.schema}.api_keys)"

    def _tx(self, fn: Any, *, read_only: bool = False) -> Any:
        ensure_migrated(self.db)
        return self.db.transaction(fn, read_only=read_only)

    def _bump(self, cur: Any) -> None:
        cur.execute(sql.SQL("UPDATE {} SET generation = generation + 1").format(self._changes))

    def change_token(self) -> object:
        def read(cur: Any) -> int:
            cur.execute(sql.SQL("SELECT generation FROM {}").format(self._changes))
            row = cur.fetchone()
            return int(row[0]) if row is not None else 0

        return self._tx(read, read_only=True)

    def check(self) -> None:
        self.change_token()

    def get(self, key_id: str) -> KeyRecord | None:
        def read(cur: Any) -> Any:
            cur.execute(sql.SQL("{} WHERE key_id = %s").format(self._select), (key_id,))
            return cur.fetchone()

        row = self._tx(read, read_only=True)
        return None if row is None else _record(row)

    def records(self, tenant: str | None = None) -> list[KeyRecord]:
        def read(cur: Any) -> list[Any]:
            where = sql.SQL(" WHERE tenant = %s" if tenant is not None else "")
            query = sql.SQL("{}{} ORDER BY created_at, key_id").format(self._select, where)
            cur.execute(query, (tenant,) if tenant is not None else ())
            rows: list[Any] = cur.fetchall()
            return rows

        found = (_record(row) for row in self._tx(read, read_only=True))
        return [record for record in found if record is not None]

    def add(self, record: KeyRecord) -> None:
        row = record.to_json()
        values = (
            record.key_id, record.secret_sha256, record.tenant, record.namespace_prefix,
            record.namespace, row["scope"], record.label, record.created_at, record.expires_at,
        )  # fmt: skip

        def write(cur: Any) -> None:
            cur.execute(
                sql.SQL(
                    "INSERT INTO {} (key_id, secret_sha256, tenant, namespace_prefix, namespace, "
                    "scope, label, created_at, expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s, "
                    "%s, %s) ON CONFLICT (key_id) DO NOTHING"
                ).format(self._keys),
                values,
            )
            if cur.rowcount != 1:
                raise ConfigError(f"key {record.key_id} exists already")
            self._bump(cur)

        self._tx(write)

    def revoke(self, key_id: str, at: datetime) -> KeyRecord | None:
        def write(cur: Any) -> Any:
            cur.execute(
                sql.SQL(
                    "UPDATE {} SET revoked_at = coalesce(revoked_at, %s) WHERE key_id = %s "
                    f"RETURNING {_COLUMNS}"
                ).format(self._keys),
                (at, key_id),
            )
            row = cur.fetchone()
            if row is not None:
                self._bump(cur)
            return row

        row = self._tx(write)
        return None if row is None else _record(row)

    def touch(self, used: Mapping[str, datetime]) -> None:
        if not used:
            return
        ids, times = list(used), [used[k] for k in used]

        def write(cur: Any) -> None:
            cur.execute(
                sql.SQL(
                    "UPDATE {} k SET last_used_at = u.at FROM unnest(%s::text[], "
                    "%s::timestamptz[]) AS u(key_id, at) WHERE k.key_id = u.key_id "
                    "AND (k.last_used_at IS NULL OR k.last_used_at < u.at)"
                ).format(self._keys),
                (ids, times),
            )

        self._tx(write)


def _record(row: Any) -> KeyRecord | None:
    """The record of a row; ``None`` (logged) for a row that breaks a rule of keys."""
    try:
        return check_record(
            KeyRecord(
                key_id=row[0],
                secret_sha256=bytes(row[1]),
                tenant=row[2],
                namespace_prefix=row[3],
                namespace=row[4],
                scope=Scope.parse(row[5]),
                label=row[6],
                created_at=_utc(row[7]),
                expires_at=_utc(row[8]),
                revoked_at=_utc(row[9]),
                last_used_at=_utc(row[10]),
            )
        )
    except ConfigError as exc:
        logger.warning("damaged key store: the record of key %s is refused: %s", row[0], exc)
        return None


def _utc(value: Any) -> Any:
    return None if value is None else value.astimezone(UTC)
