"""The built-in patterns, in the order they are applied."""

from __future__ import annotations

from memdir.redact._context import CONTEXT_PATTERNS
from memdir.redact._engine import RedactionPattern
from memdir.redact._pairs import PAIR_PATTERNS
from memdir.redact._providers import PROVIDER_PATTERNS

__all__ = ["DEFAULT_PATTERNS"]

PRIVATE_KEY = RedactionPattern(
    # A whole block, even cut off before its END line (and with JSON's \\n inside).
    name="private_key",
    regex=r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*\Z)",
    keywords=("-----begin",),
)

DEFAULT_PATTERNS: tuple[RedactionPattern, ...] = (
    # Multi-line blocks first, so no other pattern sees their insides; a credential pair's
    # secret before the key id it is found by is masked.
    PRIVATE_KEY,
    *PAIR_PATTERNS,
    *PROVIDER_PATTERNS,
    *CONTEXT_PATTERNS,
)
"""The built-in patterns, most specific first. See :mod:`memdir.redact` to add your own."""
