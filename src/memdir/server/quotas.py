"""Storage quotas per tenant: the bytes its namespaces hold and how many namespaces it has.

A write that would take a tenant past ``quota_bytes``, or a write that would create a
namespace past ``quota_namespaces``, is refused with 507 ``quota-exceeded`` naming the limit
and the usage (a body over its route's own limit is a 413 before that). The usage is measured
from the store (a walk of the tenant's namespace directories, ``.index/`` left out, or one query
on PostgreSQL) at a tenant's first write and again when the measure is older than ``refresh``
seconds; in between, each write adds its body's size. So the quota is exact at a measure and
approximate between two (by the writes of other server processes, and by how a body's size
differs from what it stores); the search index is not counted.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from memdir.server.problems import ProblemError
from memdir.store.namespaces import NAMESPACES_DIR
from memdir.store.workspace import INDEX_DIR, Workspace

__all__ = ["QuotaExceeded", "Usage", "UsageMeter"]

QUOTA_HINT: Final = "ask the operator of this server for a larger quota"


@dataclass(slots=True)
class Usage:
    """What a tenant stores.

    Attributes:
        stored: bytes in its namespaces' files.
        namespaces: how many namespaces it has.
        measured_at: when the store was last measured (the meter's clock).
    """

    stored: int
    namespaces: int
    measured_at: float


class QuotaExceeded(ProblemError):
    """507: a write would take the tenant past a quota."""

    def __init__(self, quota: str, detail: str, *, limit: int, used: int) -> None:
        super().__init__(507, "quota-exceeded", detail, limit=limit, used=used)
        self.quota = quota


class UsageMeter:
    """Each tenant's usage of the workspace ``root``, measured now and then.

    Args:
        root: the workspace root.
        quota_bytes: the bytes a tenant may store (``0``: no quota).
        quota_namespaces: the namespaces a tenant may have (``0``: no quota).
        refresh: seconds a measure is used before the store is measured again.
        clock: monotonic seconds (injectable in tests).
    """

    def __init__(
        self,
        root: Workspace,
        *,
        quota_bytes: int,
        quota_namespaces: int,
        refresh: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.quota_bytes = quota_bytes
        self.quota_namespaces = quota_namespaces
        self.refresh = refresh
        self._clock = clock
        self._usage: dict[str, Usage] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether any quota is set."""
        return self.quota_bytes > 0 or self.quota_namespaces > 0

    def current(self, tenant: str) -> Usage | None:
        """The tenant's usage if it was measured less than ``refresh`` seconds ago."""
        with self._lock:
            found = self._usage.get(tenant)
        if found is None or self._clock() - found.measured_at >= self.refresh:
            return None
        return found

    def measure(self, tenant: str) -> Usage:
        """Measure the tenant's usage in the store (blocking: run it in a thread).

        Raises:
            WorkspaceError: the store cannot be read.
        """
        prefix = tenant + "."
        if self.root.is_local:
            stored, namespaces = _measure_files(self.root, prefix)
        else:
            stored, namespaces = _measure_postgres(self.root, prefix)
        usage = Usage(stored=stored, namespaces=namespaces, measured_at=self._clock())
        with self._lock:
            self._usage[tenant] = usage
        return usage

    def usage(self, tenant: str) -> Usage:
        """The tenant's usage, measured again when the last measure is too old (blocking)."""
        return self.current(tenant) or self.measure(tenant)

    def check_write(self, tenant: str, usage: Usage, size: int) -> None:
        """Refuse a write of ``size`` bytes that would take the tenant past its quota.

        Raises:
            QuotaExceeded: it would.
        """
        limit = self.quota_bytes
        if limit > 0 and usage.stored + size > limit:
            raise QuotaExceeded(
                "bytes",
                f"this tenant stores {usage.stored:,} bytes and may store {limit:,}: this "
                f"write of {size:,} bytes would pass the quota; {QUOTA_HINT}",
                limit=limit,
                used=usage.stored,
            )

    def check_new_namespace(self, tenant: str) -> None:
        """Refuse a write that would create one namespace too many (blocking).

        Raises:
            QuotaExceeded: the tenant has as many namespaces as it may.
            WorkspaceError: the store cannot be read.
        """
        limit = self.quota_namespaces
        if limit <= 0:
            return
        usage = self.usage(tenant)
        if usage.namespaces >= limit:
            raise QuotaExceeded(
                "namespaces",
                f"this tenant has {usage.namespaces:,} namespaces and may have {limit:,}: a "
                f"write to a new one would pass the quota; {QUOTA_HINT}",
                limit=limit,
                used=usage.namespaces,
            )

    def add(self, tenant: str, *, stored: int = 0, namespaces: int = 0) -> None:
        """Count a write (its bytes, or a new namespace) until the next measure."""
        with self._lock:
            found = self._usage.get(tenant)
            if found is not None:
                found.stored += stored
                found.namespaces += namespaces


def _measure_files(root: Workspace, prefix: str) -> tuple[int, int]:
    """Bytes in ``<base>/ns/<prefix>*/`` (``.index/`` left out, links not followed), and
    how many such namespaces there are."""
    top = root.base / NAMESPACES_DIR
    try:
        names = [e.name for e in os.scandir(top) if e.name.startswith(prefix) and e.is_dir()]
    except FileNotFoundError:
        return 0, 0
    stored = 0
    for name in names:
        for folder, dirs, files in os.walk(top / name):
            dirs[:] = [d for d in dirs if d != INDEX_DIR]
            for file in files:
                try:
                    st = (Path(folder) / file).lstat()
                except OSError:
                    continue  # gone meanwhile
                if stat.S_ISREG(st.st_mode):
                    stored += st.st_size
    return stored, len(names)


def _measure_postgres(root: Workspace, prefix: str) -> tuple[int, int]:
    from psycopg import sql

    from memdir.store.postgres import PostgresStore

    store = root.store
    assert isinstance(store, PostgresStore)
    db = store.db
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    query = sql.SQL(
        "SELECT (SELECT coalesce(sum(size), 0) FROM {files} WHERE ns LIKE %s"
        " AND path NOT LIKE '.index/%%'),"
        " (SELECT count(*) FROM {namespaces} WHERE ns LIKE %s)"
    ).format(
        files=sql.Identifier(db.schema, "files"),
        namespaces=sql.Identifier(db.schema, "namespaces"),
    )

    def run(cur: Any) -> tuple[int, int]:
        cur.execute(query, (pattern, pattern))
        stored, namespaces = cur.fetchone()
        return int(stored), int(namespaces)

    measured: tuple[int, int] = db.transaction(run, read_only=True)
    return measured
