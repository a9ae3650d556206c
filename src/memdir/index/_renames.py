"""Updates of a name: a later line that says what replaced what.

"We moved the billing database from Postgres to MySQL", "replaced Jenkins with GitHub
Actions", "CI 从 Jenkins 换成了 GitLab": numbers are compared by their kind
(:mod:`memdir.index._updates`), but a name has no kind to compare it with another, so only a
line that names both the old and the new value states an update of a name. An earlier line
among the best hits that says the old name (and not the new one) near the same query words is
the stale statement.
"""

from __future__ import annotations

import re
from typing import Final

from memdir.index._stopwords import EN_STOPWORDS

__all__ = ["renames"]

_WORD: Final = r"[^\W\d_][\w.+#-]*"  # a word that starts with a letter: Postgres, C++, k8s
_PHRASE: Final = rf"({_WORD}(?:\s+[\w.+#-]+){{0,3}}?)"  # a name, with its article
_FROM_TO = re.compile(
    r"\b(?:switch(?:ed|ing)?|mov(?:ed|ing)|migrat(?:ed|ing)|chang(?:ed|ing)|went|"
    r"upgrad(?:ed|ing)|downgrad(?:ed|ing)|convert(?:ed|ing)|port(?:ed|ing)|transition(?:ed|ing))"
    rf"\b(?:\s+[\w.-]+){{0,4}}?\s+from\s+{_PHRASE}\s+to\s+(?:the\s+|an?\s+)?({_WORD})",
    re.IGNORECASE,
)
_REPLACED = re.compile(
    rf"\b(?:replac(?:ed|ing)|swapp(?:ed|ing))\s+{_PHRASE}\s+(?:with|for|by)\s+"
    rf"(?:the\s+|an?\s+)?({_WORD})",
    re.IGNORECASE,
)
_CJK = re.compile(
    r"(?:从\s*)?([A-Za-z][\w.+#-]*)\s*(?:改为|改成|换成|换为|迁移到|迁到|切换到|切到|改用)了?\s*"
    r"([A-Za-z][\w.+#-]*)"
)
# Words of a name that say nothing of which name it is.
_GENERIC = frozenset(
    [
        "old",
        "older",
        "new",
        "newer",
        "existing",
        "current",
        "previous",
        "former",
        "legacy",
        "whole",
        "entire",
    ]
)

Names = frozenset[str]


def _names(phrase: str) -> Names:
    return frozenset(
        word
        for raw in phrase.lower().split()
        if (word := raw.strip(".-"))
        and word not in EN_STOPWORDS
        and word not in _GENERIC
        and not word[0].isdigit()
    )


def renames(text: str) -> tuple[tuple[Names, Names], ...]:
    """What ``text`` says replaced what: ``(old, new)``, the words of the old name and the
    first word of the new one (lower case; function words and words such as "old" left
    out)."""
    found: list[tuple[Names, Names]] = []
    low = text.lower()  # a quick look first: most lines have none of the three forms
    for pattern, hint in (
        (_FROM_TO, " from " in low and " to " in low),
        (_REPLACED, "replac" in low or "swapp" in low),
        (_CJK, not text.isascii()),
    ):
        if not hint:
            continue
        for match in pattern.finditer(text):
            old, new = _names(match.group(1)), _names(match.group(2))
            if old and new and old.isdisjoint(new):
                found.append((old, new))
    return tuple(dict.fromkeys(found))
