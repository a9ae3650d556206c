"""Text analysis shared by indexing and querying.

SQLite's ``unicode61`` tokenizer keeps a run of Chinese, Japanese or Korean characters as one
token, so ``迁移`` would never match inside ``我们讨论了数据库迁移方案``. Before text reaches
FTS5 every CJK character is therefore set apart by spaces (one token per character). That is a
pure function of the text, with no dictionary, so deleting a row from the contentless FTS5
table can re-derive exactly the tokens that were inserted. Queries are cut into words (see
:mod:`memdir.index._query`) and each CJK word becomes a phrase of its characters, which
matches the word anywhere, including 2-character terms inside longer words.
"""

from __future__ import annotations

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
    "emoji_token",
    "fold",
    "index_body",
    "text_tokens",
]

ANALYZER_VERSION = "cjk-unigram+emoji/2"
"""Changes whenever :func:`index_body` would produce different tokens (forces a rebuild)."""

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
