"""The vector side of :class:`~memdir.index.MemoryIndex`: query vectors, fusion, embedding.

Vectors are computed in the background (:func:`embed_pending`), never by a search; a search
embeds only its query (bounded by :func:`memdir.embeddings.embedding_query`) and fuses the
nearest lines with the lexical ranking (:func:`fuse`).
"""

from __future__ import annotations

import math
import os
import threading
import time
import warnings
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memdir.embeddings import DEFAULT_MIN_SIMILARITY, check_min_similarity, embedding_query
from memdir.errors import ConfigError
from memdir.index._clauses import rank_fusion
from memdir.index._engine import Engine
from memdir.index._pg_vectors import PgVectors
from memdir.index._query import Term, is_conversation
from memdir.index._schema import LINE_BITS
from memdir.index._search import hit_of
from memdir.index._types import EmbedStats, SearchHit
from memdir.index._vectors import DenseIndex, VectorStore, file_texts, normalized
from memdir.store.ledger import normalize_bullet

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from memdir.embeddings import Embedder

__all__ = [
    "CONVERSATION_DENSE_WEIGHT",
    "DENSE_WEIGHT",
    "FUSION_DEPTH",
    "LEAD",
    "MIN_SIMILARITY_ENV",
    "RRF_K",
    "dense_weight",
    "embed_pending",
    "fuse",
    "lexical_rows",
    "min_similarity",
    "nearest",
    "query_vector",
    "vector_ranking",
]

FUSION_DEPTH = 50
"""Hybrid search fuses at least this many lexical and this many vector results."""
RRF_K = 10
"""Reciprocal rank fusion: a lexical result at rank r (1-based) adds ``1 / (RRF_K + r)``."""
DENSE_WEIGHT = 0.7
"""A vector result at rank r adds ``DENSE_WEIGHT / (RRF_K + r)``: the lexical ranking is the
stronger one wherever the query shares words with the memory (docs/benchmarks.md)."""
LEAD = 1.5
"""A lexical best line that scores at least ``LEAD`` times the second best leads the fused
ranking (a query that is not a conversation): the query's words point to it, and lines near
in meaning do not push it down (docs/benchmarks.md)."""
CONVERSATION_DENSE_WEIGHT = 1.0
""":data:`DENSE_WEIGHT` for a conversation (:func:`memdir.index._query.is_conversation`): its
many words dilute the lexical ranking, while its meaning is what an embedding captures."""
MIN_SIMILARITY_ENV = "MEMDIR_MIN_SIMILARITY"
"""Environment variable that replaces the similarity floor of every embedder."""


QUERY_CACHE_SIZE = 256
"""Query vectors kept per process (an agent asks the same thing again; a dialogue costs the
e5 embedder 0.2-0.5 s on a loaded two-core machine)."""
_QUERY_CACHE: OrderedDict[tuple[int, str], tuple[Embedder, npt.NDArray[np.float32]]] = OrderedDict()
_QUERY_LOCK = threading.Lock()


def query_vector(dense: DenseIndex, query: str) -> npt.NDArray[np.float32]:
    """The unit vector of ``query``; any embedder, built in or not, gets it bounded.

    The :data:`QUERY_CACHE_SIZE` most recent query vectors of each embedder are reused.

    Raises:
        ConfigError: the embedder returned a vector of the wrong shape.
        ModelError: an embedding service failed.
    """
    embedder = dense.embedder
    text = embedding_query(query)
    key = (id(embedder), text)
    with _QUERY_LOCK:
        cached = _QUERY_CACHE.get(key)
        if cached is not None and cached[0] is embedder:
            _QUERY_CACHE.move_to_end(key)
            return cached[1]
    vector = normalized(embedder.embed_query(text))
    if vector.shape != (embedder.dim,):
        raise ConfigError(
            f"embedder {embedder.name!r} returned a vector of shape {vector.shape} "
            f"for a query, expected ({embedder.dim},)"
        )
    vector.setflags(write=False)  # shared by every later search for the same words
    with _QUERY_LOCK:
        _QUERY_CACHE[key] = (embedder, vector)
        while len(_QUERY_CACHE) > QUERY_CACHE_SIZE:
            _QUERY_CACHE.popitem(last=False)
    return vector


_WARNED_ENV: set[str] = set()


def min_similarity(embedder: Embedder, query: str) -> float:
    """The cosine similarity a line found only by the vector ranking must reach for ``query``.

    ``$MEMDIR_MIN_SIMILARITY`` when set (a number from -1 to 1; another value is ignored with
    a warning), else the embedder's ``similarity_floor(query)`` (the bundled e5 has one),
    else its ``min_similarity`` attribute, else :data:`DEFAULT_MIN_SIMILARITY`.

    Raises:
        ConfigError: the embedder declares a floor that is not a number from -1 to 1.
    """
    text = os.environ.get(MIN_SIMILARITY_ENV, "").strip()
    if text:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if -1 <= value <= 1:
            return value
        if text not in _WARNED_ENV:
            _WARNED_ENV.add(text)
            warnings.warn(
                f"{MIN_SIMILARITY_ENV}={text!r} is ignored: it must be a number from -1 to 1",
                RuntimeWarning,
                stacklevel=2,
            )
    floor_of = getattr(embedder, "similarity_floor", None)
    if callable(floor_of):
        return check_min_similarity(
            floor_of(query), f"embedder {embedder.name!r}: similarity_floor"
        )
    declared = getattr(embedder, "min_similarity", None)
    if declared is None:
        return DEFAULT_MIN_SIMILARITY
    return check_min_similarity(declared, f"embedder {embedder.name!r}: min_similarity")


def vector_ranking(
    found: Sequence[list[tuple[int, float]]], lexical: set[int], floor: float
) -> tuple[list[int], set[int]]:
    """The vector side of a fusion: row ids best first, and those not to be shown.

    ``found`` holds the nearest units of each query vector (the query, then each question
    of a compound question), as ``(row id, similarity)``; several rankings are fused by rank
    (:func:`memdir.index._clauses.rank_fusion`). A unit the lexical ranking did not find
    (its row id is not in ``lexical``) is shown only if its similarity to one of the vectors
    reaches ``floor``: an embedder finds a nearest line for any query, however unrelated.
    The units below it keep their places in the ranking, so the lines shown are ranked as
    without a floor.
    """
    best: dict[int, float] = {}
    for near in found:
        for rowid, sim in near:
            best[rowid] = max(sim, best.get(rowid, sim))
    hidden = {rowid for rowid, sim in best.items() if sim < floor and rowid not in lexical}
    if len(found) == 1:
        return [rowid for rowid, _ in found[0]], hidden
    return [rowid for rowid, _ in rank_fusion([[r for r, _ in near] for near in found])], hidden


def nearest(
    dense: DenseIndex, engine: Engine, query: npt.NDArray[np.float32], k: int
) -> list[tuple[int, float]]:
    """The ``k`` units most similar to ``query``, as ``(row id, similarity)``: ranked by
    pgvector in a PostgreSQL database that has it, else by :meth:`DenseIndex.search`.
    """
    if isinstance(dense.store, PgVectors):
        found = dense.store.nearest(dense.embedder, engine, query, k)
        if found is not None:
            return found
    return dense.search(engine, query, k)


def embed_pending(
    dense: DenseIndex,
    store: VectorStore | PgVectors,
    run: Callable[[Callable[[Engine], dict[bytes, str]]], dict[bytes, str]],
    *,
    max_seconds: float | None,
    batch_size: int,
    progress: Callable[[int, int], None] | None,
) -> EmbedStats:
    """Embed the lines that have no vector yet (see :meth:`MemoryIndex.embed_pending`).

    ``run`` runs a read of the index (and heals a damaged one).
    """
    embedder = dense.embedder
    started = time.perf_counter()

    def collect(engine: Engine) -> dict[bytes, str]:
        with engine.snapshot():
            files = sorted(
                engine.files_by_id().values(),
                key=lambda info: (not info.curated, -(info.day or 0), -info.id),
            )
            out: dict[bytes, str] = {}
            pages: dict[bytes, str] = {}  # the passages of units cut into several
            for info in files:
                passages = file_texts(embedder, engine, info)
                counts = Counter(rowid for rowid, _, _ in passages)
                for rowid, key, text in passages:
                    (pages if counts[rowid] > 1 else out)[key] = text
            # A unit that fits one passage first (a fact, a person's message): pages of an
            # answer add little to the vector ranking and cost the most to embed.
            out.update((key, text) for key, text in pages.items() if key not in out)
            return out

    texts = run(collect)
    missing = store.missing(texts)
    pending = [(key, text) for key, text in texts.items() if key in missing]
    done = 0
    for i in range(0, len(pending), batch_size):
        if max_seconds is not None and time.perf_counter() - started >= max_seconds:
            break
        batch = pending[i : i + batch_size]
        vectors = normalized(embedder.embed_documents([text for _, text in batch]))
        if vectors.shape != (len(batch), embedder.dim):
            raise ConfigError(
                f"embedder {embedder.name!r} returned vectors of shape {vectors.shape} "
                f"for {len(batch)} texts, expected ({len(batch)}, {embedder.dim})"
            )
        store.add([(key, row.tobytes()) for (key, _), row in zip(batch, vectors, strict=True)])
        done += len(batch)
        if progress is not None:
            progress(done, len(pending))
    left = len(pending) - done
    if max_seconds != 0 and isinstance(store, PgVectors):
        store.mirror()  # vectors stored without pgvector join its copy
    pruned = 0
    if left == 0 and store.count() != len(texts):
        pruned = store.prune(set(texts))
    return EmbedStats(
        embedded=done,
        pending=left,
        total=len(texts),
        removed=pruned,
        seconds=time.perf_counter() - started,
    )


def dense_weight(terms: Sequence[Term]) -> float:
    """How much the vector ranking counts in the fusion for a query of ``terms``
    (:func:`memdir.index._query.analyze_query`; :data:`DENSE_WEIGHT`)."""
    return CONVERSATION_DENSE_WEIGHT if is_conversation(terms) else DENSE_WEIGHT


def lexical_rows(engine: Engine, lexical: Sequence[SearchHit]) -> list[int]:
    """The row ids of ``lexical`` hits, in order."""
    ids = {info.path: file_id for file_id, info in engine.files_by_id().items()}
    return [ids[hit.path] << LINE_BITS | hit.line_number for hit in lexical]


def fuse(
    engine: Engine,
    lexical: list[SearchHit],
    near: Sequence[int],
    limit: int,
    *,
    weight: float = DENSE_WEIGHT,
    rows: Sequence[int] | None = None,
    hidden: set[int] | frozenset[int] = frozenset(),
    lead: bool = True,
) -> list[SearchHit]:
    """Reciprocal rank fusion of the lexical hits and the vector ranking ``near`` (row ids,
    :func:`vector_ranking`).

    ``weight`` scales the vector ranking (:func:`dense_weight`); ``rows``: the row ids of
    the lexical hits when known (:func:`lexical_rows`); ``hidden``: row ids ranked but not
    returned (below the similarity floor); ``lead``: a lexical best line far ahead of the
    second (:data:`LEAD`) stays first.
    """
    scores: dict[int, float] = {}
    hits: dict[int, SearchHit] = {}
    ids = lexical_rows(engine, lexical) if rows is None else rows
    for rank, (rowid, hit) in enumerate(zip(ids, lexical, strict=True), start=1):
        hits[rowid] = hit
        scores[rowid] = 1.0 / (RRF_K + rank)
    for rank, rowid in enumerate(near, start=1):
        scores[rowid] = scores.get(rowid, 0.0) + weight / (RRF_K + rank)
    order = [
        rowid
        for rowid in sorted(scores, key=lambda rowid: (-scores[rowid], -rowid))
        if rowid not in hidden
    ]
    if lead and len(lexical) > 1 and 0 < LEAD * lexical[1].score <= lexical[0].score:
        order.remove(ids[0])
        order.insert(0, ids[0])
        scores[ids[0]] = max(scores[rowid] for rowid in order)  # the scores stay in order
    missing = [rowid for rowid in order if rowid not in hits]
    for row in engine.fetch(missing):
        hits[row.rowid] = hit_of(row, 0.0)
    out: list[SearchHit] = []
    seen: set[str] = set()
    for rowid in order:
        if rowid not in hits:
            continue  # a row deleted meanwhile
        hit = hits[rowid]
        text = normalize_bullet(hit.content)
        if text in seen:
            continue  # an identical line, compared as the lexical ranking compares them
        seen.add(text)
        out.append(replace(hit, score=round(scores[rowid], 6)))
        if len(out) == limit:
            break
    return out
