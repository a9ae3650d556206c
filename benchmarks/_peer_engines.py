"""Two peer search engines for the scale benchmark, configured as users run them.

* ``tantivy``: the ``tantivy`` package (an in-process Rust engine), one document per line, the
  line pre-tokenised by rjieba (words joined by spaces) so Chinese is searchable, the ``default``
  tokenizer, the query's word tokens OR-ed through ``parse_query_lenient``;
* ``bm25s``: one document per line, rjieba first, then ``bm25s.tokenize`` with English and
  Chinese stopwords and PyStemmer's English stemmer (bm25s' own recommended setup).

Both need ``pip install tantivy bm25s PyStemmer rjieba`` (``pip install -e '.[bench]'``); the
benchmark leaves out an engine whose package is missing and says so.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from _scale_engines import Hit, dir_size
from memdir.workspace import Workspace

__all__ = ["Bm25sEngine", "TantivyEngine", "missing_packages"]

_WORD = re.compile(r"\w+")
_NEEDS = {"tantivy": ("tantivy", "rjieba"), "bm25s": ("bm25s", "Stemmer", "rjieba")}


def missing_packages(name: str) -> list[str]:
    """The packages engine ``name`` needs that are not installed."""
    return [pkg for pkg in _NEEDS[name] if importlib.util.find_spec(pkg) is None]


def _segment(text: str) -> str:
    import rjieba

    return " ".join(word for word in rjieba.cut(text) if word.strip())


def _lines(ws: Workspace, rel: str) -> list[tuple[int, str]]:
    text = ws.read_text(rel)
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


class TantivyEngine:
    """tantivy over rjieba-segmented lines, ``default`` tokenizer (or ``en_stem``: English
    stemming), OR query."""

    name = "tantivy"

    def __init__(self, ws: Workspace, directory: Path, *, tokenizer: str = "default") -> None:
        import tantivy

        self._ws = ws
        self._dir = directory
        if tokenizer != "default":
            self.name = f"tantivy-{tokenizer}"
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("body", stored=False, tokenizer_name=tokenizer)
        builder.add_text_field("path", stored=True, tokenizer_name="raw")
        builder.add_unsigned_field("line", stored=True, indexed=True)
        self._schema = builder.build()
        self._index: Any = None
        self._writer: Any = None
        self._searcher: Any = None

    def _open(self) -> None:
        import tantivy

        if self._dir.exists():
            shutil.rmtree(self._dir)
        self._dir.mkdir(parents=True)
        self._index = tantivy.Index(self._schema, path=str(self._dir))
        self._writer = self._index.writer()

    def _add(self, rel: str) -> int:
        import tantivy

        count = 0
        for number, line in _lines(self._ws, rel):
            doc = tantivy.Document(body=_segment(line), path=rel)
            doc.add_unsigned("line", number)
            self._writer.add_document(doc)
            count += 1
        return count

    def _reload(self) -> None:
        self._writer.commit()
        self._writer.wait_merging_threads()
        self._writer = self._index.writer()
        self._index.reload()
        self._searcher = self._index.searcher()

    def build(self) -> int:
        self._open()
        rows = sum(self._add(rel) for rel in self._ws.memory_files())
        self._reload()
        return rows

    def search(self, query: str, limit: int) -> list[Hit]:
        # Word tokens only: the query parser reads ``:``, quotes, ``-`` and ``AND`` as syntax.
        words = _WORD.findall(_segment(query))
        if not words:
            return []
        parsed, _errors = self._index.parse_query_lenient(" ".join(words).lower(), ["body"])
        out: list[Hit] = []
        for _score, address in self._searcher.search(parsed, limit).hits:
            doc = self._searcher.doc(address)
            number = int(doc["line"][0])
            out.append((str(doc["path"][0]), number, number))
        return out

    def reindex(self, rel: str) -> None:
        import tantivy

        self._writer.delete_documents_by_query(tantivy.Query.term_query(self._schema, "path", rel))
        self._add(rel)
        self._writer.commit()
        self._index.reload()
        self._searcher = self._index.searcher()

    def size_bytes(self) -> int:
        return dir_size(self._dir)

    def close(self) -> None:
        self._writer = None
        self._searcher = None
        self._index = None


class Bm25sEngine:
    """bm25s over rjieba-segmented lines, stopwords and the English stemmer; rebuilt to update."""

    name = "bm25s"

    def __init__(self, ws: Workspace, directory: Path) -> None:
        self._ws = ws
        self._dir = directory
        self._docs: list[tuple[str, int]] = []
        self._retriever: Any = None
        self._stemmer: Any = None
        self._stopwords: list[str] = []

    def _tokenize(self, texts: list[str]) -> Any:
        import bm25s

        return bm25s.tokenize(
            [_segment(t) for t in texts],
            stopwords=self._stopwords,
            stemmer=self._stemmer,
            show_progress=False,
        )

    def build(self) -> int:
        import bm25s
        import Stemmer
        from bm25s.stopwords import STOPWORDS_CHINESE, STOPWORDS_EN

        self._stemmer = Stemmer.Stemmer("english")
        self._stopwords = [*STOPWORDS_EN, *STOPWORDS_CHINESE]
        self._docs, texts = [], []
        for rel in self._ws.memory_files():
            for number, line in _lines(self._ws, rel):
                self._docs.append((rel, number))
                texts.append(line)
        self._retriever = bm25s.BM25()
        self._retriever.index(self._tokenize(texts), show_progress=False)
        if self._dir.exists():
            shutil.rmtree(self._dir)
        self._retriever.save(str(self._dir))
        return len(self._docs)

    def search(self, query: str, limit: int) -> list[Hit]:
        tokens = self._tokenize([query])
        if not tokens.vocab:
            return []
        k = min(limit, len(self._docs))
        found, scores = self._retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        out: list[Hit] = []
        for doc, score in zip(found[0], scores[0], strict=True):
            if score <= 0:
                continue  # bm25s pads with zero-score documents
            rel, number = self._docs[int(doc)]
            out.append((rel, number, number))
        return out

    def reindex(self, rel: str) -> None:
        self.build()  # bm25s has no incremental update

    def size_bytes(self) -> int:
        return dir_size(self._dir)

    def close(self) -> None:
        self._retriever = None


def peer_directory(root: Path, name: str) -> Path:
    """A fresh directory for a peer's index inside the benchmark's temporary workspace."""
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root)) / "index"
