"""Standing rules: lines that say how every later request on a topic is to be handled.

``Always format dates as MM/DD/YYYY when I ask about deadlines``, ``Never push to main``,
``From now on answer in German``, ``以后回答都用中文``: such a line is not a fact of one day but
an instruction that holds until it is changed, and the request it applies to (``When is the
final submission due?``) shares only a word or two with it. Search ranks it higher when it
matches (:class:`memdir.index._rank.RankConfig` ``rules``). A line is one when its text,
after a list marker, a time and a speaker (``- 10:42 user: ``), starts with such a word; a
rule word later in a line (``I always loved painting``) is no rule, nor is ``Always here to
help`` or ``Never been there`` (no order follows), nor an assistant's line (``Assistant:
Always happy to help!``).
"""

from __future__ import annotations

import re

__all__ = ["RULE_START", "standing_rule"]

# After "always" / "never" an order, not a state or a past ("Always here to help", "Never
# been there", "Always good to hear", "Never thought so", "Always running around").
_NOT_AN_ORDER = (
    r"a|an|the|so|too|very|more|ever|again|here|there|up|down|on|in|at|by|for|with|around|about"
    r"|i|we|you|he|she|they|it|this|that|me|him|us|them|my|your|his|her|our|their|someone"
    r"|been|had|done|gone|seen|heard|met|known|thought|felt|got|was|were|did|knew|went|came"
    r"|saw|said|told|tried|loved|liked|wanted|enjoyed|love|like|mind|say|good|great|nice|happy"
    r"|glad|fun|lovely|cool|awesome|amazing|exciting|interesting|ready|welcome|best|better"
    r"|\w+ing"
)
_EN = (
    rf"(?:please\W+)?(?:(?:always|never)\b(?!\W+(?:{_NOT_AN_ORDER})\b)"
    r"|from now on\b|going forward\b)"
)
_ZH = r"请?(?:以后|今后|每次|总是|一律|务必|永远不要|不要再)"
# A search unit's text, a ledger bullet: a list marker, a time and a speaker come first (not
# an assistant: "Assistant: Always happy to help!" sets no rule).
_LEAD = (
    r"\s*(?:[-*+]\s+)?(?:\d{1,2}:\d{2}\s+)?"
    r"(?:(?!assistant\b|ai\b|助手|助理)[^\s:：]{1,40}[:：]\s*)?"
)
RULE_START = re.compile(rf"^{_LEAD}\W*(?:{_EN}|{_ZH})", re.IGNORECASE)
"""How a standing rule starts, after a list marker, a time and a speaker when the text has
them: the extractive model keeps and files such a sentence as a rule
(:mod:`memdir.models.extractive`)."""
_HEAD = 200  # the characters a rule must start within


def standing_rule(content: str) -> bool:
    """Whether a line (a search unit's text) states a standing rule (see the module)."""
    return RULE_START.match(content[:_HEAD]) is not None
