"""Words written as one but made of several tokens (``1.0``, ``2026-01-05``, ``gpt-4o``):
found exactly, from their own posting list, however many rows hold their tokens apart."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.index import MemoryIndex
from memdir.index._sqlite import SqliteEngine
from memdir.index._text import LATIN_WORD, index_pairs, written_words
from memdir.workspace import Workspace

OLD = "memory/2026-10-01.md"
NEW = "memory/2026-11-02.md"


def _hits(index: MemoryIndex, query: str) -> list[tuple[str, int]]:
    return [(hit.path, hit.line_number) for hit in index.search(query, limit=10)]


def _index(tmp_path, files: dict[str, list[str]]) -> tuple[Workspace, MemoryIndex]:
    ws = Workspace(tmp_path)
    for rel, lines in files.items():
        ws.write_text(rel, "\n".join(lines) + "\n")
    index = MemoryIndex(ws).open()
    index.index_all_from_workspace()
    return ws, index


def test_a_version_is_found_behind_hundreds_of_rows_holding_its_digits_apart(tmp_path) -> None:
    apart = [f"- 09:{i % 60:02d} ran 1 job, 0 failed (batch {i})" for i in range(400)]
    _, index = _index(tmp_path, {OLD: ["- 08:00 released version 1.0 of the parser"], NEW: apart})
    assert _hits(index, "1.0") == [(OLD, 1)]
    assert _hits(index, "version 1.0") == [(OLD, 1)]
    index.close()


def test_dates_models_addresses_and_names(tmp_path) -> None:
    lines = [
        "- 10:00 the review is on 2026-01-05 at noon",
        "- 10:01 switched the summariser to gpt-4o",
        "- 10:02 Her e-mail is ada@example.com",
        "- 10:03 O'Brien signed the e-mails",
        "- 10:04 gpt and 4o and 2026 01 05 and com, example, ada, all apart",
        "- 10:05 版本1.0发布了",
    ]
    _, index = _index(tmp_path, {NEW: lines})
    assert _hits(index, "2026-01-05")[0] == (NEW, 1)
    assert _hits(index, "GPT-4o")[0] == (NEW, 2)
    assert _hits(index, "ada@example.com")[0] == (NEW, 3)
    assert _hits(index, "o'brien") == [(NEW, 4)]
    assert sorted(_hits(index, "e-mail")) == [(NEW, 3), (NEW, 4)]  # stemmed: e-mails too
    assert _hits(index, "1.0") == [(NEW, 6)]  # glued to Chinese
    assert _hits(index, "版本 1.0") == [(NEW, 6)]
    assert _hits(index, "10:03")[0] == (NEW, 4)  # a bullet's time is a written word too
    index.close()


def test_a_version_or_date_finds_the_longer_ones_it_starts(tmp_path) -> None:
    lines = [
        "- 10:00 upgraded to Python 3.11.7",
        "- 10:01 the 2026-11-30 release",
        "- 10:02 numpy 1.265 is not 1.26",
    ]
    _, index = _index(tmp_path, {NEW: lines})
    assert _hits(index, "3.11") == [(NEW, 1)]
    assert _hits(index, "2026-11") == [(NEW, 2)]
    assert _hits(index, "1.2") == []  # 1.265 and 1.26 do not start with the word 1.2
    index.close()


def test_a_word_of_letters_is_found_written_apart_too(tmp_path) -> None:
    """``mini-retreat`` is also written ``mini retreat``; ``1.0`` is not ``1 0``."""
    lines = ["- 10:00 she went on a mini retreat", "- 10:01 scored 1 0 at half time"]
    _, index = _index(tmp_path, {NEW: lines})
    assert _hits(index, "mini-retreat") == [(NEW, 1)]
    assert _hits(index, "1.0") == []
    index.close()


def test_written_words_follow_edits_and_removals(tmp_path) -> None:
    ws, index = _index(tmp_path, {NEW: ["- 10:00 pinned numpy 1.26.4", "- 10:01 other"]})
    assert _hits(index, "1.26.4") == [(NEW, 1)]
    ws.write_text(NEW, "- 10:00 pinned numpy 2.1.0\n- 10:01 other\n")
    index.index_file(NEW)
    assert _hits(index, "1.26.4") == []
    assert _hits(index, "2.1.0") == [(NEW, 1)]
    engine, problem = SqliteEngine.open(ws.index_dir / "memory_index.db")
    assert engine is not None, problem
    assert engine.damage() is None  # the deletes replayed exactly what was inserted
    engine.close()
    ws.delete(NEW)
    index.index_file(NEW)
    assert _hits(index, "2.1.0") == []
    index.close()


_EVERY = re.compile(LATIN_WORD)
_TEXT = st.text(
    alphabet=st.sampled_from([*"ab1Z9-./:@'’ _,()é数字\n", "ǀ", "😀", "ß", "İ"]),
    max_size=60,
)


@settings(max_examples=600, deadline=None)
@given(st.one_of(_TEXT, _TEXT.map(lambda text: "- 10:05 " + text)))
def test_written_words_are_the_pattern_words_of_several_tokens(text: str) -> None:
    """The fast cut equals the query's own pattern on any text (so a query finds them)."""
    assert written_words(text) == [w for w in _EVERY.findall(text) if not w.isalnum()]
    assert index_pairs(text) == index_pairs(text)  # pure
