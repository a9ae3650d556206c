"""OpenAIEmbedder: the /embeddings protocol, retries, errors, and hybrid search through it."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from memdir.embeddings import Embedder, OpenAIEmbedder, embedder_from_string
from memdir.errors import ConfigError, ModelError
from memdir.index import MemoryIndex
from memdir.models import _http
from memdir.workspace import Workspace

np = pytest.importorskip("numpy")

WORDS = [("database", "数据库"), ("migration", "迁移"), ("cat", "猫")]


def _vector(text: str) -> list[float]:
    low = text.lower()
    return [float(sum(low.count(w) for w in words)) + 0.01 for words in WORDS]


def _server(
    seen: list[dict[str, object]], *, fail_first: int = 0, status: int = 429
) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append({"url": str(request.url), "auth": request.headers.get("authorization"), **body})
        if len(seen) <= fail_first:
            return httpx.Response(status, json={"error": {"message": "slow down"}})
        data = [{"index": i, "embedding": _vector(t)} for i, t in enumerate(body["input"])]
        return httpx.Response(200, json={"data": list(reversed(data))})

    return handle


def _embedder(seen: list[dict[str, object]], **kwargs: object) -> OpenAIEmbedder:
    client = httpx.Client(transport=httpx.MockTransport(_server(seen, **kwargs)))  # type: ignore[arg-type]
    return OpenAIEmbedder(
        "toy-embed", base_url="http://embed.test/v1", api_key="k", client=client, batch_size=2
    )


def test_probes_the_size_batches_and_keeps_the_order() -> None:
    seen: list[dict[str, object]] = []
    embedder = _embedder(seen)
    assert isinstance(embedder, Embedder)
    assert embedder.dim == len(WORDS) and embedder.name == "openai:toy-embed"
    assert seen[0]["input"] == ["dimension probe"]
    vectors = embedder.embed_documents(["a cat", "数据库迁移", "database"])
    assert vectors.shape == (3, len(WORDS)) and vectors.dtype == np.float32
    assert vectors[0][2] > 1 and vectors[1][1] > 1 and vectors[2][0] > 1  # not reversed
    assert [s["input"] for s in seen[1:]] == [["a cat", "数据库迁移"], ["database"]]
    assert seen[1]["url"] == "http://embed.test/v1/embeddings"
    assert seen[1]["auth"] == "Bearer k" and seen[1]["model"] == "toy-embed"
    assert embedder.embed_query("cat").shape == (len(WORDS),)
    with pytest.raises(ConfigError, match="not one string"):
        embedder.embed_documents("cat")


def test_known_models_need_no_probe_and_dimensions_are_sent() -> None:
    seen: list[dict[str, object]] = []
    client = httpx.Client(transport=httpx.MockTransport(_server(seen)))
    embedder = OpenAIEmbedder("text-embedding-3-small", api_key="k", dimensions=5, client=client)
    assert seen == [] and embedder.dim == 5
    assert embedder.name == "openai:text-embedding-3-small/5"
    embedder.embed_query("cat")
    assert seen[0]["dimensions"] == 5
    assert OpenAIEmbedder("nomic-embed-text", base_url="http://x", client=client).dim == 768


def test_rate_limits_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(_http, "_sleep_sync", waits.append)
    seen: list[dict[str, object]] = []
    embedder = _embedder(seen, fail_first=2)
    assert embedder.dim == len(WORDS)
    assert len(waits) == 2 and len(seen) == 3


def test_errors_are_model_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "_sleep_sync", lambda _: None)
    with pytest.raises(ModelError, match="HTTP 401: slow down"):
        _embedder([], fail_first=1, status=401)

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"index": 0}]})

    client = httpx.Client(transport=httpx.MockTransport(broken))
    with pytest.raises(ModelError, match="no usable embeddings"):
        OpenAIEmbedder("toy", base_url="http://x", client=client)

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    client = httpx.Client(transport=httpx.MockTransport(down))
    with pytest.raises(ModelError, match="cannot reach ollama"):
        OpenAIEmbedder("toy", base_url="http://x", provider="ollama", client=client)


def test_bad_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIEmbedder("text-embedding-3-small")
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIEmbedder("m", base_url="ftp://x")
    with pytest.raises(ConfigError, match="dimensions"):
        OpenAIEmbedder("text-embedding-3-small", api_key="k", dimensions=0)
    with pytest.raises(ConfigError, match="model"):
        OpenAIEmbedder(" ", api_key="k")
    with pytest.raises(ConfigError, match="timeout"):
        OpenAIEmbedder("text-embedding-3-small", api_key="k", timeout=0)


def test_embedder_from_string(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    ollama = embedder_from_string("ollama:nomic-embed-text")  # known size: no request
    assert isinstance(ollama, OpenAIEmbedder)
    assert ollama.base_url == "http://localhost:11434/v1" and ollama.api_key is None
    assert ollama.name == "ollama:nomic-embed-text" and ollama.dim == 768
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        embedder_from_string("openai:text-embedding-3-small")
    with pytest.raises(ConfigError, match="DASHSCOPE_API_KEY"):
        embedder_from_string("dashscope:text-embedding-v3")
    with pytest.raises(ConfigError, match="no model name"):
        embedder_from_string("ollama:")
    with pytest.raises(ConfigError, match="known: e5"):
        embedder_from_string("cohere:embed")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    openai = embedder_from_string("openai:text-embedding-3-large")
    assert isinstance(openai, OpenAIEmbedder) and openai.dim == 3072


def test_hybrid_search_through_an_http_embedder(ws: Workspace) -> None:
    ws.write_text("memory/2026-11-29.md", "- 我们讨论了数据库迁移方案\n- the cat slept\n")
    seen: list[dict[str, object]] = []
    with MemoryIndex(ws, embedder=_embedder(seen)) as index:
        index.index_all_from_workspace()
        assert index.embed_pending().embedded == 2
        hits = index.search("database migration plan", 3)
    assert hits[0].content == "- 我们讨论了数据库迁移方案"


def test_search_stays_lexical_while_the_service_is_down(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ws.write_text("memory/2026-11-29.md", "- database migration\n")
    seen: list[dict[str, object]] = []
    embedder = _embedder(seen)
    with MemoryIndex(ws, embedder=embedder) as index:
        index.index_all_from_workspace()
        index.embed_pending()

        def down(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("refused")

        embedder._client = httpx.Client(transport=httpx.MockTransport(down))
        monkeypatch.setattr(_http, "_sleep_sync", lambda _: None)
        hits = index.search("database", 3)
    assert [h.content for h in hits] == ["- database migration"]
    assert "lexical only for this query" in caplog.text
