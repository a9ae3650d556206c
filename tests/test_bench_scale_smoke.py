"""Smoke test of the scale benchmark: corpus generator and all three engines on ~2,000 lines."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> dict[str, ModuleType]:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCHMARKS))
        names = ("_corpus", "_scale_report", "scale", "_peer_engines")
        return {name: importlib.import_module(name) for name in names}


@pytest.fixture(scope="module")
def pools(bench: dict[str, ModuleType]) -> object:
    return bench["_corpus"].load_pools(max_stdlib_files=30)


def test_corpus_is_deterministic_and_mixed(bench: dict[str, ModuleType], pools: object) -> None:
    corpus = bench["_corpus"]
    spec = corpus.CorpusSpec(lines=2_500, lines_per_file=2_000)
    assert spec.files == 2
    first = corpus.generate_file(pools, spec, 0)
    assert first == corpus.generate_file(pools, spec, 0)
    assert first != corpus.generate_file(pools, spec, 0, variant=1)
    assert first != corpus.generate_file(pools, corpus.CorpusSpec(lines=2_500, seed=7), 0)
    lines = [line for line in first.splitlines() if line]
    assert len(lines) == 2_000
    assert len([line for line in corpus.generate_file(pools, spec, 1).splitlines() if line]) == 500
    headings = [line for line in lines if line.startswith("## ")]
    bullets = [line for line in lines if not line.startswith("## ")]
    assert 20 <= len(headings) <= 100
    assert all(re.match(r"- \d\d:\d\d \S", line) for line in bullets)
    chinese = sum(1 for line in bullets if re.search("[\u4e00-\u9fff]", line))
    assert 0.25 <= chinese / len(bullets) <= 0.45  # 25% Chinese + most of the 15% mixed
    assert corpus.ledger_rels(spec) == ["memory/2025-01-01.md", "memory/2025-01-02.md"]


def test_all_engines_run_side_by_side(
    bench: dict[str, ModuleType], pools: object, tmp_path: Path
) -> None:
    corpus, scale = bench["_corpus"], bench["scale"]
    spec = corpus.CorpusSpec(lines=2_000, lines_per_file=1_000)
    size = scale.run_size(
        pools,
        spec,
        per_count=3,
        max_terms=5,
        reps=2,
        skip=set(),
        cache_root=tmp_path / "cache",
    )
    engines = {e.name: e for e in size.engines}
    peers = {"tantivy", "bm25s"}
    installed = {p for p in peers if not bench["_peer_engines"].missing_packages(p)}
    assert set(engines) == {"memdir", "fts5", "substring"} | installed
    for name in peers - installed:  # a peer that is not installed is left out, and said so
        assert "not installed" in size.checks[f"{name} left out"]
    for name in installed:  # a peer that runs finds the lines holding a one-term query
        assert sum(engines[name].recall[1]) > 0
    assert size.checks["corpus lines (non-blank)"] == 2_000
    assert engines["fts5"].rows == 2_000
    assert engines["memdir"].rows > 0 and engines["memdir"].size_bytes > 0
    for eng in engines.values():
        # Buckets 1-5 are term counts; 0 holds the queries that are a whole line's text.
        assert sorted(eng.latency_ms) == [0, 1, 2, 3, 4, 5]
        assert all(len(samples) == 3 for samples in eng.latency_ms.values())
    # A literal scan of one term (or of a whole line) returns exactly the truth: the check
    # itself must agree.
    assert engines["substring"].recall[1] == [1.0, 1.0, 1.0]
    assert engines["substring"].recall[0] == [1.0, 1.0, 1.0]
    for op in ("append10_index_file", "append10_refresh", "rewrite_index_file", "noop_refresh"):
        assert len(engines["memdir"].reindex_ms[op]) == 2
    assert len(engines["fts5"].reindex_ms["rewrite_index_file"]) == 2
    assert size.checks["appended line found after refresh"] is True
    # refresh() picked up each appended / rewritten file and nothing when nothing changed.
    assert size.checks["files re-indexed by each refresh()"] == [1, 1, 1, 1, 0, 0]
    report = bench["_scale_report"].markdown([size], header=["# t"], max_terms=5)
    assert "| memdir |" in report and "2–5 terms" in report and "whole line" in report


def test_hybrid_benchmark_runs(
    bench: dict[str, ModuleType],
    pools: object,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("numpy")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCHMARKS))
        hybrid = importlib.import_module("hybrid")
    from memdir.embeddings import Embedder

    assert isinstance(hybrid.RandomEmbedder(), Embedder)
    hybrid.run(2_000, 8, False, pools=pools, cache_root=tmp_path / "cache", lines_per_file=1_000)
    out = capsys.readouterr().out
    assert re.search(r"embed_pending \(stand-in vectors\): 1,\d{3} distinct lines", out)
    assert re.search(r"hybrid \(stand-in\)\s+\d+\.\d+ /", out)
