"""Text analysis shared by indexing and querying.

SQLite's ``unicode61`` tokenizer keeps a run of Chinese, Japanese or Korean characters as one
token, so ``迁移`` would never match inside ``我们讨论了数据库迁移方案``. Before text reaches
FTS5 every CJK character is therefore set apart by spaces (one token per character). That is a
pure function of the text, with no dictionary, so deleting a row from the contentless FTS5
table can re-derive exactly the tokens that were inserted. Queries are cut into words (see
:mod:`memdir.index._query`) and each CJK word becomes a phrase of its characters, which
matches the word anywhere, including 2-character terms inside longer words. The adjacent
character pairs of each run (:func:`index_pairs`) are indexed too, so that such a word is
found from the posting lists of its pairs (:mod:`memdir.index._fts`).
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from memdir.index._porter import stem

__all__ = [
    "ANALYZER_VERSION",
    "CJK_CHARS",
    "EMOJI",
    "HAN",
    "HANGUL",
    "HIRAGANA",
    "JOINER",
    "KATAKANA",
    "LATIN_WORD",
    "cjk_pairs",
    "emoji_token",
    "fold",
    "index_body",
    "index_pairs",
    "joined_word",
    "text_tokens",
    "word_parts",
    "written_words",
]

ANALYZER_VERSION = "cjk-unigram+emoji/2"
"""Changes whenever :func:`index_body` or :func:`index_pairs` would produce different tokens
(forces a rebuild), unless a schema step re-derives the tables (``_schema._v4``)."""

# Fixed code point ranges (not ``unicodedata``) so the analysis is identical on every Python.
HAN = (
    "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0003134f"
)
HIRAGANA = "\u3041-\u309f"
KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
HANGUL = "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff"
CJK_CHARS = HAN + HIRAGANA + KATAKANA + HANGUL
# Pictographs: unicode61 treats them as separators. Each one becomes a word of its own (see
# :func:`emoji_token`); variation selectors and joiners stay separators, so a sequence such as
# 👩‍💻 is the words for 👩 and 💻.
EMOJI = "\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff"
_EMOJI = re.compile(f"[{EMOJI}]")

_CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
_CJK_PAIR = re.compile(f"(?=([{CJK_CHARS}]{{2}}))")  # every pair, overlapping
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# A token as unicode61 sees it: letters and digits (the underscore separates).
_TOKEN = re.compile(f"[{CJK_CHARS}]|[^\\W_{CJK_CHARS}]+")
_WORD = f"[^\\W_{CJK_CHARS}]+"
LATIN_WORD = f"{_WORD}(?:['’]{_WORD})?(?:[-./:@]{_WORD}(?:['’]{_WORD})?)*"
"""A written word: tokens joined by ``-./:@`` (``2026-01-05``, ``gpt-4o``) or an apostrophe."""
_LATIN_WORD = re.compile(LATIN_WORD)
_PART = re.compile(_WORD)
_JOINERS = re.compile("[-./:@]")
_CLITICS = frozenset({"s", "t", "ll", "re", "ve", "d", "m"})
_JOINED = re.compile("[^\\W_][-./:@'’][^\\W_]")  # where a LATIN_WORD can hold a joiner
_BULLET_TIME = re.compile("- [0-9][0-9]:[0-9][0-9] ")
_ASCII_JOINERS = b"-./:@'"
_ASCII_DIGITS = b"0123456789"
# ASCII letters, digits and joiners kept, every other byte a space; joiners all made dots.
_ASCII_RUNS = bytes(c if chr(c).isalnum() or c in _ASCII_JOINERS else 32 for c in range(128))
_ASCII_RUNS += b" " * 128
_ASCII_DOTS = bytes(46 if c in _ASCII_JOINERS else c for c in range(256))
JOINER = "\u01c0"
"""Joins the tokens of a written word into one index word (``1ǀ0`` for ``1.0``): a letter
to ``unicode61``, and in no word anyone writes."""


def _spread(match: re.Match[str]) -> str:
    return " " + " ".join(match.group()) + " "


def emoji_token(char: str) -> str:
    """The index word of one pictograph: ``emo`` + its code point in hex + ``x``.

    Letters and digits only, so unicode61 keeps it whole, and no Porter rule changes it.
    """
    return f"emo{ord(char):x}x"


def _emoji_word(match: re.Match[str]) -> str:
    return f" {emoji_token(match.group())} "


def _with_emoji_words(text: str) -> str:
    return _EMOJI.sub(_emoji_word, text)


def index_body(text: str) -> str:
    """The text FTS5 indexes for ``text``: CJK characters spaced apart, pictographs turned
    into words (:func:`emoji_token`), control bytes blanked.

    Pure and deterministic; see :data:`ANALYZER_VERSION`.
    """
    if not text.isascii():
        text = _CJK_RUN.sub(_spread, _with_emoji_words(text))
    return _CONTROL.sub(" ", text)


def word_parts(word: str) -> list[str]:
    """The lower-cased tokens of one :data:`LATIN_WORD` (``Caroline's`` -> ``caroline``)."""
    parts: list[str] = []
    for chunk in _JOINERS.split(word):
        pieces = _PART.findall(chunk)
        if len(pieces) == 2 and pieces[1].lower() in _CLITICS:
            pieces = pieces[:1]  # Caroline's -> caroline, don't -> don
        parts.extend(piece.lower() for piece in pieces)
    return parts


def joined_word(tokens: Sequence[str]) -> str | None:
    """The one index word of a written word of several tokens with a digit among them.

    Folded, stemmed and joined: ``("v1", "0")`` gives ``v1ǀ0``, what :func:`index_pairs`
    indexes for ``v1.0``, ``V1-0`` or ``v1:0``. ``None`` for one token, or for letters only
    (``ice-cream`` is also written ``ice cream``: such a word is looked up by its tokens).
    """
    if len(tokens) < 2 or all(token.isalpha() for token in tokens):
        return None
    return JOINER.join(stem(fold(token)) for token in tokens)


@lru_cache(maxsize=65_536)
def _joined(word: str) -> str | None:
    return joined_word(word_parts(word))


def _pattern_words(text: str) -> list[str]:
    """Every :data:`LATIN_WORD` of ``text`` that is more than one token, by the pattern."""
    return [word for word in _LATIN_WORD.findall(text) if not word.isalnum()]


def written_words(text: str, *, with_digit: bool = False) -> list[str]:
    """Every :data:`LATIN_WORD` of ``text`` that is more than one token, in order.

    What ``LATIN_WORD.findall`` finds, less the plain words, found faster: a ledger bullet's
    time (``- 10:05 ``) is read directly; in the rest of an ASCII text the runs of letters,
    digits and joiners are cut out by ``bytes.translate`` and only an irregular run (an
    apostrophe, two joiners in a row: ``https://``) is parsed by the pattern; other text is
    parsed only if a joiner stands between two letters or digits. ``with_digit`` leaves out
    ASCII words of letters only, cheaply (those :func:`joined_word` does not join).
    """
    words: list[str] = []
    time = _BULLET_TIME.match(text)
    if time is not None:
        words.append(time[0][2:-1])
        text = text[time.end() :]
    if not text.isascii():
        if _JOINED.search(text) is not None:
            words.extend(_pattern_words(text))
        return words
    data = text.encode()
    if with_digit and len(data.translate(None, _ASCII_DIGITS)) == len(data):
        return words
    for run in data.translate(_ASCII_RUNS).split():
        if run.isalnum() or (run := run.strip(_ASCII_JOINERS)).isalnum() or not run:
            continue
        if with_digit and len(run.translate(None, _ASCII_DIGITS)) == len(run):
            continue
        word = run.decode()
        if b"'" in run or b".." in run.translate(_ASCII_DOTS):
            words.extend(_pattern_words(word))
        else:
            words.append(word)
    return words


def index_pairs(text: str) -> str:
    """The words of ``text`` written as one but made of several index tokens, space apart.

    * The adjacent character pairs of each CJK run: ``数据库迁移`` gives ``数据 据库 库迁
      迁移``; a pair never spans two runs, so ``数，组`` holds no ``数组``.
    * Each :data:`LATIN_WORD` of several tokens with a digit as its :func:`joined_word`:
      ``10:05 see v1.0`` gives ``10ǀ05 v1ǀ0``, so a query for ``1.0`` reads one posting
      list, and only rows that wrote it, not every row that holds a ``1`` and a ``0``.

    Empty when there are none. Pure and deterministic, like :func:`index_body`: deleting a
    row replays exactly the words that were inserted.
    """
    words = [
        joined
        for word in written_words(text, with_digit=True)
        if (joined := _joined(word)) is not None
    ]
    if not text.isascii():
        words.extend(_CJK_PAIR.findall(text))
    return " ".join(words)


def cjk_pairs(tokens: tuple[str, ...]) -> list[str] | None:
    """The character pairs of a query phrase of two or more CJK characters, else ``None``."""
    if len(tokens) < 2 or not all(len(t) == 1 and _CJK_RUN.match(t) for t in tokens):
        return None
    return [a + b for a, b in itertools.pairwise(tokens)]


@lru_cache(maxsize=4096)
def _fold_char(ch: str) -> str:
    # unicode61 drops diacritics from Latin letters only (kana voicing marks stay).
    if not "\u00c0" <= ch <= "\u024f" and not "\u1e00" <= ch <= "\u1eff":
        return ch
    return "".join(c for c in unicodedata.normalize("NFD", ch) if not unicodedata.combining(c))


def fold(token: str) -> str:
    """Case-fold a token and strip Latin diacritics, as ``unicode61 remove_diacritics 2``."""
    token = token.lower()
    if token.isascii():
        return token
    return "".join(_fold_char(ch) for ch in token)


_LATIN_MARKED = re.compile("[\u00c0-\u024f\u1e00-\u1eff]")


def text_tokens(text: str) -> list[str]:
    """Folded tokens of ``text`` in order (one per CJK character or pictograph), unstemmed."""
    if not text.isascii():
        text = _with_emoji_words(text)
    tokens = _TOKEN.findall(text.lower())
    if _LATIN_MARKED.search(text) is None:
        return tokens
    return [fold(token) for token in tokens]
