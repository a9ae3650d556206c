"""Text token counting: a script-aware estimator and an optional exact BPE tokenizer.

The estimator reads a text as UTF-8 and sorts every character into a small number of
classes with ``bytes.translate`` (which runs in C): ASCII letters, words, digits,
punctuation, whitespace, Han characters, kana, Hangul, full-width forms, other scripts,
emoji. The token count is a linear function of those class counts. The coefficients are
fitted by ``benchmarks/tokens.py --fit`` against the exact tokenizer on one half of a
generated corpus (English prose, Chinese, code, tool-call JSON, memory bullets, other
languages); the other half is held out to measure the error (``docs/benchmarks.md``).

Being linear, the estimate is additive: counting two texts separately gives the same
result as counting them joined (up to one token of rounding per text), which is what a
per-message cache needs.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "FEATURES",
    "PROFILES",
    "EstimatorProfile",
    "features",
    "load_exact",
]

# -- byte tables ------------------------------------------------------------------------

_CONTINUATION: Final = bytes(range(0x80, 0xC0))  # UTF-8 continuation bytes: dropped
_ASCII_PUNCT: Final = frozenset(
    i for i in range(0x80) if not chr(i).isalnum() and chr(i) not in " \t\n\r\x0b\x0c"
)


def _class_of(byte: int) -> bytes:
    """Class letter of one byte (an ASCII character or a UTF-8 lead byte)."""
    if 0x61 <= byte <= 0x7A:
        return b"a"  # lower-case letter
    if 0x41 <= byte <= 0x5A:
        return b"A"  # upper-case letter
    if 0x30 <= byte <= 0x39:
        return b"0"
    if byte in (0x20, 0x09, 0x0B, 0x0C):
        return b" "
    if byte in (0x0A, 0x0D):
        return b"\n"
    if byte < 0x80:
        return b"."  # ASCII punctuation and control characters
    if byte < 0xE0:
        return b"e"  # 2-byte: Latin accents, Greek, Cyrillic, Hebrew, Arabic
    if byte == 0xE2:
        return b"p"  # U+2000–2FFF: general punctuation (“ ” — …), symbols, arrows
    if byte == 0xE3:
        return b"k"  # U+3000–3FFF: CJK punctuation (、。「」), hiragana, katakana
    if 0xE4 <= byte <= 0xE9:
        return b"h"  # U+4000–9FFF: CJK unified ideographs
    if 0xEA <= byte <= 0xED:
        return b"g"  # U+A000–DFFF: Hangul syllables (and Yi)
    if byte == 0xEF:
        return b"f"  # U+F000–FFFF: full-width forms (，：？！（）), compatibility ideographs
    if byte >= 0xF0:
        return b"x"  # 4-byte: emoji, rare ideographs
    return b"o"  # U+0800–1FFF and private use: Indic, Thai, Georgian, ...


_CLASSES: Final = b"".join(_class_of(i) for i in range(256))
_LETTER_RUNS: Final = bytes(b"a"[0] if chr(c) in "aA" else b" "[0] for c in _CLASSES)
_DIGIT_RUNS: Final = bytes(b"0"[0] if chr(c) == "0" else b" "[0] for c in _CLASSES)
_PUNCT_RUNS: Final = bytes(b"."[0] if chr(c) in ".pf" else b" "[0] for c in _CLASSES)
_HAN_RUNS: Final = bytes(b"h"[0] if chr(c) == "h" else b" "[0] for c in _CLASSES)
_OTHER_RUNS: Final = bytes(b"e"[0] if chr(c) in "eo" else b" "[0] for c in _CLASSES)

FEATURES: Final = (
    "letters",  # ASCII letters
    "words",  # runs of ASCII letters
    "case_breaks",  # lower→upper inside a word (camelCase splits in BPE pre-tokenisation)
    "digits",
    "digit_runs",
    "punct",  # ASCII punctuation and symbols
    "punct_runs",
    "newlines",
    "indent",  # pairs of spaces (indentation, alignment)
    "han",  # CJK ideographs
    "han_runs",
    "cjk_punct_kana",
    "hangul",
    "fullwidth",
    "general_punct",  # U+2000–2FFF
    "other_letters",  # 2-byte scripts and other 3-byte scripts
    "other_runs",
    "astral",  # emoji and other 4-byte characters
)
"""Names of the feature counts :func:`features` returns, in order."""


def _runs(chars: bytes, table: bytes, mark: bytes) -> int:
    """Number of maximal runs of one class in ``chars`` (one byte per character)."""
    mapped = chars.translate(table)
    return mapped.count(b" " + mark) + (1 if mapped[:1] == mark else 0)


def features(text: str) -> tuple[int, ...]:
    """Count the character classes of ``text`` (see :data:`FEATURES`)."""
    wide = not text.isascii()
    # One byte per character: ASCII as is, a multi-byte character as its UTF-8 lead byte.
    chars = (
        text.encode("utf-8", "surrogatepass").translate(None, _CONTINUATION)
        if wide
        else text.encode("ascii")
    )
    classes = chars.translate(_CLASSES)
    count = classes.count
    letters = count(b"a") + count(b"A")
    digits = count(b"0")
    punct = count(b".")
    out = [
        letters,
        _runs(chars, _LETTER_RUNS, b"a") if letters else 0,
        count(b"aA") if letters else 0,
        digits,
        _runs(chars, _DIGIT_RUNS, b"0") if digits else 0,
        punct,
        # Non-ASCII punctuation (classes p, f) also forms punctuation runs.
        _runs(chars, _PUNCT_RUNS, b".") if punct or wide else 0,
        count(b"\n"),
        count(b"  "),
    ]
    if not wide:
        return (*out, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    han = count(b"h")
    other = count(b"e") + count(b"o")
    out += [
        han,
        _runs(chars, _HAN_RUNS, b"h") if han else 0,
        count(b"k"),
        count(b"g"),
        count(b"f"),
        count(b"p"),
        other,
        _runs(chars, _OTHER_RUNS, b"e") if other else 0,
        count(b"x"),
    ]
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class EstimatorProfile:
    """Coefficients of the linear estimator for one target tokenizer.

    Attributes:
        name: the encoding the coefficients were fitted against (``"o200k_base"``).
        weights: tokens per unit of each feature, keyed by the names in :data:`FEATURES`.
    """

    name: str
    weights: Mapping[str, float]
    _vector: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.weights) - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown estimator features: {sorted(unknown)}")
        if any(w < 0 or not math.isfinite(w) for w in self.weights.values()):
            raise ValueError("estimator weights must be finite and non-negative")
        vector = tuple(float(self.weights.get(name, 0.0)) for name in FEATURES)
        object.__setattr__(self, "_vector", vector)

    def estimate(self, text: str) -> int:
        """Estimated token count of ``text`` (0 for an empty text, else at least 1)."""
        if not text:
            return 0
        total: float = sum(map(operator.mul, self._vector, features(text)))
        # The epsilon keeps a sum such as 2.0000000001 from rounding up to 3.
        return max(1, math.ceil(total - 1e-9))


# Fitted by `python benchmarks/tokens.py --fit` on the calibration half of its corpus
# (non-negative least squares on relative error, every category weighted equally).
_O200K: Final = {
    "letters": 0.0675,
    "words": 0.7716,
    "case_breaks": 1.0452,
    "digits": 0.0304,
    "digit_runs": 2.1653,
    "punct": 0.1299,
    "punct_runs": 0.602,
    "newlines": 0.3906,
    "indent": 0.1701,
    "han": 0.7214,
    "han_runs": 0.5029,
    "cjk_punct_kana": 0.6677,
    "hangul": 0.7706,
    "general_punct": 0.4203,
    "other_letters": 0.197,
    "other_runs": 0.6799,
}
_CL100K: Final = {
    "letters": 0.0628,
    "words": 0.7988,
    "case_breaks": 0.9487,
    "digit_runs": 2.2463,
    "punct": 0.137,
    "punct_runs": 0.576,
    "newlines": 0.3776,
    "indent": 0.1614,
    "han": 1.0259,
    "han_runs": 0.2679,
    "cjk_punct_kana": 1.0253,
    "hangul": 1.2318,
    "fullwidth": 0.0542,
    "general_punct": 0.3361,
    "other_letters": 0.2812,
    "other_runs": 1.3103,
}

PROFILES: Final[Mapping[str, EstimatorProfile]] = {
    "o200k_base": EstimatorProfile(name="o200k_base", weights=_O200K),
    "cl100k_base": EstimatorProfile(name="cl100k_base", weights=_CL100K),
}
"""Built-in estimator profiles, keyed by the encoding they imitate."""


def load_exact(encoding: str) -> Callable[[str], int] | None:
    """Return an exact token-count function for ``encoding``, or ``None`` if unavailable.

    Uses the optional ``quicktok`` package (``pip install 'memdir[tokens]'``), which bundles
    its BPE files, so nothing is downloaded. Special-token text such as ``<|endoftext|>`` is
    counted as ordinary text, as a provider does with user content.
    """
    try:
        import quicktok
    except ImportError:
        return None
    try:
        enc = quicktok.get_encoding(encoding)
    except (RuntimeError, ValueError, KeyError, OSError):
        return None
    raw_count: Callable[[str], int] = enc.count

    def count(text: str) -> int:
        try:
            return raw_count(text)
        except (TypeError, UnicodeError):
            # Lone surrogates cannot be encoded; a provider would see U+FFFD instead.
            return raw_count(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))

    return count
