"""Forgetting a user: a namespace deleted whole, on either store, with an audit record.

On a directory the namespace's tree ``ns/<name>/`` is first renamed to
``ns/.erasing-<key>`` (one atomic step: it is gone from every listing and open), then removed;
a run killed in between leaves that directory, which the next run removes. In PostgreSQL
every row of the namespace (its files, index, vectors, locks) goes in one transaction, and
the API keys bound to exactly that namespace are revoked; the tables are then vacuumed. First the
server's idempotency records of the namespace are erased (:mod:`memdir.forget._records`). The
root workspace's ``memory/.forget/erased.jsonl`` gets a record: when, who asked, the keyed
hash of the name (a name may itself identify the person), never the content.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from typing import Any

from memdir._testpoint import pause_point
from memdir.errors import MemdirError
from memdir.forget._keys import ERASED_REL, FORGET_DIR, Keyer
from memdir.forget._records import erase_namespace_records
from memdir.store.namespaces import NAMESPACES_DIR, validate_namespace
from memdir.store.workspace import Workspace

__all__ = ["NamespaceDeleted", "delete_namespace", "resume_namespace_deletes"]

_PENDING = f"{FORGET_DIR}/namespace.json"
_ERASING = ".erasing-"


@dataclass(frozen=True, slots=True)
class NamespaceDeleted:
    """What a namespace delete removed."""

    namespace: str
    files: int
    keys_revoked: int


def _root(ws: Workspace) -> Workspace:
    return ws if ws.namespace is None else ws.namespaced(None, create=False)


def delete_namespace(ws: Workspace, name: str, *, by: str = "person") -> NamespaceDeleted:
    """Delete the namespace ``name`` of ``ws``'s workspace: every file, row, index entry,
    vector, lock and API key bound to it; the other namespaces are not touched.

    Raises:
        ConfigError: ``name`` is not a valid namespace name.
        MemdirError: no such namespace; ``by`` is not a short name.
    """
    name = validate_namespace(name)
    if not isinstance(by, str) or not by.strip() or len(by) > 64 or "\n" in by:
        raise MemdirError("by must be a short name of who asked (such as 'person')")
    root = _root(ws)
    with root.lock("forget"):
        resume_namespace_deletes(root, locked=True)
        if name not in root.namespaces():
            raise MemdirError(f"there is no namespace {name!r}: nothing deleted")
        key = Keyer(root).key(name)
        root.write_text(_PENDING, json.dumps({"namespace": name, "key": key, "by": by}))
        pause_point("namespace-delete:journal-written")
        files, revoked = _delete(root, name, key)
        _audit(root, key, by)
        root.delete(_PENDING)
    return NamespaceDeleted(namespace=name, files=files, keys_revoked=revoked)


def resume_namespace_deletes(ws: Workspace, *, locked: bool = False) -> int:
    """Complete a namespace delete a crash interrupted; how many were completed."""
    root = _root(ws)
    if root.stat(_PENDING) is None and not _leftovers(root):
        return 0
    if not locked:
        with root.lock("forget"):
            return resume_namespace_deletes(root, locked=True)
    done = 0
    raw = root.read_text(_PENDING)
    if raw:
        pending: Any = json.loads(raw)
        _delete(root, pending["namespace"], pending["key"])
        _audit(root, pending["key"], pending["by"])
        root.delete(_PENDING)
        done += 1
    for path in _leftovers(root):
        shutil.rmtree(path, ignore_errors=True)
    return done


def _leftovers(root: Workspace) -> list[Any]:
    if not root.is_local:
        return []
    parent = root.base / NAMESPACES_DIR
    return sorted(parent.glob(_ERASING + "*")) if parent.is_dir() else []


def _audit(root: Workspace, key: str, by: str) -> None:
    if f'"namespace_key": "{key}"' in root.read_text(ERASED_REL):
        return
    at = root.utc_now().isoformat(timespec="seconds").replace("+00:00", "Z")
    record = {"at": at, "by": by, "kind": "namespace", "namespace_key": key}
    root.append_text(ERASED_REL, json.dumps(record) + "\n")


def _delete(root: Workspace, name: str, key: str) -> tuple[int, int]:
    from memdir.sessions._search import close_session_index
    from memdir.tools._core import close_shared_index

    erase_namespace_records(root, name)  # first: a record of no namespace known is read
    doomed_ws = root.namespaced(name, create=False)  # against the files, which go next
    close_shared_index(doomed_ws)  # an open database would keep the deleted bytes on disk
    close_session_index(doomed_ws)
    if root.is_local:
        tree = root.base / NAMESPACES_DIR / name
        doomed = root.base / NAMESPACES_DIR / f"{_ERASING}{key[:16]}"
        if tree.is_dir():
            tree.rename(doomed)
        pause_point("namespace-delete:renamed")
        files = sum(1 for p in doomed.rglob("*") if p.is_file()) if doomed.is_dir() else 0
        shutil.rmtree(doomed, ignore_errors=True)
        return files, _revoke(root, name)
    return _delete_rows(root, name)


def _revoke(root: Workspace, name: str) -> int:
    """Revoke the API keys bound to exactly ``name`` (a key over a prefix reaches others)."""
    from memdir.server.auth import open_key_store

    try:
        store = open_key_store(root)
        records = store.records()
    except Exception:
        return 0
    now = root.utc_now()
    revoked = 0
    for record in records:
        if record.namespace == name and record.revoked_at is None:
            store.revoke(record.key_id, now)
            revoked += 1
    return revoked


def _delete_rows(root: Workspace, name: str) -> tuple[int, int]:
    from psycopg import sql  # the postgres extra: only a PostgreSQL store gets here

    from memdir.index._erase import ns_tables, vacuum_postgres
    from memdir.store.postgres import PostgresStore

    store = root.store
    assert isinstance(store, PostgresStore)
    schema = store.db.schema
    tables = ns_tables(root)

    def delete(cur: Any) -> tuple[int, int]:
        cur.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE ns = %s").format(
                sql.Identifier(schema, "files")
            ),
            (name,),
        )
        files = int(cur.fetchone()[0])
        for table in ("chunks", *[t for t in tables if t != "chunks"]):
            cur.execute(
                sql.SQL("DELETE FROM {} WHERE ns = %s").format(sql.Identifier(schema, table)),
                (name,),
            )
        cur.execute(
            sql.SQL(
                "UPDATE {} SET revoked_at = clock_timestamp() WHERE namespace = %s"
                " AND revoked_at IS NULL"
            ).format(sql.Identifier(schema, "api_keys")),
            (name,),
        )
        revoked = int(cur.rowcount)
        if revoked:
            cur.execute(
                sql.SQL("UPDATE {} SET generation = generation + 1").format(
                    sql.Identifier(schema, "api_key_changes")
                )
            )
        return files, revoked

    result: tuple[int, int] = store.db.transaction(delete)
    pause_point("namespace-delete:rows-deleted")
    vacuum_postgres(root, tuple(tables))
    return result
