"""PostgreSQL engine: the search index of a workspace kept in PostgreSQL, beside its files.

The index lives in the same database and schema as the files (``index_files``,
``index_units``, ``index_headings``, ``index_postings``; migrations 2 and 5 of
:mod:`memdir.store.postgres._schema`), one set of rows per namespace: every query names its
namespace, so a search never sees another namespace's rows. Each unit stores memdir's own
tokens as a ``tsvector`` (:mod:`memdir.index._pg_terms`), and each of its lexemes is a row of
``index_postings`` keyed ``(ns, lexeme, id)``: a term's newest rows are a backward walk of that
primary key, read from the index alone, as FTS5 walks its posting lists. Several lexemes (the
terms of an ``AND``, the words of a phrase) are intersected in SQL, and a phrase is then
checked against the candidates' ``tsvector``; the candidates are ranked by the same Python
code as the SQLite engine (:mod:`memdir.index._search`, :mod:`memdir.index._rank`), so both
give the same hits.

The engine holds one connection of its own (not one of the store's pool): a search's queries
run in one repeatable-read transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memdir.errors import ConfigError, IndexError_
from memdir.index._engine import FileInfo, StoredRow, heading_ids, stored_rows
from memdir.index._markdown import ParsedFile
from memdir.index._pg_terms import MAX_LEXEME, lexemes_of, tsquery_of
from memdir.index._postgres_files import PgFiles
from memdir.index._schema import LINE_BITS
from memdir.index._sqlite_files import file_range
from memdir.store.workspace import Workspace

__all__ = ["PostgresEngine"]

_JOINED = 4  # lexemes whose posting lists are intersected; a phrase checks the rest


def _rowids_sql(schema: str, lists: int, check: bool, ranged: bool = False) -> str:
    """Ids holding ``lists`` lexemes (the newest first), and ``check``: the whole tsquery.

    The posting lists are joined on the id, each an index-only walk of the primary key; the
    planner drives from the rarest (it knows the lexemes' frequencies) and looks the others
    up. ``check`` reads each candidate's tsvector (a phrase: positions next to each other).
    """
    p, u = f'"{schema}".index_postings', f'"{schema}".index_units'
    joins = "".join(
        f" JOIN {p} p{i} ON p{i}.ns = p0.ns AND p{i}.lexeme = %s AND p{i}.id = p0.id"
        for i in range(1, lists)
    )
    if check:
        joins += f" JOIN {u} u ON u.ns = p0.ns AND u.id = p0.id AND u.terms @@ %s::tsquery"
    bounds = " AND p0.id >= %s AND p0.id < %s" if ranged else ""
    return (
        f"SELECT p0.id FROM {p} p0{joins} WHERE p0.ns = %s AND p0.lexeme = %s{bounds}"
        " ORDER BY p0.id DESC LIMIT %s"
    )


def _reads(schema: str) -> dict[str, str]:
    s = f'"{schema}"'
    u, h = f"{s}.index_units", f"{s}.index_headings"
    return {
        "neighbors": "SELECT q.id,"
        f" (SELECT max(x.id) FROM {u} x WHERE x.ns = %s AND x.id < q.id AND x.id >= q.lo),"
        f" (SELECT min(x.id) FROM {u} x WHERE x.ns = %s AND x.id > q.id AND x.id < q.hi)"
        " FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS q(id, lo, hi)",
        "fetch": f"SELECT id, line_end, head, content, words, terms::text FROM {u}"
        " WHERE ns = %s AND id = ANY(%s)",
        "fetch_headings": f"SELECT id, text FROM {h} WHERE ns = %s AND id = ANY(%s)",
        "lengths": f"SELECT id, words FROM {u} WHERE ns = %s AND id = ANY(%s) AND words > %s",
        "count_from": f"SELECT count(*) FROM {u} WHERE ns = %s AND id >= %s AND id < %s",
        "file_units": f"SELECT id, line_end, head, content FROM {u}"
        " WHERE ns = %s AND id >= %s AND id < %s ORDER BY id",
        "file_headings": f"SELECT id, text FROM {h} WHERE ns = %s AND id >= %s AND id < %s",
    }


class PostgresEngine(PgFiles):
    """The :class:`~memdir.index._engine.Engine` on PostgreSQL (``tsvector``, GIN)."""

    def __init__(self, conn: Any, schema: str, ns: str) -> None:
        super().__init__(conn, schema, ns)
        self._sql.update(_reads(schema))

    @classmethod
    def open(cls, workspace: Workspace) -> PostgresEngine:
        """Connect to the workspace's database (its schema migrated) for its namespace.

        Raises:
            ConfigError: the workspace is not kept in PostgreSQL.
            WorkspaceError: the database cannot be reached.
        """
        from memdir.store.postgres import PostgresStore

        store = workspace.store
        if not isinstance(store, PostgresStore):
            raise ConfigError(f"{workspace!r} is not kept in PostgreSQL")
        workspace.init()  # the schema, with the index tables, is migrated
        import psycopg

        from memdir.store.postgres._diagnose import explain

        try:
            conn = psycopg.connect(store.db.conninfo, autocommit=True)
        except psycopg.Error as exc:
            cause, _ = explain(exc, store.db.connect_timeout)
            raise IndexError_(
                f"cannot connect to PostgreSQL at {store.db.shown} for the search index: {cause}"
            ) from exc
        return cls(conn, store.db.schema, store.ns)

    def damage(self) -> str | None:
        """``None``: PostgreSQL keeps its own pages sound (stored lines are checked against
        their files by ``memdir index``)."""
        return None

    # -- search -------------------------------------------------------------------------

    def matches(self, info: FileInfo, parsed: ParsedFile) -> bool:
        """Whether the stored units and headings of a file are exactly ``parsed``."""
        lo, hi = file_range(info.id)
        rows = [tuple(r) for r in self._conn.execute(self.q("file_units"), (self.ns, lo, hi))]
        if rows != [(lo | u.start, u.end, u.head, u.content) for u in parsed.units]:
            return False
        headings = dict(self._conn.execute(self.q("file_headings"), (self.ns, lo, hi)).fetchall())
        wanted = {lo | line: text for line, text in parsed.headings.items()}
        return headings == wanted and info.units == len(rows)

    def newest_day(self) -> int | None:
        """The most recent ledger date in the index (proleptic ordinal), if any."""
        days = [info.day for info in self._by_id().values() if info.day is not None]
        return max(days) if days else None

    def totals(self) -> tuple[int, float]:
        """``(rows, average tokens per row)`` from the files rows' counts."""
        rows = sum(info.units for info in self._by_id().values())
        if rows <= 0:
            return 0, 0.0
        return rows, self.words() / rows

    def rows_from(self, rowid: int) -> int:
        """Number of units whose id is ``rowid`` or higher."""
        file_id = rowid >> LINE_BITS
        later = sum(info.units for fid, info in self._by_id().items() if fid > file_id)
        _, hi = file_range(file_id)
        row = self._conn.execute(self.q("count_from"), (self.ns, rowid, hi)).fetchone()
        return later + (int(row[0]) if row is not None else 0)

    def rowids(
        self,
        terms: Sequence[tuple[str, ...]],
        limit: int,
        *,
        within: tuple[int, int] | None = None,
    ) -> list[int]:
        """Up to ``limit`` ids of rows holding every term, highest (newest files) first.

        ``within`` keeps the ids of a range ``[lo, hi)``.
        """
        phrases = [lexemes_of(tokens) for tokens in terms if tokens]
        if not phrases:
            return []
        lexemes = sorted({x for phrase in phrases for x in phrase}, key=len, reverse=True)
        if any(len(x.encode()) >= MAX_LEXEME for x in lexemes):
            return []  # never stored (nor accepted in a tsquery)
        joined = lexemes[:_JOINED]  # the longest: rarest, mostly (the planner picks the order)
        check = len(joined) < len(lexemes) or any(len(phrase) > 1 for phrase in phrases)
        ranged = within is not None
        key = f"rowids:{len(joined)}:{check}:{ranged}"
        if key not in self._sql:
            self._sql[key] = _rowids_sql(self.schema, len(joined), check, ranged)
        params: list[object] = [*joined[1:]]
        if check:
            params.append(tsquery_of(terms))
        params += [self.ns, joined[0]]
        if within is not None:
            params += [within[0], within[1]]
        params.append(limit)
        rows = self._conn.execute(self.q(key), params).fetchall()
        return [row[0] for row in rows]

    def neighbors(self, rowids: Sequence[int]) -> dict[int, tuple[int | None, int | None]]:
        """The previous and next unit of the same file for each row id."""
        if not rowids:
            return {}
        ids = list(rowids)
        los = [(r >> LINE_BITS) << LINE_BITS for r in ids]
        his = [lo + (1 << LINE_BITS) for lo in los]
        rows = self._conn.execute(self.q("neighbors"), (self.ns, self.ns, ids, los, his))
        return {row[0]: (row[1], row[2]) for row in rows}

    def units_of(self, file_id: int) -> list[tuple[int, int, str]]:
        """``(row id, head, content)`` of every unit of one file, in line order."""
        lo, hi = file_range(file_id)
        rows = self._conn.execute(self.q("file_units"), (self.ns, lo, hi))
        return [(row[0], row[2], row[3]) for row in rows]

    def fetch(self, rowids: Sequence[int]) -> list[StoredRow]:
        """Stored rows for ``rowids`` (missing ids skipped), with file and heading."""
        if not rowids:
            return []
        files = self._by_id()
        raw = self._conn.execute(self.q("fetch"), (self.ns, list(rowids))).fetchall()
        head_ids = heading_ids(raw)
        headings: dict[int, str] = {}
        if head_ids:
            headings = dict(
                self._conn.execute(self.q("fetch_headings"), (self.ns, head_ids)).fetchall()
            )
        return stored_rows(raw, files, headings)

    def lengths(self, rowids: Sequence[int], longer: int) -> dict[int, int]:
        """The token count of each row of ``rowids`` longer than ``longer`` tokens."""
        if not rowids:
            return {}
        rows = self._conn.execute(self.q("lengths"), (self.ns, list(rowids), longer))
        return dict(rows.fetchall())
