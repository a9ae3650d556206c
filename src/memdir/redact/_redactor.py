"""The :class:`Redactor`: applies patterns in order, skipping those a cheap check rules out.

Most text holds no secret, and most patterns need a literal it does not hold, so the cost of a
call is mostly the checks. They are shared: each keyword is looked for at most once per text,
and the token patterns (``in_token``, the provider formats) are only considered when the text
has a run of 16 or more token characters whose character pairs start one of their keywords.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import pairwise

from memdir.errors import ConfigError
from memdir.redact._engine import MARK, RedactionPattern, Span, lowered

__all__ = ["Redactor"]

_RUN = re.compile(r"[a-z0-9_.~+/=:%-]{16,}")
_MASKED = re.compile(r"\[REDACTED:[A-Za-z0-9_.-]{1,40}\]")
# Past this many characters of token runs, counting their character pairs costs more than
# looking for each keyword.
_PAIRS_UP_TO = 32_768
# Past this many characters, remembering which keywords were found pays for itself (several
# patterns share "pass", "token", "key"); below, looking again is cheaper than the bookkeeping.
_CACHE_FROM = 256
_MAX_PASSES = 16
# A mask with a character next to it that a token match could start or end with.
_TOUCHING = re.compile(
    r"\[REDACTED:[A-Za-z0-9_.-]{1,40}\][^\s\"'`,;:()<>{}@=]|[^\s\"'`,;:()<>{}@=]\[REDACTED:"
)


class _Scan:
    """The text being masked: lowered, its token runs, which keywords it holds.

    The runs are found once, in the text as given: a mask cannot create a token match (``[``
    and ``]`` are not token characters, and no token pattern matches ``REDACTED:<name>``), so
    the runs of the original text still hold every keyword a later token match needs. The
    lowered text, used for positions, is renewed after each mask.
    """

    __slots__ = ("_in_low", "_in_runs", "ascii", "candidates", "counted", "low", "runs", "text")

    def __init__(self, text: str) -> None:
        self.runs = "\n".join(set(_RUN.findall(lowered(text))))  # logs repeat theirs
        self._in_runs: dict[str, bool] = {}
        self.candidates: set[int] | None = None  # token patterns worth trying; None: all
        self.counted = False  # whether ``candidates`` was computed
        self.update(text)

    def update(self, text: str) -> None:
        """Take the text after a mask."""
        self.text = text
        self.low = lowered(text)
        self.ascii = self.low.isascii()
        self._in_low: dict[str, bool] = {}

    def passes(self, pattern: RedactionPattern) -> bool:
        """Whether ``pattern`` may match: one of its keywords is there and its gate matches."""
        haystack = self.runs if pattern.in_token else self.low
        if not haystack or (pattern.non_ascii and self.ascii):
            return False
        if pattern.keywords:
            if len(haystack) < _CACHE_FROM:
                for word in pattern.presence:
                    if word in haystack:
                        break
                else:
                    return False
            else:
                cache = self._in_runs if pattern.in_token else self._in_low
                for word in pattern.presence:
                    hit = cache.get(word)
                    if hit is None:
                        hit = cache[word] = word in haystack
                    if hit:
                        break
                else:
                    return False
        gate = pattern.compiled_gate
        return gate is None or gate.search(self.low) is not None


class Redactor:
    """Masks secrets in text. Callable, so it plugs in wherever a ``str -> str`` hook is taken.

    Args:
        patterns: the patterns to apply, in order (default: the built-in ones).
        extra: more patterns, applied after ``patterns``.
    """

    __slots__ = ("_blocks", "_by_pair", "_unpaired", "patterns")

    def __init__(
        self,
        patterns: Sequence[RedactionPattern] | None = None,
        *,
        extra: Iterable[RedactionPattern] = (),
    ) -> None:
        if patterns is None:
            from memdir.redact._rules import DEFAULT_PATTERNS

            patterns = DEFAULT_PATTERNS
        if isinstance(patterns, RedactionPattern | str):
            raise ConfigError("patterns must be a sequence of RedactionPattern")
        self.patterns: tuple[RedactionPattern, ...] = (*patterns, *extra)
        for pattern in self.patterns:
            if not isinstance(pattern, RedactionPattern):
                raise ConfigError("redaction patterns must be RedactionPattern instances")
        # Token patterns by the first two characters of each keyword; those with a keyword of
        # one character, or none, are always candidates.
        self._by_pair: dict[tuple[str, str], set[int]] = {}
        self._unpaired: set[int] = set()
        for i, pattern in enumerate(self.patterns):
            if not pattern.in_token:
                continue
            if not pattern.keywords or any(len(w) < 2 for w in pattern.keywords):
                self._unpaired.add(i)
                continue
            for word in pattern.keywords:
                self._by_pair.setdefault((word[0], word[1]), set()).add(i)
        # Consecutive token patterns form a block that is skipped whole when no run matters.
        self._blocks: list[tuple[bool, tuple[int, ...]]] = []
        for i, pattern in enumerate(self.patterns):
            if self._blocks and self._blocks[-1][0] == pattern.in_token:
                self._blocks[-1] = (pattern.in_token, (*self._blocks[-1][1], i))
            else:
                self._blocks.append((pattern.in_token, (i,)))

    def __repr__(self) -> str:
        return f"Redactor({len(self.patterns)} patterns)"

    def __call__(self, text: str) -> str:
        """Same as :meth:`redact`."""
        return self.redact(text)

    def redact(self, text: str) -> str:
        """Return ``text`` with every secret replaced by ``[REDACTED:<kind>]``."""
        return self._apply(text, None)

    def findings(self, text: str) -> dict[str, int]:
        """How many secrets of each kind ``text`` holds (the text itself is not returned)."""
        counts: dict[str, int] = {}
        self._apply(text, counts)
        return counts

    def _candidates(self, scan: _Scan) -> set[int] | None:
        """Token patterns that may match (``None``: all of them)."""
        runs = scan.runs
        if len(runs) > _PAIRS_UP_TO:
            return None
        pairs = set(pairwise(runs))
        found = set(self._unpaired)
        for pair in pairs & self._by_pair.keys():
            found |= self._by_pair[pair]
        return found

    def _apply(self, text: str, counts: dict[str, int] | None) -> str:
        if not isinstance(text, str):
            raise ConfigError(f"redact() takes a str, not {type(text).__name__}")
        # Until nothing changes: a mask can end a word, so a token right after a masked one
        # gains the word boundary its pattern needs (``AIza…sk-proj-…``). Only a mask that
        # touches a token character can do that, so most texts take one pass; every further
        # pass masks more, so this ends.
        for _ in range(_MAX_PASSES):
            masked = self._pass(text, counts)
            if masked == text or _TOUCHING.search(masked) is None:
                return masked
            text = masked
        return text

    def _pass(self, text: str, counts: dict[str, int] | None) -> str:
        scan = _Scan(text)
        for in_token, block in self._blocks:
            for i in self._todo(scan, block, in_token):
                pattern = self.patterns[i]
                if not scan.passes(pattern):
                    continue
                spans = pattern.find(scan.text, scan.low)
                if spans:
                    scan.update(
                        _mask(scan.text, spans, f"{MARK}{pattern.name}]", pattern.name, counts)
                    )
        return scan.text

    def _todo(self, scan: _Scan, block: tuple[int, ...], in_token: bool) -> Sequence[int]:
        """The patterns of ``block`` worth trying on ``scan``, in order."""
        if not in_token:
            return block
        if not scan.runs:
            return ()
        if not scan.counted:
            scan.candidates, scan.counted = self._candidates(scan), True
        if scan.candidates is None:
            return block
        return sorted(scan.candidates.intersection(block))


def _mask(text: str, spans: list[Span], mask: str, name: str, counts: dict[str, int] | None) -> str:
    if MARK in text:
        # A span never cuts a mask in two: it takes the whole mask or none of it.
        masks = [m.span() for m in _MASKED.finditer(text)]
        spans = [_widen(span, masks) for span in spans]
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if counts is not None:
        counts[name] = counts.get(name, 0) + len(merged)
    out: list[str] = []
    at = 0
    for start, end in merged:
        out += (text[at:start], mask)
        at = end
    out.append(text[at:])
    return "".join(out)


def _widen(span: Span, masks: list[Span]) -> Span:
    start, end = span
    for a, b in masks:
        if a < end and start < b:
            start, end = min(start, a), max(end, b)
    return start, end
