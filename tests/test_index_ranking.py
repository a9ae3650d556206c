"""Ranking features and the Python stemmer that mirrors FTS5's."""

from __future__ import annotations

import heapq
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memdir.index import MemoryIndex, _rank, _search
from memdir.index._paths import snapshot_of_text
from memdir.index._porter import stem
from memdir.index._schema import LINE_BITS
from memdir.index._sqlite import SqliteEngine
from memdir.index._text import text_tokens
from memdir.index._unit_terms import fast_tokens
from memdir.workspace import Workspace


@pytest.fixture
def index(ws: Workspace) -> Iterator[MemoryIndex]:
    with MemoryIndex(ws) as idx:
        yield idx


def test_python_stems_equal_sqlite_porter() -> None:
    docs = " ".join(obj.__doc__ or "" for obj in (re, sqlite3, str, dict, list, pytest))
    words = sorted(
        set(re.findall(r"[a-z]+", docs.lower()))
        | {
            "running", "caresses", "ponies", "agreed", "plastered", "motoring", "hopping",
            "filing", "happy", "relational", "conditional", "digitizer", "vileli", "analogousli",
            "generalization", "operator", "feudalism", "hopefulness", "formaliti", "sensibiliti",
            "triplicate", "formative", "electrical", "revival", "allowance", "inference",
            "airliner", "adjustable", "replacement", "adoption", "homologou", "effective",
            "bowdlerize", "probate", "controll", "roll", "archaeology", "skies", "dying",
        }
    )  # fmt: skip
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE f USING fts5(x, tokenize='porter ascii')")
    con.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    con.executemany("INSERT INTO f(rowid, x) VALUES (?, ?)", list(enumerate(words)))
    sqlite_stems = dict(con.execute("SELECT doc, term FROM v"))
    assert [stem(w) for w in words] == [sqlite_stems[i] for i in range(len(words))]


def _lines(index: MemoryIndex, query: str) -> list[tuple[str, int]]:
    return [(h.path, h.line_number) for h in index.search(query)]


def test_rare_terms_outweigh_common_ones(ws: Workspace, index: MemoryIndex) -> None:
    ws.write_text(
        "memory/2026-11-01.md",
        "".join(f"- project status update {i}\n" for i in range(20)) + "- project okapi\n",
    )
    index.refresh()
    assert _lines(index, "project okapi")[0] == ("memory/2026-11-01.md", 21)


def test_recent_daily_files_win_ties(ws: Workspace, index: MemoryIndex) -> None:
    ws.write_text("memory/2026-01-01.md", "- deploy window is friday\n")
    ws.write_text("memory/2026-11-01.md", "- deploy window is monday\n")
    index.refresh()
    assert _lines(index, "deploy window")[0] == ("memory/2026-11-01.md", 1)


def test_curated_memory_wins_ties(ws: Workspace, index: MemoryIndex) -> None:
    ws.write_text("memory/archive/2025-01-01.md", "- favourite editor is helix\n")
    ws.write_text("MEMORY.md", "# Facts\n- favourite editor is kakoune\n")
    index.refresh()
    assert _lines(index, "favourite editor")[0] == ("MEMORY.md", 2)


def test_identical_lines_are_shown_once(ws: Workspace, index: MemoryIndex) -> None:
    for day in ("01", "02", "03"):
        ws.write_text(f"memory/2026-11-{day}.md", "- User prefers dark mode.\n")
    index.refresh()
    hits = index.search("dark mode")
    assert len(hits) == 1
    assert hits[0].path == "memory/2026-11-03.md"  # the newest copy


def test_neighbour_of_a_strong_match_is_lifted(ws: Workspace, index: MemoryIndex) -> None:
    ws.write_text(
        "memory/2026-11-01.md",
        "## chat\n"
        "- Ann: what is your favorite dish from the cooking show?\n"
        "- Bob: coconut ice cream, easily\n"
        "- Ann: nice\n"
        "\n"
        "## other chat\n"
        "- Bob: I saw a show yesterday\n"
        "- Bob: a cooking pan broke\n",
    )
    index.refresh()
    hits = _lines(index, "What is Bob's favorite dish from the cooking show?")
    assert hits[0] == ("memory/2026-11-01.md", 2)
    assert hits.index(("memory/2026-11-01.md", 3)) < hits.index(("memory/2026-11-01.md", 8))
    # Lines without any query term are never returned.
    assert ("memory/2026-11-01.md", 4) not in hits


def test_chinese_query_adds_character_pairs_without_function_words() -> None:
    from memdir.index._query import analyze_query

    terms = {"".join(t.tokens): t for t in analyze_query("我的元旦晚会表演")}
    # Pairs across word boundaries are searched too, at lower rank than the words.
    assert terms["旦晚"].part == "bi"
    assert terms["表演"].part == ""  # a word stays a word
    assert terms["晚会"].part == "sub"
    # Pairs holding a particle or pronoun carry no topic.
    assert "我的" not in terms and "的元" not in terms


def test_long_query_need_not_cover_every_term(ws: Workspace, index: MemoryIndex) -> None:
    # A pasted dialogue: the line naming its two rarest topics wins over one that repeats
    # a common word, even though it covers a small share of the query.
    ws.write_text(
        "memory/2026-11-01.md",
        "- 09:00 kayak trip to the fjord planned\n"
        + "".join(f"- 09:{i:02d} we talked today about nothing\n" for i in range(1, 30)),
    )
    index.refresh()
    query = (
        "we talked today about the kayak and the fjord, talked about weather, lunch, "
        "coffee, music, books, trains, friends, work, shoes, rain and the garden"
    )
    assert _lines(index, query)[0] == ("memory/2026-11-01.md", 1)


@given(st.text(alphabet=st.characters(max_codepoint=127)))
@example("Hello, WORLD_42 foo-bar\tbaz\x00qux\x1f end. ")
def test_ascii_token_fast_path_equals_text_tokens(text: str) -> None:
    assert fast_tokens(text) == text_tokens(text)


def test_non_ascii_tokens_fall_back_to_text_tokens() -> None:
    for text in ("Café déjà vu", "数据库迁移 plan", "ＡＢＣ １２３", "naïve_user"):
        assert fast_tokens(text) == text_tokens(text)


def _engine(tmp_path: Path) -> SqliteEngine:
    engine, problem = SqliteEngine.open(tmp_path / "index.db")
    assert engine is not None, problem
    return engine


def test_units_from_is_exact_for_files_without_gaps(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    for day in range(1, 4):
        text = "".join(f"- line {i} of day {day}\n" for i in range(1, 51))
        engine.sync_file(f"memory/2026-11-0{day}.md", lambda t=text: snapshot_of_text(t))
    files = engine.files_by_id()
    rowids = [(file_id << LINE_BITS) | line for file_id in files for line in (1, 17, 50)]
    with engine.snapshot():
        assert _search._units_from(engine, rowids) == {r: engine.rows_from(r) for r in rowids}
    # A later file changes the counts: the cached per-file sums follow the index.
    engine.sync_file("memory/2026-11-09.md", lambda: snapshot_of_text("- x\n- y\n"))
    with engine.snapshot():
        assert _search._units_from(engine, rowids) == {r: engine.rows_from(r) for r in rowids}
    engine.close()


def test_units_from_estimates_within_one_file(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    # Headings, blank lines and a multi-line unit: the count inside the row's own file is
    # interpolated over its line span; the later files are counted exactly.
    text = "# Day\n\n" + "".join(
        f"- item {i}\n" + ("\n## Part\n" if i % 10 == 0 else "") for i in range(40)
    )
    text += "```\ncode block\nmore code\n```\n- last item\n"
    engine.sync_file("memory/2026-11-01.md", lambda: snapshot_of_text(text))
    engine.sync_file("memory/2026-11-02.md", lambda: snapshot_of_text("- a\n- b\n- c\n"))
    files = engine.files_by_id()
    first = min(files)
    with engine.snapshot():
        rowids = [row for row, _, _ in engine.units_of(first)]
        estimated = _search._units_from(engine, rowids)
        for rowid in rowids:
            exact = engine.rows_from(rowid)
            assert abs(estimated[rowid] - exact) <= 0.15 * files[first].units
            assert estimated[rowid] >= 3 + 1  # the later file, and the row itself
        assert _search._units_from(engine, [rowids[0]])[rowids[0]] == engine.rows_from(rowids[0])
        assert _search._units_from(engine, []) == {}
    engine.close()


def test_estimated_document_frequency(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    for day in range(1, 5):
        text = "".join(f"- {'common' if i % 2 else 'other'} word {i}\n" for i in range(100))
        engine.sync_file(f"memory/2026-11-0{day}.md", lambda t=text: snapshot_of_text(t))
    total, _ = engine.totals()
    with engine.snapshot():
        rare = engine.rowids([("word",), ("7",)], 30)  # a short list: its length
        full = engine.rowids([("common",)], 30)  # 30 rows of 59 in the newest file: 30 x 400 / 59
        assert engine.rows_from(full[-1]) == 59
        assert _search._estimate_dfs(engine, [rare, full], 30, total) == [4, 203]
    engine.close()


def test_choose_keeps_the_best_pre_ranked_rows_in_order(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    for day in (1, 5, 9):
        engine.sync_file(f"memory/2026-11-0{day}.md", lambda: snapshot_of_text("- a\n"))
    engine.sync_file("MEMORY.md", lambda: snapshot_of_text("- a\n"))
    files = engine.files_by_id()
    newest = max(f.day or 0 for f in files.values())
    scorer = _rank.Scorer([], avgdl=1.0, newest_day=newest, config=_rank.DEFAULT)
    ids = [*files, max(files) + 1]  # a file the table does not know has prior 1
    pre = {(ids[i % len(ids)] << LINE_BITS) | i: float(i % 7) for i in range(1, 200)}
    priors = {file_id: scorer.file_prior(info) for file_id, info in files.items()}
    expected = heapq.nlargest(40, pre, key=lambda r: (pre[r] * priors.get(r >> LINE_BITS, 1.0), r))
    assert _search._choose(pre, 40, scorer, files) == expected
    # Priors are remembered per index state, newest day and configuration.
    older = _rank.Scorer([], avgdl=1.0, newest_day=newest - 90, config=_rank.DEFAULT)
    priors = {file_id: older.file_prior(info) for file_id, info in files.items()}
    expected = heapq.nlargest(40, pre, key=lambda r: (pre[r] * priors.get(r >> LINE_BITS, 1.0), r))
    assert _search._choose(pre, 40, older, files) == expected
    assert _search._choose(dict(list(pre.items())[:30]), 40, older, files) == sorted(
        list(pre)[:30], key=lambda r: (pre[r] * priors.get(r >> LINE_BITS, 1.0), r), reverse=True
    )
    engine.close()
