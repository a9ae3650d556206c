"""An embedder wrapper that keeps every vector it computes in a SQLite file.

Measuring a change to the fusion or to what is embedded re-runs the same sets many times;
with ``retrieval.py --embedder e5 --embed-cache FILE`` only texts not seen before are
embedded again (the 5,882 LoCoMo lines cost e5 five to nine minutes per run). Documents and
queries are kept apart: e5 embeds them with different prefixes.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memdir.embeddings import Embedder

__all__ = ["CachedEmbedder"]


class CachedEmbedder:
    """``embedder`` with its vectors kept in ``path`` (same name, dimension and similarity
    floor)."""

    def __init__(self, embedder: Embedder, path: Path) -> None:
        self.inner = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self.min_similarity: float | None = getattr(embedder, "min_similarity", None)
        floor_of = getattr(embedder, "similarity_floor", None)
        if callable(floor_of):
            self.similarity_floor = floor_of
        # long units are cut into passages as the wrapped embedder would cut them
        size = getattr(embedder, "passage_tokens", None)
        if size is not None:
            self.passage_tokens = size
        count = getattr(embedder, "count_tokens", None)
        if callable(count):
            self.count_tokens = count
        self._db = sqlite3.connect(path, timeout=60)
        self._db.execute("CREATE TABLE IF NOT EXISTS v(key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        self.computed = 0  # texts the wrapped embedder was given

    def _key(self, kind: str, text: str) -> bytes:
        data = f"{self.name}\0{kind}\0{text}".encode()
        return hashlib.blake2b(data, digest_size=16).digest()

    def _get(self, keys: list[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            found.update(self._db.execute(f"SELECT key, vec FROM v WHERE key IN ({marks})", chunk))
        return found

    def embed_documents(self, texts: Sequence[str]) -> Any:
        """Vectors of ``texts``, computed only for those not in the file."""
        import numpy as np

        keys = [self._key("d", text) for text in texts]
        found = self._get(keys)
        todo = [i for i, key in enumerate(keys) if key not in found]
        if todo:
            fresh = np.asarray(self.inner.embed_documents([texts[i] for i in todo]), np.float32)
            rows = [(keys[i], fresh[n].tobytes()) for n, i in enumerate(todo)]
            self._db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)", rows)
            self._db.commit()
            found.update(rows)
            self.computed += len(todo)
        return np.stack([np.frombuffer(found[key], np.float32) for key in keys])

    def embed_query(self, text: str) -> Any:
        """The vector of one query, computed once."""
        import numpy as np

        key = self._key("q", text)
        row = self._get([key]).get(key)
        if row is None:
            vector = np.asarray(self.inner.embed_query(text), np.float32)
            self._db.execute("INSERT OR REPLACE INTO v VALUES (?, ?)", (key, vector.tobytes()))
            self._db.commit()
            self.computed += 1
            return vector
        return np.frombuffer(row, np.float32)
