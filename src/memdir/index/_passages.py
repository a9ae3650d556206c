"""Passages: the pieces of a long memory unit that are embedded one by one.

An embedder reads a bounded window of text (e5: 512 tokens). A memory line can be far longer (a
message of a coding conversation kept whole is often a page of prose and code), and a vector of
its head, or the average of its windows, loses what is said further down. So a unit longer than
one window is cut into passages that each fit, overlapping a little, and each gets a vector of
its own; a search scores the unit by its best passage (max-sim,
:class:`memdir.index._vectors.DenseIndex`). A unit that fits is one passage, its whole text, so
its vector (keyed by that text) is the one it always had.

Cuts fall between sentences, before a fenced code block or a Markdown heading or list item
where the text has one (newlines of a ledger line are spaces by then, the markers remain); a
sentence longer than a window is cut between words, and a "word" longer than a window (a
base64 blob) between characters.

An embedder tells how it counts and how much it reads with two optional members
(:class:`memdir.embeddings.Embedder`): ``count_tokens(text) -> int`` and ``passage_tokens``.
Without them a token is taken for three UTF-8 bytes (conservative for English, about one
Chinese character) and a passage holds :data:`DEFAULT_PASSAGE_TOKENS`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memdir.embeddings import Embedder

__all__ = ["DEFAULT_PASSAGE_TOKENS", "passage_size", "passages_of", "split_passages"]

DEFAULT_PASSAGE_TOKENS = 512
"""Tokens of a passage for an embedder that declares no ``passage_tokens``."""
OVERLAP_SHARE = 8
"""A passage repeats up to ``1 / OVERLAP_SHARE`` of its size from the end of the one before,
so that a fact cut by a passage boundary is whole in one of them."""
_CACHE_SIZE = 4096

# Where a piece of text may end: after a sentence's end and its space, before a code fence,
# a Markdown heading, a list item or a quote; after CJK sentence-final punctuation.
_BOUNDARY = re.compile(
    r"(?<=[.!?;:。！？；…])\s+"
    r"|\s+(?=```|#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s|>\s)"
    r"|(?<=[。！？；])"
)
_SPACE = re.compile(r"\s+")


def _bytes_count(text: str) -> int:
    return -(-len(text.encode("utf-8")) // 3)


def passage_size(embedder: Embedder) -> tuple[int, Callable[[str], int]]:
    """``(tokens of a passage, token counter)`` of ``embedder``."""
    size = getattr(embedder, "passage_tokens", None)
    if isinstance(size, bool) or not isinstance(size, int) or size < 16:
        size = DEFAULT_PASSAGE_TOKENS
    count = getattr(embedder, "count_tokens", None)
    return size, count if callable(count) else _bytes_count


def passages_of(embedder: Embedder, text: str) -> list[str]:
    """The passages of ``text`` as ``embedder`` embeds them (one: the text, when it fits).

    Results are cached per embedder name: a file's units are split again whenever its vectors
    are loaded.
    """
    size, count = passage_size(embedder)
    if len(text) < size:  # a token covers at least one character (one more: a leading mark)
        return [text] if text else []
    return list(_cached(embedder.name, size, count, text))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _cached(name: str, size: int, count: Callable[[str], int], text: str) -> tuple[str, ...]:
    del name  # part of the key: two embedders may count alike but differ in name
    return tuple(split_passages(text, count, size))


def _pieces(text: str, count: Callable[[str], int], size: int) -> list[tuple[str, int]]:
    """``text`` cut at boundaries into ``(piece, tokens)``, no piece over ``size`` tokens."""
    out: list[tuple[str, int]] = []
    for piece in _BOUNDARY.split(text):
        piece = piece.strip()
        if not piece:
            continue
        tokens = count(piece)
        if tokens <= size:
            out.append((piece, tokens))
        else:
            out.extend(_cut(piece, tokens, count, size))
    return out


def _cut(piece: str, tokens: int, count: Callable[[str], int], size: int) -> list[tuple[str, int]]:
    """A piece longer than ``size`` tokens cut between words (characters if it has none)."""
    parts = -(-tokens // size) + 1  # a little smaller than the window: tokens vary per word
    step = -(-len(piece) // parts)
    out: list[tuple[str, int]] = []
    start = 0
    while start < len(piece):
        end = min(len(piece), start + step)
        if end < len(piece):
            space = piece.rfind(" ", start + step // 2, end)
            if space > start:
                end = space
        chunk = piece[start:end].strip()
        start = end
        if not chunk:
            continue
        n = count(chunk)
        if n > size and len(chunk) > 1:
            out.extend(_cut(chunk, n, count, size))
        else:
            out.append((chunk, n))
    return out


def split_passages(text: str, count: Callable[[str], int], size: int) -> list[str]:
    """``text`` in passages of at most about ``size`` tokens as ``count`` counts them.

    Pieces (sentences, code blocks, list items) are packed greedily; each passage after the
    first starts with the last pieces of the one before, up to ``size // OVERLAP_SHARE``
    tokens. A text of at most ``size`` tokens is one passage, itself.
    """
    if not text.strip():
        return []
    if count(text) <= size:
        return [text]
    pieces = _pieces(text, count, size)
    overlap = size // OVERLAP_SHARE
    out: list[str] = []
    first = 0
    while first < len(pieces):
        last, total = first, pieces[first][1]
        while last + 1 < len(pieces) and total + 1 + pieces[last + 1][1] <= size:
            last += 1
            total += 1 + pieces[last][1]  # one for the space between: counts add up roughly
        out.append(" ".join(piece for piece, _ in pieces[first : last + 1]))
        if last + 1 >= len(pieces):
            break
        start, kept = last + 1, 0
        while start - 1 > first and kept + pieces[start - 1][1] <= overlap:
            start -= 1
            kept += pieces[start][1]
        first = start
    return out
