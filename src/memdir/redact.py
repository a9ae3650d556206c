"""Mask secrets before text is persisted (ledgers, ``MEMORY.md``, session logs).

Memory files outlive the conversation that produced them and are re-injected into future
prompts, so an API key pasted into a chat must not be copied into them. :func:`redact`
replaces every match of :data:`DEFAULT_PATTERNS` with ``[REDACTED:<kind>]``; the result is
stable (redacting twice changes nothing).

The pattern list is plain data. Extend it for your own token formats::

    from memdir.redact import DEFAULT_PATTERNS, RedactionPattern, Redactor

    redactor = Redactor(extra=[RedactionPattern(name="acme", regex=r"acme_[0-9a-f]{32}")])
    SessionLog(ws, "s1", redact=redactor)

Patterns err on the side of masking: a false positive costs a few characters of memory, a
false negative leaks a credential into every future prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memdir.errors import ConfigError

__all__ = ["DEFAULT_PATTERNS", "RedactionPattern", "Redactor", "redact"]

_MARK = "[REDACTED:"


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactionPattern:
    """One kind of secret.

    Attributes:
        name: short label written into the mask (``[REDACTED:<name>]``).
        regex: the pattern (Python :mod:`re` syntax).
        group: the capture group to mask; ``0`` masks the whole match. Use a group to keep
            context such as ``password=`` or the user name of a URL.
        flags: :mod:`re` flags (e.g. ``re.IGNORECASE``).
    """

    name: str
    regex: str
    group: int = 0
    flags: int = 0
    compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", self.name):
            raise ConfigError(
                f"redaction pattern name {self.name!r} must be 1-40 of [A-Za-z0-9_.-]"
            )
        expected: tuple[tuple[str, object, type, str], ...] = (
            ("regex", self.regex, str, "a str"),
            ("group", self.group, int, "an int"),
            ("flags", self.flags, int, "an int"),
        )
        for field_name, value, wanted, what in expected:
            if isinstance(value, bool) or not isinstance(value, wanted):
                raise ConfigError(
                    f"redaction pattern {self.name!r}: {field_name} must be {what}, "
                    f"not {type(value).__name__}"
                )
        try:
            compiled = re.compile(self.regex, self.flags)
        except re.error as exc:
            raise ConfigError(
                f"redaction pattern {self.name!r} is not a valid regex: {exc}"
            ) from exc
        if not 0 <= self.group <= compiled.groups:
            raise ConfigError(
                f"redaction pattern {self.name!r} has no group {self.group} "
                f"(it has {compiled.groups})"
            )
        if compiled.search("") is not None:
            # It would mask between every two characters, and again on every pass.
            raise ConfigError(f"redaction pattern {self.name!r} must not match empty text")
        object.__setattr__(self, "compiled", compiled)


_I = re.IGNORECASE

DEFAULT_PATTERNS: tuple[RedactionPattern, ...] = (
    # Multi-line blocks first, so the single-token patterns below never see their insides.
    RedactionPattern(
        name="private_key",
        regex=r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*\Z)",
    ),
    RedactionPattern(
        name="jwt",
        regex=r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
    # Provider keys with a recognisable prefix.
    RedactionPattern(name="anthropic_key", regex=r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    RedactionPattern(name="openai_key", regex=r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    RedactionPattern(name="stripe_key", regex=r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    RedactionPattern(
        name="github_token", regex=r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"
    ),
    RedactionPattern(name="gitlab_token", regex=r"\bglpat-[A-Za-z0-9_-]{20,}"),
    RedactionPattern(name="slack_token", regex=r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    RedactionPattern(name="google_api_key", regex=r"\bAIza[0-9A-Za-z_-]{35}"),
    RedactionPattern(name="huggingface_token", regex=r"\bhf_[A-Za-z0-9]{30,}"),
    RedactionPattern(name="npm_token", regex=r"\bnpm_[A-Za-z0-9]{36}\b"),
    RedactionPattern(name="aws_access_key", regex=r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    RedactionPattern(
        name="aws_secret_key",
        regex=r"(aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        group=2,
        flags=_I,
    ),
    # Credentials carried in protocols.
    RedactionPattern(
        name="bearer_token",
        regex=r"(\bbearer\s+)(?!\[REDACTED)([A-Za-z0-9._~+/-]{16,}=*)",
        group=2,
        flags=_I,
    ),
    RedactionPattern(
        name="basic_auth",
        regex=r"(\bauthorization\s*:\s*basic\s+)([A-Za-z0-9+/]{8,}=*)",
        group=2,
        flags=_I,
    ),
    RedactionPattern(
        name="url_password",
        regex=r"(\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]{1,200}:)(?!\[REDACTED)([^\s@/]{1,200})(@)",
        group=2,
        flags=_I,
    ),
    # ``password = hunter2``, ``"api_key": "..."``, ``GITHUB_TOKEN=...``; the key must end in
    # the keyword, so ``max_tokens=4000`` is left alone.
    RedactionPattern(
        name="assignment",
        regex=r"((?<![A-Za-z0-9])[A-Za-z0-9_.-]{0,40}?"
        r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|"
        r"private[_-]?key|credentials?|auth)"
        r"[\"']?\s*(?::|=|=>)\s*[\"']?)"
        r"(?!\[REDACTED)([^\s\"'`,;]{3,})",
        group=2,
        flags=_I,
    ),
)
"""The built-in patterns, most specific first. See the module docstring to add your own."""


# A cheap, case-sensitive regex over the lower-cased text that finds something in every match
# of a built-in pattern; a pattern whose gate finds nothing is skipped. Most text holds no
# secret, and scanning it with every regex ran at ~2.4 MB/s, making a compaction's offload to
# the session log seven times slower than writing it.
def _gate(*literals: str, regex: str = "") -> re.Pattern[str]:
    return re.compile("|".join([*map(re.escape, literals), *([regex] if regex else [])]))


_GATES: dict[RedactionPattern, re.Pattern[str]] = dict(
    zip(
        DEFAULT_PATTERNS,
        (
            _gate("-----begin"),
            _gate("eyj"),
            _gate("sk-ant-"),
            _gate("sk-"),
            _gate("_live_", "_test_"),
            _gate("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
            _gate("glpat-"),
            _gate("xox"),
            _gate("aiza"),
            _gate("hf_"),
            _gate("npm_"),
            _gate("akia", "asia", "abia", "acca"),
            _gate("aws"),
            _gate("bearer"),
            _gate("authorization"),
            _gate("://"),
            _gate(
                regex=r"(?:pass(?:word|wd|phrase)|pwd|secret|token|api[_-]?key|apikey|"
                r"access[_-]?key|private[_-]?key|credentials?|auth)[\"']?\s*[:=]"
            ),
        ),
        strict=True,
    )
)
# Under re.IGNORECASE these match ASCII letters, but lower() does not turn them into them.
_FOLD = str.maketrans({"ı": "i", "ſ": "s", "\u0307": None})


class Redactor:
    """Masks secrets in text. Callable, so it plugs in wherever a ``str -> str`` hook is taken.

    Args:
        patterns: the patterns to apply, in order (default :data:`DEFAULT_PATTERNS`).
        extra: more patterns, applied after ``patterns``.
    """

    __slots__ = ("patterns",)

    def __init__(
        self,
        patterns: Sequence[RedactionPattern] = DEFAULT_PATTERNS,
        *,
        extra: Iterable[RedactionPattern] = (),
    ) -> None:
        self.patterns: tuple[RedactionPattern, ...] = (*patterns, *extra)
        for pattern in self.patterns:
            if not isinstance(pattern, RedactionPattern):
                raise ConfigError("redaction patterns must be RedactionPattern instances")

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

    def _apply(self, text: str, counts: dict[str, int] | None) -> str:
        if not isinstance(text, str):
            raise ConfigError(f"redact() takes a str, not {type(text).__name__}")
        lowered = _lowered(text)
        for pattern in self.patterns:
            gate = _GATES.get(pattern)
            if gate is not None and gate.search(lowered) is None:
                continue
            masked = _sub(pattern, text, counts)
            if masked != text:
                text, lowered = masked, _lowered(masked)
        return text


def _lowered(text: str) -> str:
    lowered = text.lower()
    if not lowered.isascii() and ("ı" in lowered or "ſ" in lowered or "\u0307" in lowered):
        lowered = lowered.translate(_FOLD)
    return lowered


def _sub(pattern: RedactionPattern, text: str, counts: dict[str, int] | None) -> str:
    mask = f"{_MARK}{pattern.name}]"

    def replace(match: re.Match[str]) -> str:
        start, end = match.span(pattern.group)
        if match.group(pattern.group).startswith(_MARK):
            return match.group(0)
        if counts is not None:
            counts[pattern.name] = counts.get(pattern.name, 0) + 1
        whole_start = match.start(0)
        return match.group(0)[: start - whole_start] + mask + match.group(0)[end - whole_start :]

    return pattern.compiled.sub(replace, text)


_DEFAULT = Redactor()


def redact(text: str) -> str:
    """Mask secrets in ``text`` with the built-in patterns (see :class:`Redactor`)."""
    return _DEFAULT.redact(text)
