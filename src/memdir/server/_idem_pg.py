"""The idempotency records of a PostgreSQL workspace: the ``idempotency`` table (migrations 8
and 9: the namespace a record's request wrote into, and erased records).

Times are the database's (``clock_timestamp()``), so replicas on hosts whose clocks differ
agree on when a claim lapsed. A claim is one transaction: insert the record, or lock the one
there and decide; a transaction retried after a dropped connection finds its own token.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any, Final

from psycopg import sql
from psycopg.types.json import Jsonb

from memdir.server._idem_base import Answer, Claim, StoredRecord, content_of
from memdir.store.postgres._connect import Database
from memdir.store.postgres._schema import ensure_migrated

__all__ = ["PgIdempotencyStore"]

_SECONDS: Final = "clock_timestamp() + %s * interval '1 second'"


class PgIdempotencyStore:
    """The records of the memdir schema of ``db``.

    Raises (from every method):
        WorkspaceError: the database cannot be reached.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._table = sql.Identifier(db.schema, "idempotency")

    def _tx(self, fn: Any) -> Any:
        ensure_migrated(self.db)
        return self.db.transaction(fn)

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text.replace("{later}", _SECONDS)).format(t=self._table)

    def claim(
        self,
        tenant: str,
        key: str,
        fingerprint: bytes,
        token: str,
        *,
        lease: float,
        ttl: float,
        namespace: str = "",
    ) -> Claim:
        fresh = self._sql(
            "INSERT INTO {t} (tenant, key, fingerprint, token, state, locked_until, expires_at,"
            " ns) VALUES (%s, %s, %s, %s, 'running', {later}, {later}, %s)"
            " ON CONFLICT (tenant, key) DO UPDATE SET fingerprint = excluded.fingerprint,"
            " token = excluded.token, state = 'running', locked_until = excluded.locked_until,"
            " expires_at = excluded.expires_at, intent = NULL, status = NULL, headers = NULL,"
            " body = NULL, ns = excluded.ns"
            " WHERE {t}.expires_at <= clock_timestamp() AND {t}.locked_until <= clock_timestamp()"
            " RETURNING 1"
        )
        look = self._sql(
            "SELECT fingerprint, token::text, state, locked_until > clock_timestamp(), intent,"
            " status, headers, body FROM {t} WHERE tenant = %s AND key = %s FOR UPDATE"
        )
        take = self._sql(
            "UPDATE {t} SET token = %s, locked_until = {later}, expires_at = {later}"
            " WHERE tenant = %s AND key = %s"
        )

        def run(cur: Any) -> Claim:
            cur.execute(fresh, (tenant, key, fingerprint, uuid.UUID(token), lease, ttl, namespace))
            if cur.fetchone() is not None:
                return Claim("new")
            cur.execute(look, (tenant, key))
            row = cur.fetchone()
            if row is None:  # removed between the two statements: as if still running
                return Claim("running")
            stored_fp, holder, state, held, intent, status, headers, body = row
            if holder == token:  # this transaction was committed before a lost connection
                return Claim("takeover" if intent is not None else "new", intent=intent)
            if state == "erased":
                return Claim("erased")
            if bytes(stored_fp) != fingerprint:
                return Claim("mismatch")
            if state == "done":
                answer = Answer(status=int(status), headers=dict(headers), body=bytes(body))
                return Claim("replay", answer=answer)
            if held:
                return Claim("running")
            cur.execute(take, (uuid.UUID(token), lease, ttl, tenant, key))
            return Claim("takeover", intent=intent)

        result: Claim = self._tx(run)
        return result

    def _held(self, text: str, args: tuple[Any, ...]) -> bool:
        statement = self._sql(
            f"UPDATE {{t}} SET {text} WHERE tenant = %s AND key = %s AND token = %s"
            " AND state = 'running' RETURNING 1"
        )
        *values, token = args

        def run(cur: Any) -> bool:
            cur.execute(statement, (*values, uuid.UUID(token)))
            return cur.fetchone() is not None

        held: bool = self._tx(run)
        return held

    def record_intent(self, tenant: str, key: str, token: str, intent: dict[str, Any]) -> bool:
        return self._held("intent = %s", (Jsonb(intent), tenant, key, token))

    def renew(self, tenant: str, key: str, token: str, *, lease: float) -> bool:
        return self._held("locked_until = {later}", (lease, tenant, key, token))

    def finish(self, tenant: str, key: str, token: str, answer: Answer, *, ttl: float) -> bool:
        return self._held(
            "state = 'done', status = %s, headers = %s, body = %s,"
            " locked_until = clock_timestamp(), expires_at = {later}",
            (answer.status, Jsonb(answer.headers), answer.body, ttl, tenant, key, token),
        )

    def release(self, tenant: str, key: str, token: str) -> None:
        drop = self._sql(
            "DELETE FROM {t} WHERE tenant = %s AND key = %s AND token = %s"
            " AND state = 'running' AND intent IS NULL"
        )
        unlock = self._sql(
            "UPDATE {t} SET locked_until = clock_timestamp()"
            " WHERE tenant = %s AND key = %s AND token = %s AND state = 'running'"
        )

        holder = uuid.UUID(token)

        def run(cur: Any) -> None:
            cur.execute(drop, (tenant, key, holder))
            if cur.rowcount == 0:  # an intent was recorded: the next try takes over at once
                cur.execute(unlock, (tenant, key, holder))

        self._tx(run)

    def records(self, namespace: str | None) -> Iterator[StoredRecord]:
        statement = self._sql(
            "SELECT tenant, key, ns, body, headers, intent FROM {t}"
            " WHERE state <> 'erased' AND (ns IS NULL OR ns = %s)"
            " AND (expires_at > clock_timestamp() OR locked_until > clock_timestamp())"
            " ORDER BY tenant, key"
        )

        def run(cur: Any) -> list[StoredRecord]:
            # NULL never equals: a root (no namespace) reads only the records of none known
            cur.execute(statement, (namespace,))
            return [
                StoredRecord(
                    tenant,
                    key,
                    ns,
                    content_of(None if body is None else bytes(body), headers, intent),
                )
                for tenant, key, ns, body, headers, intent in cur.fetchall()
            ]

        found: list[StoredRecord] = self._tx(run)
        yield from found

    def erase(self, records: Iterable[StoredRecord]) -> int:
        statement = self._sql(
            "UPDATE {t} SET state = 'erased', fingerprint = ''::bytea, token = %s, ns = NULL,"
            " intent = NULL, status = NULL, headers = NULL, body = NULL,"
            " locked_until = clock_timestamp(),"
            " expires_at = greatest(expires_at, clock_timestamp())"
            " WHERE tenant = %s AND key = %s AND state <> 'erased'"
        )
        wanted = [(found.tenant, found.ref) for found in records]

        def run(cur: Any) -> int:
            erased = 0
            for tenant, key in wanted:
                cur.execute(statement, (uuid.uuid4(), tenant, key))
                erased += int(cur.rowcount)
            return erased

        done: int = self._tx(run) if wanted else 0
        return done

    def purge(self) -> int:
        statement = self._sql(
            "DELETE FROM {t} WHERE expires_at <= clock_timestamp()"
            " AND locked_until <= clock_timestamp()"
        )

        def run(cur: Any) -> int:
            cur.execute(statement)
            return int(cur.rowcount)

        removed: int = self._tx(run)
        return removed
