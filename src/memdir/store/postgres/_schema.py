"""The PostgreSQL schema of a memdir store and its versioned migrations.

Migrations are applied on first use (or by ``memdir db upgrade``), each in a transaction that
holds a transaction-level advisory lock, so several hosts starting at once apply each one
exactly once, and a transaction-pooling proxy (pgbouncer) is no obstacle: nothing outlives its
transaction. Applied versions are recorded in ``<schema>.migrations``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from psycopg import sql

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "ensure_migrated", "migrate"]

# The append function of migration 4, and of 6, which also finds a key that a rewrite moved to
# write_keys. Released text: what migration 4 makes must never change.
_APPEND_CHUNK: Final = """{create} {{s}}.append_chunk(
            p_ns text, p_path text, p_data bytea, p_key uuid,
            OUT first_byte bigint, OUT end_byte bigint
        ) LANGUAGE plpgsql AS $$
        DECLARE
            old_size bigint;
            old_last smallint;
            piece bytea;
        BEGIN
{lookup}            IF FOUND THEN
                first_byte := end_byte - length(p_data);
                RETURN;
            END IF;
            INSERT INTO {{s}}.files (ns, path, size) VALUES (p_ns, p_path, 0)
                ON CONFLICT DO NOTHING;
            SELECT f.size, f.last_byte INTO old_size, old_last
                FROM {{s}}.files f WHERE f.ns = p_ns AND f.path = p_path FOR UPDATE;
            -- After a torn earlier write (no final newline), a newline first.
            piece := CASE WHEN old_size = 0 OR old_last = 10 THEN p_data
                          ELSE decode('0a', 'hex') || p_data END;
            IF length(piece) > 0 THEN
                INSERT INTO {{s}}.chunks (ns, path, start, data, append_key)
                    VALUES (p_ns, p_path, old_size, piece, p_key);
            END IF;
            UPDATE {{s}}.files SET size = size + length(piece),
                last_byte = CASE WHEN length(piece) > 0
                                 THEN get_byte(piece, length(piece) - 1) ELSE last_byte END,
                version = version + 1, mtime = clock_timestamp()
                WHERE ns = p_ns AND path = p_path;
            end_byte := old_size + length(piece);
            first_byte := end_byte - length(p_data);
        END
        $$"""
_LOOKUP_CHUNK: Final = (
    "            -- A retry of an append that was committed: where it went, not a second copy.\n"
    "            SELECT c.start + length(c.data) INTO end_byte\n"
    "                FROM {s}.chunks c WHERE c.append_key = p_key;\n"
)
_LOOKUP_KEYS: Final = (
    "            -- A retry of an append that was committed: where it went, not a second copy.\n"
    "            -- The chunk first: a rewrite moves its key to write_keys in one\n"
    "            -- transaction, and each statement here sees what was committed before it.\n"
    "            SELECT c.start + length(c.data) INTO end_byte\n"
    "                FROM {s}.chunks c WHERE c.append_key = p_key;\n"
    "            IF NOT FOUND THEN\n"
    "                SELECT k.end_byte INTO end_byte FROM {s}.write_keys k WHERE k.key = p_key;\n"
    "            END IF;\n"
)

# Each migration is a list of statements; {s} is the schema. Never edit a released one: add
# the next version instead.
MIGRATIONS: Final[dict[int, list[str]]] = {
    1: [
        """CREATE TABLE {s}.namespaces (
            ns text PRIMARY KEY,
            created_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
        "CREATE SEQUENCE {s}.generations",
        """CREATE TABLE {s}.files (
            ns text NOT NULL,
            path text NOT NULL,
            size bigint NOT NULL DEFAULT 0,
            version bigint NOT NULL DEFAULT 1,
            generation bigint NOT NULL DEFAULT nextval('{s}.generations'),
            mtime timestamptz NOT NULL DEFAULT clock_timestamp(),
            last_byte smallint,
            writer uuid,
            PRIMARY KEY (ns, path)
        )""",
        "CREATE INDEX files_prefix ON {s}.files (ns, path text_pattern_ops)",
        """CREATE TABLE {s}.chunks (
            ns text NOT NULL,
            path text NOT NULL,
            start bigint NOT NULL,
            data bytea NOT NULL,
            append_key uuid,
            PRIMARY KEY (ns, path, start),
            FOREIGN KEY (ns, path) REFERENCES {s}.files (ns, path)
                ON DELETE CASCADE ON UPDATE CASCADE
        )""",
        "CREATE UNIQUE INDEX chunks_append_key ON {s}.chunks (append_key) "
        "WHERE append_key IS NOT NULL",
        """CREATE TABLE {s}.locks (
            ns text NOT NULL,
            name text NOT NULL,
            token uuid NOT NULL,
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (ns, name)
        )""",
    ],
    # The search index (memdir.index._postgres): derived from the files, rebuilt by
    # `memdir index --full`. Row ids are file id << 24 | line, as in the SQLite index.
    2: [
        "CREATE SEQUENCE {s}.index_file_ids",
        "CREATE SEQUENCE {s}.index_stamps",
        """CREATE TABLE {s}.index_files (
            ns text NOT NULL,
            id bigint NOT NULL DEFAULT nextval('{s}.index_file_ids') PRIMARY KEY,
            path text NOT NULL,
            mtime_ns bigint NOT NULL,
            size bigint NOT NULL,
            digest bytea NOT NULL,
            day int,
            archived boolean NOT NULL,
            curated boolean NOT NULL,
            units int NOT NULL DEFAULT 0,
            words bigint NOT NULL DEFAULT 0,
            stamp bigint NOT NULL DEFAULT nextval('{s}.index_stamps'),
            UNIQUE (ns, path)
        )""",
        "CREATE INDEX index_files_stamp ON {s}.index_files (ns, stamp)",
        """CREATE TABLE {s}.index_units (
            ns text NOT NULL,
            id bigint NOT NULL,
            line_end int NOT NULL,
            head int NOT NULL,
            words int NOT NULL,
            content text NOT NULL,
            terms tsvector NOT NULL,
            PRIMARY KEY (ns, id)
        )""",
        "CREATE INDEX index_units_terms ON {s}.index_units USING gin (terms)",
        """CREATE TABLE {s}.index_headings (
            ns text NOT NULL,
            id bigint NOT NULL,
            text text NOT NULL,
            PRIMARY KEY (ns, id)
        )""",
        """CREATE TABLE {s}.index_settings (
            ns text NOT NULL,
            name text NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (ns, name)
        )""",
        """CREATE TABLE {s}.index_vectors (
            ns text NOT NULL,
            key bytea NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY (ns, key)
        )""",
    ],
    # The planner picks a GIN scan for a rare lexeme and a walk of the primary key for a
    # common one by the lexemes' frequencies: keep ten times more of them in the statistics.
    3: ["ALTER TABLE {s}.index_units ALTER COLUMN terms SET STATISTICS 1000"],
    # An append in one statement (memdir.store.postgres.PostgresStore.append): one round trip,
    # and the file row's lock is held only while the server runs it and commits, never while
    # a client's next statement is on its way.
    4: [
        _APPEND_CHUNK.format(create="CREATE FUNCTION", lookup=_LOOKUP_CHUNK),
    ],
    # Posting lists (memdir.index._postgres): one row per lexeme of a unit, so a term's
    # newest rows are a backward walk of the primary key that never reads the units, as FTS5
    # walks its posting lists. An insert of units writes their postings in the same statement
    # (the trigger reads the stored tsvector, so both hold the same lexemes); the engine
    # deletes them with their units. The GIN index is then unused: candidates are checked
    # against their tsvector row by row.
    5: [
        # Units written meanwhile by a host still on version 4 would get no postings: they
        # wait (reads go on) until the upgrade commits, and then the trigger writes theirs.
        "LOCK TABLE {s}.index_units IN SHARE MODE",
        """CREATE TABLE {s}.index_postings (
            ns text NOT NULL,
            lexeme text NOT NULL,
            id bigint NOT NULL,
            PRIMARY KEY (ns, lexeme, id)
        )""",
        "ALTER TABLE {s}.index_postings ALTER COLUMN lexeme SET STATISTICS 1000",
        "INSERT INTO {s}.index_postings (ns, lexeme, id)"
        " SELECT u.ns, l.lexeme, u.id FROM {s}.index_units u,"
        " unnest(tsvector_to_array(u.terms)) AS l(lexeme)",
        """CREATE FUNCTION {s}.index_postings_add() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO {s}.index_postings (ns, lexeme, id)
                SELECT n.ns, l.lexeme, n.id FROM added n,
                    unnest(tsvector_to_array(n.terms)) AS l(lexeme);
            RETURN NULL;
        END
        $$""",
        "CREATE TRIGGER index_units_postings AFTER INSERT ON {s}.index_units"
        " REFERENCING NEW TABLE AS added FOR EACH STATEMENT"
        " EXECUTE FUNCTION {s}.index_postings_add()",
        "DROP INDEX {s}.index_units_terms",
        # Statistics now, not when autovacuum gets to it: until then the planner guessed
        # from an empty table (searches 8x slower for a minute after an upgrade of 1M lines).
        "ANALYZE {s}.index_postings",
    ],
    # Write keys (memdir.store.postgres._keys): a rewrite, a compare-and-swap, a create or a
    # delete records its key in the same transaction, and a rewrite or delete of a file keeps
    # the keys of the appends it removes (with where each ended), so that a write whose answer
    # was lost is found by its key, never made twice. Kept a day.
    6: [
        """CREATE TABLE {s}.write_keys (
            key uuid PRIMARY KEY,
            end_byte bigint,
            made_at timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
        "CREATE INDEX write_keys_made_at ON {s}.write_keys (made_at)",
        _APPEND_CHUNK.format(create="CREATE OR REPLACE FUNCTION", lookup=_LOOKUP_KEYS),
    ],
    # The API keys of `memdir serve` (memdir.server.auth._postgres): only a SHA-256 digest of
    # each secret. Every create and revoke bumps the one generation row in its transaction;
    # each server process polls it about once a second and forgets the keys it had cached.
    7: [
        """CREATE TABLE {s}.api_keys (
            key_id text PRIMARY KEY,
            secret_sha256 bytea NOT NULL,
            tenant text NOT NULL,
            namespace_prefix text NOT NULL,
            namespace text,
            scope text NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
            label text NOT NULL DEFAULT '',
            created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            expires_at timestamptz,
            revoked_at timestamptz,
            last_used_at timestamptz
        )""",
        "CREATE INDEX api_keys_tenant ON {s}.api_keys (tenant)",
        """CREATE TABLE {s}.api_key_changes (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            generation bigint NOT NULL
        )""",
        "INSERT INTO {s}.api_key_changes (generation) VALUES (0)",
    ],
    # The idempotency keys of `memdir serve` (memdir.server._idem_pg): per tenant, the claim
    # of a write (its holder's token, until when it holds, what it was about to write) and then
    # its stored answer, kept a day. Quotas sum the sizes of a tenant's files by name prefix.
    8: [
        """CREATE TABLE {s}.idempotency (
            tenant text NOT NULL,
            key text NOT NULL,
            fingerprint bytea NOT NULL,
            token uuid NOT NULL,
            state text NOT NULL CHECK (state IN ('running', 'done')),
            locked_until timestamptz NOT NULL,
            expires_at timestamptz NOT NULL,
            intent jsonb,
            status int,
            headers jsonb,
            body bytea,
            PRIMARY KEY (tenant, key)
        )""",
        "CREATE INDEX idempotency_expiry ON {s}.idempotency (expires_at)",
        "CREATE INDEX files_ns_pattern ON {s}.files (ns text_pattern_ops) INCLUDE (size)",
        "CREATE INDEX namespaces_pattern ON {s}.namespaces (ns text_pattern_ops)",
    ],
    # An idempotency record keeps the namespace its request wrote into ('': none; NULL: a
    # record made before, namespace unknown), so a forget or a namespace delete finds the
    # records to erase; an erased record ('erased': no content) answers a retry with 410.
    9: [
        "ALTER TABLE {s}.idempotency ADD COLUMN ns text",
        "ALTER TABLE {s}.idempotency DROP CONSTRAINT idempotency_state_check",
        "ALTER TABLE {s}.idempotency ADD CONSTRAINT idempotency_state_check"
        " CHECK (state IN ('running', 'done', 'erased'))",
        "CREATE INDEX idempotency_ns ON {s}.idempotency (ns)",
    ],
}
SCHEMA_VERSION: Final = max(MIGRATIONS)


def migrate(transaction: Callable[[Callable[[Any], Any]], Any], schema: str) -> int:
    """Bring ``schema`` up to :data:`SCHEMA_VERSION`; returns how many migrations ran.

    Args:
        transaction: runs a function with a cursor inside one transaction (and retries it on
            a dropped connection).
        schema: the schema name (created if missing).
    """
    ident = sql.Identifier(schema)

    def step(cur: Any) -> int:
        # One lock for every host: the first to get it applies what is missing, the others
        # wait, then find nothing left to do.
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"memdir:{schema}",))
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        cur.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.migrations ("
                "version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(ident)
        )
        cur.execute(sql.SQL("SELECT version FROM {}.migrations").format(ident))
        done = {row[0] for row in cur.fetchall()}
        ran = 0
        for version in sorted(MIGRATIONS):
            if version in done:
                continue
            for statement in MIGRATIONS[version]:
                cur.execute(sql.SQL(statement).format(s=ident))
            cur.execute(
                sql.SQL("INSERT INTO {}.migrations (version) VALUES (%s)").format(ident),
                (version,),
            )
            ran += 1
        return ran

    result: int = transaction(step)
    return result


def ensure_migrated(db: Any) -> None:
    """Migrate the schema of ``db`` (a :class:`~memdir.store.postgres._connect.Database`)
    unless this process did already."""
    if not db.migrated:
        migrate(db.transaction, db.schema)
        db.migrated = True
