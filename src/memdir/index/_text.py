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
from functools import lru_cache

__all__ = [
    "ANALYZER_VERSION",
    "CJK_CHARS",
    "EMOJI",
    "HAN",
    "HANGUL",
    "HIRAGANA",
    "KATAKANA",
    "cjk_pairs",
    "emoji_token",
    "fold",
    "index_body",
    "index_pairs",
    "text_tokens",
]

ANALYZER_VERSION = "cjk-unigram+emoji/2"
"""Changes whenever :func:`index_body` or :func:`index_pairs` would produce different tokens
(forces a rebuild)."""

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


def index_pairs(text: str) -> str:
    """The adjacent character pairs of each run of CJK characters in ``text``, space apart.

    ``数据库迁移`` gives ``数据 据库 库迁 迁移``; a pair never spans two runs, so ``数，组``
    holds no ``数组``. Empty when no run has two characters. Pure and deterministic, like
    :func:`index_body`: deleting a row replays exactly the pairs that were inserted.
    """
    if text.isascii():
        return ""
    return " ".join(_CJK_PAIR.findall(text))


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
