"""Several processes append, index and search one workspace at the same time."""

from __future__ import annotations

import multiprocessing as mp
import re
from pathlib import Path
from typing import Any

import pytest

from memdir.index import MemoryIndex
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-30.md"
WORDS = ["alder", "birch", "cedar", "dogwood"]
PER_WRITER = 60


def _writer(root: str, worker: int, barrier: Any) -> None:
    ws = Workspace(root, tz="UTC")
    barrier.wait(timeout=60)
    for i in range(PER_WRITER):
        ws.append_text(LEDGER, f"- {WORDS[worker]} entry {i} " + "filler " * 20 + "\n", fsync=False)


def _indexer(root: str, barrier: Any, rounds: int, errors: Any) -> None:
    barrier.wait(timeout=60)
    try:
        with MemoryIndex(root) as idx:
            for _ in range(rounds):
                idx.refresh()
                idx.search("cedar entry")
                idx.search("birch")
    except Exception as exc:  # reported to the parent, which fails the test
        errors.put(repr(exc))


def test_appends_while_indexing_lose_nothing(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    root = str(tmp_path / "ws")
    Workspace(root, tz="UTC")
    barrier = ctx.Barrier(len(WORDS) + 1)
    errors = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(root, w, barrier)) for w in range(len(WORDS))]
    procs.append(ctx.Process(target=_indexer, args=(root, barrier, 40, errors)))
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
        assert proc.exitcode == 0
    assert errors.empty(), errors.get()

    lines = (Path(root) / LEDGER).read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    body = lines[:-1]
    assert len(body) == len(WORDS) * PER_WRITER
    pattern = re.compile(r"^- (alder|birch|cedar|dogwood) entry (\d+) (filler ){20}$")
    assert all(pattern.match(line) for line in body)

    with MemoryIndex(root) as idx:
        idx.refresh()
        for word in WORDS:
            hits = idx.search(word, limit=1000)
            expected = {
                (n, line) for n, line in enumerate(body, start=1) if line.startswith(f"- {word} ")
            }
            assert {(h.line_number, h.content) for h in hits} == expected
            assert all(h.line_end == h.line_number for h in hits)


def _rewriter(root: str, barrier: Any, rounds: int, errors: Any) -> None:
    ws = Workspace(root, tz="UTC")
    barrier.wait(timeout=60)
    try:
        with MemoryIndex(ws) as idx:
            for r in range(rounds):
                text = "".join(f"- churn round {r} item {i} tokenchurn\n" for i in range(300))
                ws.write_text("memory/2026-11-02.md", text)
                if r % 5 == 4:
                    idx.index_all_from_workspace(full=True)
                else:
                    idx.refresh()
    except Exception as exc:
        errors.put(repr(exc))


def test_searches_keep_working_during_reindex(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    root = str(tmp_path / "ws")
    ws = Workspace(root, tz="UTC")
    ws.write_text("memory/2026-11-01.md", "- the stable puffin fact\n")
    with MemoryIndex(ws) as idx:
        idx.refresh()
    barrier = ctx.Barrier(2)
    errors = ctx.Queue()
    proc = ctx.Process(target=_rewriter, args=(root, barrier, 20, errors))
    proc.start()
    barrier.wait(timeout=60)
    seen = 0
    with MemoryIndex(ws) as idx:
        while proc.is_alive() and seen < 2000:
            hits = idx.search("tokenchurn item", limit=5)
            assert len(hits) <= 5
            found = idx.search("stable puffin")
            # A full rebuild empties the index for a moment; otherwise the fact is always there.
            assert found == [] or [(h.path, h.line_number) for h in found] == [
                ("memory/2026-11-01.md", 1)
            ]
            seen += 1
    proc.join(timeout=120)
    if proc.is_alive():
        proc.kill()
    assert proc.exitcode == 0
    assert errors.empty(), errors.get()
    assert seen > 0
    with MemoryIndex(ws) as idx:
        idx.refresh()
        assert len(idx.search("stable puffin")) == 1
        assert len(idx.search("tokenchurn", limit=1000)) == 300


CONCEPTS = {"tree": ["alder", "birch", "cedar", "dogwood"], "entry": ["entry"]}


def _embedding_worker(root: str, barrier: Any, rounds: int, errors: Any) -> None:
    from memdir.testing import ConceptEmbedder

    barrier.wait(timeout=60)
    try:
        with MemoryIndex(root, embedder=ConceptEmbedder(CONCEPTS)) as idx:
            for _ in range(rounds):
                idx.refresh()
                idx.embed_pending(batch_size=7)
                idx.search("cedar entry")
    except Exception as exc:  # reported to the parent, which fails the test
        errors.put(repr(exc))


def test_processes_embed_and_search_while_others_append(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    from memdir.testing import ConceptEmbedder

    ctx = mp.get_context("spawn")
    root = str(tmp_path / "ws")
    Workspace(root, tz="UTC")
    barrier = ctx.Barrier(len(WORDS) + 2)
    errors = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(root, w, barrier)) for w in range(len(WORDS))]
    procs += [
        ctx.Process(target=_embedding_worker, args=(root, barrier, 15, errors)) for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=180)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
        assert proc.exitcode == 0
    assert errors.empty(), errors.get()
    with MemoryIndex(root, embedder=ConceptEmbedder(CONCEPTS)) as idx:
        idx.refresh()
        final = idx.embed_pending()
        assert final.pending == 0 and final.total == len(WORDS) * PER_WRITER
        # whatever the two processes did, every line has exactly one vector now
        assert idx._vectors.count() == final.total
        hits = idx.search("cedar entry", 5)
    assert hits and all("cedar entry" in hit.content for hit in hits)


def _opener(roots: list[str], barrier: Any, errors: Any) -> None:
    for root in roots:
        barrier.wait(timeout=60)
        try:
            with MemoryIndex(root, embedder=False) as idx:
                idx.refresh()
                idx.search("anything")
        except Exception as exc:  # reported to the parent, which fails the test
            errors.put(repr(exc))


def test_processes_creating_the_index_at_once_all_open_it(tmp_path: Path) -> None:
    # A new index file is turned to WAL under a lock SQLite does not wait for: without a
    # retry, about one round in ten had a process fail with "database is locked".
    ctx = mp.get_context("spawn")
    roots = [str(tmp_path / f"ws{n}") for n in range(40)]
    for root in roots:
        Workspace(root, tz="UTC").write_text("memory/2026-11-30.md", "- a line\n")
    barrier = ctx.Barrier(4)
    errors = ctx.Queue()
    procs = [ctx.Process(target=_opener, args=(roots, barrier, errors)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    assert errors.empty(), errors.get()
