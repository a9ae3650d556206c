"""MemoryIndex: layout, hits, incremental sync, CJK and English analysis, safe queries."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memdir.errors import ToolInputError, WorkspaceError
from memdir.index import IndexStats, MemoryIndex, SearchHit, _query
from memdir.workspace import Workspace

LEDGER = "memory/2026-11-29.md"


@pytest.fixture
def index(ws: Workspace) -> Iterator[MemoryIndex]:
    with MemoryIndex(ws) as idx:
        yield idx


def _write(ws: Workspace, rel: str, text: str) -> None:
    ws.write_text(rel, text)


def _where(hits: list[SearchHit]) -> list[tuple[str, int]]:
    return [(h.path, h.line_number) for h in hits]


def test_database_lives_in_the_workspace(ws: Workspace, index: MemoryIndex) -> None:
    index.index_all_from_workspace()
    assert index.path == ws.root / ".index" / "memory_index.db"
    assert index.path.is_file()


def test_indexes_memory_ledgers_and_archive_only(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, "MEMORY.md", "# Memory\n\n## Preferences\n- likes zebrafish\n")
    _write(ws, LEDGER, "- zebrafish tank cleaned\n")
    _write(ws, "memory/archive/2025-01-01.md", "- bought a zebrafish\n")
    _write(ws, "memory/.history/MEMORY.1.md", "- zebrafish history\n")
    _write(ws, "sessions/s.log.jsonl", '{"zebrafish": 1}\n')
    _write(ws, "AGENTS.md", "- zebrafish persona\n")
    stats = index.index_all_from_workspace()
    assert stats.files_indexed == 3 and stats.lines_indexed == 3
    hits = index.search("zebrafish", limit=10)
    assert sorted(_where(hits)) == [
        ("MEMORY.md", 4),
        ("memory/2026-11-29.md", 1),
        ("memory/archive/2025-01-01.md", 1),
    ]
    archived = {h.path: h.archived for h in hits}
    assert archived == {
        "MEMORY.md": False,
        "memory/2026-11-29.md": False,
        "memory/archive/2025-01-01.md": True,
    }


def test_hit_carries_lines_heading_content_and_score(ws: Workspace, index: MemoryIndex) -> None:
    _write(
        ws,
        LEDGER,
        "## Memory Flush — 2026-11-29T10:00:00Z\n"
        "- deployed the walrus service\n"
        "  to the staging cluster\n"
        "- unrelated note\n"
        "\n"
        "## Later\n"
        "- walrus rollback planned\n",
    )
    index.refresh()
    hits = index.search("walrus")
    assert len(hits) == 2
    first = next(h for h in hits if h.line_number == 2)
    assert first.line_end == 3
    assert first.content == "- deployed the walrus service\n  to the staging cluster"
    assert first.heading == "Memory Flush — 2026-11-29T10:00:00Z"
    second = next(h for h in hits if h.line_number == 7)
    assert (second.line_end, second.heading) == (7, "Later")
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_search_never_indexes(ws: Workspace, index: MemoryIndex) -> None:
    index.refresh()
    _write(ws, LEDGER, "- the quokka smiled\n")
    assert index.search("quokka") == []
    index.refresh()
    assert _where(index.search("quokka")) == [(LEDGER, 1)]


def test_incremental_skips_unchanged_and_diffs_lines(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, LEDGER, "".join(f"- entry number {i} about llamas\n" for i in range(50)))
    _write(ws, "memory/2026-11-28.md", "- older day\n")
    first = index.index_all_from_workspace()
    assert (first.files_indexed, first.lines_indexed) == (2, 51)
    again = index.index_all_from_workspace()
    assert (again.files_indexed, again.files_unchanged, again.lines_indexed) == (0, 2, 0)

    ws.append_text(LEDGER, "- appended alpaca fact\n- another alpaca\n")
    appended = index.refresh()
    assert (appended.files_indexed, appended.lines_indexed) == (1, 2)
    assert len(index.search("alpaca")) == 2

    text = ws.read_text(LEDGER).replace("entry number 7 about", "entry number 7 regarding")
    _write(ws, LEDGER, text)
    edited = index.refresh()
    assert edited.lines_indexed == 1
    assert _where(index.search("regarding")) == [(LEDGER, 8)]
    assert len(index.search("llamas", limit=100)) == 50


def test_removed_files_lose_their_rows(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, LEDGER, "- ocelot sighting\n")
    index.refresh()
    ws.path(LEDGER).unlink()
    stats = index.refresh()
    assert stats.files_removed == 1
    assert index.search("ocelot") == []


def test_full_rebuild(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, LEDGER, "- kiwi one\n- kiwi two\n")
    index.refresh()
    stats = index.index_all_from_workspace(full=True)
    assert isinstance(stats, IndexStats)
    assert (stats.files_indexed, stats.lines_indexed) == (1, 2)
    assert len(index.search("kiwi")) == 2


def test_progress_reports_each_file(ws: Workspace, index: MemoryIndex) -> None:
    for day in (1, 2, 3):
        _write(ws, f"memory/2026-11-0{day}.md", f"- day {day}\n")
    seen: list[tuple[int, int]] = []
    index.index_all_from_workspace(progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_index_file_and_from_string(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, LEDGER, "- narwhal one\n")
    assert index.index_file(LEDGER) == 1
    assert index.index_file("./" + LEDGER) == 1
    ws.path(LEDGER).unlink()
    assert index.index_file(LEDGER) == 0
    assert index.search("narwhal") == []
    assert index.index_from_string("MEMORY.md", "# M\n- tapir facts\n- more tapir\n") == 2
    assert len(index.search("tapir")) == 2
    # The file on disk is the truth: it does not exist, so a refresh drops the rows.
    index.refresh()
    assert index.search("tapir") == []


@pytest.mark.parametrize("rel", ["../x.md", "sessions/a.md", "memory/notes.txt", "AGENTS.md"])
def test_index_file_rejects_non_memory_paths(index: MemoryIndex, rel: str) -> None:
    with pytest.raises(WorkspaceError):
        index.index_file(rel)


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "'",
        "*",
        "foo*",
        "NEAR(a b, 3)",
        "a AND b",
        "OR",
        "NOT x",
        "(((",
        "a) OR (b",
        "-x",
        "^start",
        "col:value",
        "body:tea",
        "{body}: tea",
        "🦄 emoji 🎉",
        "x\x00y",
        "\ud800",
        "tea " * 2500,
        "数据库" * 3000,
        "\\",
        "%_",
        "; DROP TABLE units; --",
    ],
)
def test_any_query_is_safe(ws: Workspace, index: MemoryIndex, query: str) -> None:
    _write(ws, LEDGER, "- tea and value and start\n- 数据库迁移\n")
    index.refresh()
    hits = index.search(query, limit=5)
    assert isinstance(hits, list)


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "?!.,", "\x00"])
def test_blank_query_returns_nothing(ws: Workspace, index: MemoryIndex, query: str) -> None:
    _write(ws, LEDGER, "- anything\n")
    index.refresh()
    assert index.search(query) == []


@pytest.mark.parametrize("limit", [0, -1, 1001, True, 2.5])
def test_bad_limit(index: MemoryIndex, limit: object) -> None:
    with pytest.raises(ToolInputError):
        index.search("x", limit=limit)  # type: ignore[arg-type]


def test_query_must_be_text(index: MemoryIndex) -> None:
    with pytest.raises(ToolInputError):
        index.search(b"x")  # type: ignore[arg-type]


def test_limit_caps_hits(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, LEDGER, "".join(f"- gecko {i}\n" for i in range(30)))
    index.refresh()
    assert len(index.search("gecko", limit=7)) == 7


CJK_DOC = (
    "- 我们讨论了数据库迁移方案\n"
    "- 南京市长江大桥的照片\n"
    "- 决定：SQLite的全文索引很快\n"
    "- データベースの移行について話した\n"
    "- 데이터베이스를 이전했습니다\n"
    "- memory 文件的归档策略\n"
    "- 仓库和库存\n"
)


@pytest.mark.parametrize("segmenter", ["rjieba", "bigrams"])
@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("数据库迁移", 1),
        ("迁移", 1),
        ("市长", 2),
        ("长江大桥", 2),
        ("SQLite", 3),
        ("全文索引", 3),
        ("データベース", 4),
        ("移行", 4),
        ("데이터베이스", 5),
        ("memory 归档", 6),
        ("我们之前讨论的数据库迁移方案是什么", 1),
    ],
)
def test_cjk_terms_match_inside_runs(
    ws: Workspace,
    index: MemoryIndex,
    monkeypatch: pytest.MonkeyPatch,
    segmenter: str,
    query: str,
    line: int,
) -> None:
    if segmenter == "bigrams":
        monkeypatch.setattr(_query, "_segmenter", None)
        monkeypatch.setattr(_query, "_segmenter_loaded", True)
    _write(ws, LEDGER, CJK_DOC)
    index.refresh()
    hits = index.search(query)
    assert hits, query
    assert hits[0].line_number == line


def test_single_cjk_character(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, LEDGER, CJK_DOC)
    index.refresh()
    assert sorted(h.line_number for h in index.search("库")) == [1, 7]


def test_english_case_folding_stemming_and_diacritics(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, LEDGER, "- Running the Migrations tonight\n- met at the Café Zoë\n- nothing\n")
    index.refresh()
    assert _where(index.search("run migration")) == [(LEDGER, 1)]
    assert _where(index.search("MIGRATED")) == [(LEDGER, 1)]
    assert _where(index.search("cafe zoe")) == [(LEDGER, 2)]


def test_syntax_in_queries_is_plain_text(ws: Workspace, index: MemoryIndex) -> None:
    _write(ws, LEDGER, "- ship it NOT now\n- ship later\n- snake_case and kebab-case names\n")
    index.refresh()
    # NOT is a word here (a stopword when lower case), never an operator excluding "now".
    assert (LEDGER, 1) in _where(index.search("ship NOT now"))
    assert _where(index.search("kebab-case")) == [(LEDGER, 3)]
    assert _where(index.search("snake_case")) == [(LEDGER, 3)]


def test_natural_language_question_prefers_full_coverage(ws: Workspace, index: MemoryIndex) -> None:
    _write(
        ws,
        LEDGER,
        "- 10:00 Caroline: I love tea\n"
        "- 10:05 Mel: hiking is fun\n"
        "- 10:10 Caroline: we went hiking in May with the kids\n"
        "- 10:15 Caroline: what a day\n",
    )
    index.refresh()
    hits = index.search("What did Caroline do in May?")
    assert hits[0].line_number == 3
    assert index.search("what did you do")  # only stopwords: still searched


def test_open_is_idempotent_and_close_reopens(ws: Workspace) -> None:
    _write(ws, LEDGER, "- puffin\n")
    idx = MemoryIndex(ws.root)
    idx.refresh()  # opens on first use
    assert idx.open() is idx
    idx.close()
    idx.close()
    assert len(idx.search("puffin")) == 1
    idx.close()


def test_schema_version_is_registered(ws: Workspace, index: MemoryIndex) -> None:
    index.refresh()
    con = sqlite3.connect(index.path)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] >= 1
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        con.close()
    # Reopening an up-to-date database changes nothing.
    with MemoryIndex(ws) as again:
        assert again.refresh().files_indexed == 0


def test_default_workspace_from_path(tmp_path: Path) -> None:
    root = tmp_path / "w"
    with MemoryIndex(root) as idx:
        (root / "MEMORY.md").write_text("- heron\n", encoding="utf-8")
        idx.refresh()
        assert _where(idx.search("heron")) == [("MEMORY.md", 1)]


def test_partial_chinese_word_still_finds_something(ws: Workspace, index: MemoryIndex) -> None:
    # "过生日" is one word for the segmenter; the memory only says "生日".
    _write(ws, LEDGER, "- 张三是我的同事，其生日是07月11日。\n- 今天天气很好\n")
    index.refresh()
    assert _where(index.search("谁过生日")) == [(LEDGER, 1)]


def test_emoji_are_searchable(ws: Workspace, index: MemoryIndex) -> None:
    _write(
        ws,
        LEDGER,
        "- 🎉 shipped v2 to production\n- 👩‍💻 pairing with Lin on the parser\n"
        "- 👍🏽 from the reviewer\n- release notes written\n",
    )
    index.index_all_from_workspace()
    assert _where(index.search("🎉", 5)) == [(LEDGER, 1)]
    assert _where(index.search("💻", 5)) == [(LEDGER, 2)]  # a part of a joined sequence
    assert _where(index.search("👩‍💻", 5)) == [(LEDGER, 2)]
    assert _where(index.search("👍", 5)) == [(LEDGER, 3)]  # any skin tone
    assert sorted(_where(index.search("🎉 release", 5))) == [(LEDGER, 1), (LEDGER, 4)]
    assert index.search("🦄", 5) == []
    assert index.search("emo", 5) == []  # the index words of emoji are not prefixes
