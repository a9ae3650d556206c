"""The masking engine: :class:`RedactionPattern` (one kind of secret) and :class:`Redactor`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from memdir.errors import ConfigError

__all__ = ["MARK", "RedactionPattern", "Span", "lowered"]

MARK = "[REDACTED:"
Span = tuple[int, int]
Check = Callable[[re.Match[str]], bool]
Spans = Callable[[re.Match[str]], Iterable[Span]]


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactionPattern:
    """One kind of secret.

    Attributes:
        name: short label written into the mask (``[REDACTED:<name>]``).
        regex: the pattern (Python :mod:`re` syntax).
        group: the capture group to mask, by number or name; ``0`` masks the whole match. Use
            a group to keep context such as ``password=`` or the user name of a URL.
        flags: :mod:`re` flags (e.g. ``re.IGNORECASE``).
        keywords: lower-case literals of which every match contains one (e.g. the token's
            prefix); when the lower-cased text holds none of them the regex is not run at all.
            Empty: always run.
        gate: a regex that finds something in the lower-cased text whenever ``regex`` matches
            (a cheaper, case-sensitive pre-check); ``""``: none.
        keyword_first: every match begins with one of the keywords (compared lower-cased);
            the regex is then tried only where a keyword occurs instead of at every position.
        in_token: every match is ASCII and lies within a run of at least 16 characters of
            ``[A-Za-z0-9_.~+/=:%-]`` (true of provider tokens); the keywords are then looked
            for in such runs only, which prose and code mostly have none of.
        check: called with each match; return ``False`` to leave that match as it is (e.g.
            "the value is not random enough to be a key").
        spans: called with each match instead of ``group`` and ``check``: the ``(start, end)``
            offsets in ``match.string`` to mask (for a match that holds several secrets, or
            one found near it).
    """

    name: str
    regex: str
    group: int | str = 0
    flags: int = 0
    keywords: tuple[str, ...] = ()
    gate: str = ""
    keyword_first: bool = False
    in_token: bool = False
    check: Check | None = field(default=None, compare=False)
    spans: Spans | None = field(default=None, compare=False)
    compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)
    compiled_gate: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    non_ascii: bool = field(init=False, repr=False, compare=False)
    presence: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", self.name):
            raise ConfigError(
                f"redaction pattern name {self.name!r} must be 1-40 of [A-Za-z0-9_.-]"
            )
        expected: tuple[tuple[str, object, type | tuple[type, ...], str], ...] = (
            ("regex", self.regex, str, "a str"),
            ("group", self.group, (int, str), "an int or a group name"),
            ("flags", self.flags, int, "an int"),
            ("gate", self.gate, str, "a str"),
        )
        for field_name, value, wanted, what in expected:
            if isinstance(value, bool) or not isinstance(value, wanted):
                raise ConfigError(
                    f"redaction pattern {self.name!r}: {field_name} must be {what}, "
                    f"not {type(value).__name__}"
                )
        for hook_name, hook in (("check", self.check), ("spans", self.spans)):
            if hook is not None and not callable(hook):
                raise ConfigError(f"redaction pattern {self.name!r}: {hook_name} must be callable")
        words: object = self.keywords  # callers pass any iterable, or a str by mistake
        if (
            isinstance(words, str)
            or not isinstance(words, tuple | list)
            or not all(isinstance(w, str) and w for w in words)
        ):
            raise ConfigError(
                f"redaction pattern {self.name!r}: keywords must be a tuple of non-empty strings"
            )
        object.__setattr__(self, "keywords", tuple(w.lower() for w in self.keywords))
        # To know whether any keyword is there, those holding a shorter one need no look.
        kept = tuple(w for w in self.keywords if not any(o != w and o in w for o in self.keywords))
        object.__setattr__(self, "presence", tuple(dict.fromkeys(kept)))
        # Keywords in Chinese, Japanese, Korean: ASCII text cannot hold them.
        object.__setattr__(
            self, "non_ascii", bool(self.keywords) and not any(w.isascii() for w in self.keywords)
        )
        for flag_name in ("keyword_first", "in_token"):
            if not isinstance(getattr(self, flag_name), bool):
                raise ConfigError(f"redaction pattern {self.name!r}: {flag_name} must be a bool")
        if self.keyword_first and not self.keywords:
            raise ConfigError(f"redaction pattern {self.name!r}: keyword_first needs keywords")
        try:
            compiled = re.compile(self.regex, self.flags)
        except re.error as exc:
            raise ConfigError(
                f"redaction pattern {self.name!r} is not a valid regex: {exc}"
            ) from exc
        if isinstance(self.group, str):
            if self.group not in compiled.groupindex:
                raise ConfigError(f"redaction pattern {self.name!r} has no group {self.group!r}")
        elif not 0 <= self.group <= compiled.groups:
            raise ConfigError(
                f"redaction pattern {self.name!r} has no group {self.group} "
                f"(it has {compiled.groups})"
            )
        if compiled.search("") is not None:
            # It would mask between every two characters, and again on every pass.
            raise ConfigError(f"redaction pattern {self.name!r} must not match empty text")
        object.__setattr__(self, "compiled", compiled)
        try:
            gate = re.compile(self.gate) if self.gate else None
        except re.error as exc:
            raise ConfigError(
                f"redaction pattern {self.name!r}: gate is not a valid regex: {exc}"
            ) from exc
        object.__setattr__(self, "compiled_gate", gate)

    def find(self, text: str, low: str | None = None) -> list[Span]:
        """The spans of ``text`` this pattern masks (not yet masked ones only).

        ``low`` is ``lowered(text)`` when the caller has it.
        """
        found: list[Span] = []
        for match in self._matches(text, lowered(text) if low is None else low):
            if self.spans is not None:
                found.extend(self.spans(match))
            elif match.group(self.group) is not None and (self.check is None or self.check(match)):
                found.append(match.span(self.group))
        return [(a, b) for a, b in found if b > a and not text.startswith(MARK, a)]

    def _matches(self, text: str, low: str) -> Iterator[re.Match[str]]:
        """Like ``finditer``; with ``keyword_first``, tried only where a keyword starts."""
        if not self.keyword_first or len(low) != len(text):
            yield from self.compiled.finditer(text)
            return
        starts: set[int] = set()
        for word in self.keywords:
            at = low.find(word)
            while at >= 0:
                starts.add(at)
                at = low.find(word, at + 1)
        end = 0
        for at in sorted(starts):
            if at < end:
                continue  # inside the previous match, as finditer would skip it
            match = self.compiled.match(text, at)
            if match is not None:
                yield match
                end = max(match.end(), at + 1)


# Under re.IGNORECASE these match ASCII letters, but lower() does not turn them into them.
_FOLD = str.maketrans({"ı": "i", "ſ": "s", "\u0307": None})


def lowered(text: str) -> str:
    """``text`` lower-cased the way keyword gates compare it."""
    low = text.lower()
    if not low.isascii() and ("ı" in low or "ſ" in low or "\u0307" in low):
        low = low.translate(_FOLD)
    return low
