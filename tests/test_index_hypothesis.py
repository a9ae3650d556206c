"""Property tests: any query is safe; single-token queries agree with a naive scan."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memdir.index import MemoryIndex
from memdir.store.ledger import normalize_bullet
from memdir.workspace import Workspace

SYNTAX = ['"', "'", "*", "(", ")", "NEAR", "AND", "OR", "NOT", "-", "^", ":", "+", "{", "}"]
WORDS = ["alpha", "bravo", "delta", "kilo", "zulu", "tango", "oscar", "quebec"]
HAN = list("数据库迁移方案市长江大桥的")
_TOKEN = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def shared_index() -> Iterator[MemoryIndex]:
    root = Path(tempfile.mkdtemp(prefix="memdir-hyp-"))
    ws = Workspace(root, tz="UTC")
    ws.write_text("memory/2026-01-01.md", "- alpha 数据库迁移 NEAR AND OR NOT\n- 🦄 emoji\n")
    idx = MemoryIndex(ws)
    idx.refresh()
    yield idx
    idx.close()
    shutil.rmtree(root, ignore_errors=True)


queries = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=200),
    st.lists(st.sampled_from([*SYNTAX, "alpha", "数据", " ", "\x00", "\ud800"]), max_size=30).map(
        "".join
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries, limit=st.integers(min_value=1, max_value=50))
def test_any_text_query_never_raises(shared_index: MemoryIndex, query: str, limit: int) -> None:
    hits = shared_index.search(query, limit=limit)
    assert len(hits) <= limit
    if not query.strip():
        assert hits == []


segment = st.one_of(
    st.sampled_from(WORDS)
    .map(lambda w: st.sampled_from([w, w.upper(), w.title()]))
    .flatmap(lambda s: s),
    st.lists(st.sampled_from(HAN), min_size=1, max_size=6).map("".join),
    st.sampled_from([",", ".", "-", "!"]),
)
line = st.lists(segment, min_size=1, max_size=8).map(" ".join)
files = st.lists(st.lists(line, min_size=1, max_size=8), min_size=1, max_size=3)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _contains(text: str, needle: list[str]) -> bool:
    if len(needle) > 1 and all(_TOKEN.fullmatch(t) and not t.isascii() for t in needle):
        # A Chinese word is looked up by its character pairs, which never span two runs: it
        # must be written whole (``迁 移`` does not hold ``迁移``).
        return "".join(needle) in text
    tokens = _tokens(text)
    n = len(needle)
    return any(tokens[i : i + n] == needle for i in range(len(tokens) - n + 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=files,
    query=st.one_of(
        st.sampled_from(WORDS),
        st.sampled_from(WORDS).map(str.upper),
        st.sampled_from(HAN),
        st.sampled_from(["数据", "迁移", "市长", "江大", "桥的", "库迁"]),
    ),
)
@example(content=[["迁 移", "数据库迁移"]], query="迁移")
def test_single_token_queries_agree_with_a_naive_scan(content: list[list[str]], query: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="memdir-hyp-"))
    try:
        ws = Workspace(root, tz="UTC")
        expected: dict[tuple[str, int], str] = {}
        needle = _tokens(query)
        for day, lines in enumerate(content, start=1):
            rel = f"memory/2026-02-{day:02d}.md"
            ws.write_text(rel, "".join(f"- {text}\n" for text in lines))
            for number, text in enumerate(lines, start=1):
                if _contains(text, needle):
                    expected[(rel, number)] = f"- {text}"
        with MemoryIndex(ws) as idx:
            idx.refresh()
            hits = idx.search(query, limit=1000)
        # Every matching line is found; identical lines (up to case and spacing) once.
        matching = [h for h in hits if (h.path, h.line_number) in expected]
        found = [normalize_bullet(h.content) for h in matching]
        assert set(found) == {normalize_bullet(text) for text in expected.values()}
        assert len(found) == len(set(found))
        # Any other line came through feedback: it holds a word of a matching line and at
        # least a character of the query.
        words = {w for h in matching for w in _tokens(h.content)}
        for other in hits:
            if (other.path, other.line_number) not in expected:
                tokens = set(_tokens(other.content))
                assert tokens & words and any(ch in other.content.lower() for ch in query.lower())
    finally:
        shutil.rmtree(root, ignore_errors=True)


pieces = st.lists(
    st.sampled_from(
        [
            "- alpha item\n",
            "  bravo continuation\n",
            "delta paragraph line\n",
            "\n",
            "## Kilo heading\n",
            "```\n",
            "zulu code line\n",
            "- tango 数据库\n",
            "oscar tail without newline",
        ]
    ),
    min_size=1,
    max_size=6,
)


def _state(idx: MemoryIndex) -> set[tuple[object, ...]]:
    found: set[tuple[object, ...]] = set()
    for word in ["alpha", "bravo", "delta", "zulu", "tango", "oscar", "数据"]:
        for h in idx.search(word, limit=1000):
            found.add((h.path, h.line_number, h.line_end, h.heading, h.content))
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=pieces, appends=st.lists(pieces, min_size=1, max_size=4))
@example(  # the last unit was a line inside a closed code fence
    start=["```\n", "- alpha item\n", "```\n"], appends=[["- alpha item\n", "  bravo cont\n"]]
)
def test_appends_index_like_a_fresh_build(start: list[str], appends: list[list[str]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="memdir-hyp-"))
    try:
        ws = Workspace(root / "a", tz="UTC")
        rel = "memory/2026-03-01.md"
        text = "".join(start)
        ws.write_text(rel, text)
        with MemoryIndex(ws) as idx:
            idx.index_file(rel)
            for chunk in appends:
                ws.append_text(rel, "".join(chunk), fsync=False)
                idx.index_file(rel)
            incremental = _state(idx)
        fresh_ws = Workspace(root / "b", tz="UTC")
        fresh_ws.write_text(rel, ws.read_text(rel))
        with MemoryIndex(fresh_ws) as fresh:
            fresh.refresh()
            assert incremental == _state(fresh)
    finally:
        shutil.rmtree(root, ignore_errors=True)
