"""Cost of hybrid (lexical + vector) search at scale, side by side with lexical search.

Embedding a large synthetic corpus with a real model would take hours on two cores (the
bundled e5 embedder does about 27 lines per second), and the vectors' values do not change
the cost of the search path. So the corpus is embedded by a stand-in that returns a
pseudo-random unit vector per text (same dimension as e5: 384), and the real embedder is timed
on its own, for the one thing a search asks of it: embedding the query.

Reported, for the same corpus and queries as ``scale.py`` (2-5 terms) in one run:

* ``embed_pending`` throughput of the store (stand-in vectors: hashing, SQLite writes);
* the first hybrid search (loads every file's vectors into memory) and the process RSS;
* search p50 / p99 for lexical only, and hybrid without the query embedding;
* e5 query embedding p50 / p99 for short (2-5 terms) and long (a whole dialogue) queries.

Usage::

    python benchmarks/hybrid.py --lines 100000 [--queries 100] [--no-e5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _corpus import (
    CorpusSpec,
    TextPools,
    cached_corpus,
    default_cache_root,
    ledger_rels,
    load_pools,
)
from _scale_queries import make_queries
from memdir import MemoryIndex, Workspace
from memdir.index import _vectors

DIM = 384


class RandomEmbedder:
    """A pseudo-random unit vector per text (deterministic), at no model cost."""

    name = "random-384"
    dim = DIM
    min_similarity = -1.0  # every nearest line counts, as with a real query that matches

    def _one(self, text: str) -> Any:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        return vector / np.linalg.norm(vector)

    def embed_documents(self, texts: Sequence[str]) -> Any:
        return np.stack([self._one(t) for t in texts]) if texts else np.empty((0, DIM))

    def embed_query(self, text: str) -> Any:
        return self._one(text)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(
    lines: int,
    queries: int,
    e5: bool,
    *,
    pools: TextPools | None = None,
    cache_root: Path | None = None,
    lines_per_file: int = 2000,
) -> None:
    """Build the corpus, embed it with the stand-in, time both searches; print the results."""
    print(f"load average {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}")
    pools = pools or load_pools()
    spec = CorpusSpec(lines=lines, lines_per_file=lines_per_file)
    source = cached_corpus(pools, spec, cache_root or default_cache_root())
    with tempfile.TemporaryDirectory(prefix="memdir-hybrid-") as tmp:
        root = Path(tmp) / "ws"
        shutil.copytree(source / "memory", root / "memory")
        ws = Workspace(root, tz="UTC")
        rels = ledger_rels(spec)
        qs, _ = make_queries(root, rels, per_count=max(1, queries // 4), max_terms=5)
        texts = [q.text for q in qs if len(q.terms) >= 2]
        with MemoryIndex(ws, embedder=False) as lexical:
            started = time.perf_counter()
            lexical.index_all_from_workspace()
            print(f"{lines:,} lines indexed in {time.perf_counter() - started:.1f} s")
        with MemoryIndex(ws, embedder=RandomEmbedder()) as hybrid:
            stats = hybrid.embed_pending(batch_size=256)
            print(
                f"embed_pending (stand-in vectors): {stats.embedded:,} distinct lines in "
                f"{stats.seconds:.1f} s = {stats.embedded / stats.seconds:,.0f} lines/s; "
                f"vectors.db {(ws.index_dir / _vectors.VECTORS_DB).stat().st_size / 1e6:.0f} MB"
            )
            rss = _rss_mb()
            started = time.perf_counter()
            hybrid.search(texts[0], 10)
            print(
                f"first hybrid search (loads all vectors): {time.perf_counter() - started:.2f} s;"
                f" max RSS {rss:.0f} -> {_rss_mb():.0f} MB"
            )
            with MemoryIndex(ws, embedder=False) as lexical:
                lexical.search(texts[0], 10)
                lex_ms: list[float] = []
                hyb_ms: list[float] = []
                for _ in range(3):  # alternate, so that load changes hit both alike
                    for text in texts:
                        started = time.perf_counter()
                        lexical.search(text, 10)
                        lex_ms.append((time.perf_counter() - started) * 1000)
                        started = time.perf_counter()
                        hybrid.search(text, 10)
                        hyb_ms.append((time.perf_counter() - started) * 1000)
            print(f"search, 2-5 terms, top 10, {len(texts)} queries x 3 (p50 / p99 ms):")
            print(f"  lexical            {_pct(lex_ms, 0.5):7.2f} / {_pct(lex_ms, 0.99):7.2f}")
            print(
                f"  hybrid (stand-in)  {_pct(hyb_ms, 0.5):7.2f} / {_pct(hyb_ms, 0.99):7.2f}"
                "   (includes the stand-in's own query vector, ~0.05 ms)"
            )
    if e5:
        from memdir.embeddings import E5Embedder

        model = E5Embedder()
        long = " ".join(texts[:40])
        model.embed_query("warm up")
        for name, sample in (("short (2-5 terms)", texts), ("long (~40 queries)", [long] * 10)):
            ms = []
            for text in sample:
                started = time.perf_counter()
                model.embed_query(text)
                ms.append((time.perf_counter() - started) * 1000)
            print(
                f"e5 query embedding, {name}: p50 {statistics.median(ms):.1f} ms,"
                f" p99 {_pct(ms, 0.99):.1f} ms"
            )
    print(f"load average {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--no-e5", action="store_true", help="skip the e5 query timing")
    args = parser.parse_args(argv)
    run(args.lines, args.queries, not args.no_e5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
