"""Standing rules: lines that say how every later request on a topic is to be handled.

``Always format dates as MM/DD/YYYY when I ask about deadlines``, ``Never push to main``,
``From now on answer in German``, ``以后回答都用中文``: such a line is not a fact of one day but
an instruction that holds until it is changed, and the request it applies to (``When is the
final submission due?``) shares only a word or two with it. Search ranks it higher when it
matches (:class:`memdir.index._rank.RankConfig` ``rules``). A line is one when its text,
after a list marker, a time and a speaker (``- 10:42 user: ``), starts with such a word; a
rule word later in a line (``I always loved painting``) is no rule.
"""

from __future__ import annotations

import re

__all__ = ["standing_rule"]

_LEAD = r"^\s*(?:[-*+]\s+)?(?:\d{1,2}:\d{2}\s+)?"
_RULE = re.compile(
    _LEAD + r"(?:[^\s:]{1,40}:\s+)?(?:please\s+)?"
    r"(?:always|never|from now on|going forward|whenever|remember to|make sure to)\b"
    r"|" + _LEAD + r"(?:[^\s:：]{1,40}[:：]\s*)?请?"
    r"(?:以后|今后|每次|总是|一律|务必|永远不要|不要再)",
    re.IGNORECASE,
)
_HEAD = 200  # the characters a rule must start within


def standing_rule(content: str) -> bool:
    """Whether a line (a search unit's text) states a standing rule (see the module)."""
    return _RULE.match(content[:_HEAD]) is not None
