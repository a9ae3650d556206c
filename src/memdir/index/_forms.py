"""Irregular English word forms: ``bought`` is a form of ``buy``, ``met`` of ``meet``.

The Porter stemmer joins regular forms (``buys``, ``buying``) but cannot know irregular ones,
so a question asked in the present (``When did Jolene buy her snake?``) missed the line that
tells it in the past (``I bought Seraphim in France``). Ranking keys every token by
the stem of its base form (:func:`word_key`), and a query word is looked up in the index under
each of its forms (:func:`word_forms`); the index itself is unchanged (FTS5 and PostgreSQL
still hold plain Porter stems).

Only forms that are almost always the verb (or noun) they come from are listed: ``left``,
``found``, ``saw`` and ``fell`` are, in what people tell an agent; ``won`` is not (``won't``
splits into ``won`` and ``t``), nor ``rose``, ``lay``, ``bit``, ``lit``, ``born``, ``ground``,
``wound``, ``stuck`` or ``spring``.
"""

from __future__ import annotations

from functools import lru_cache

from memdir.index._porter import stem

__all__ = ["key_stems", "word_forms", "word_key"]

# Base form, then its irregular forms (past, past participle, plural).
_TABLE = """
arise arose arisen|awake awoke awoken|become became|begin began begun|bend bent
bleed bled|blow blew blown|break broke broken|breed bred|bring brought|build built
burn burnt|buy bought|catch caught|choose chose chosen|come came|creep crept|deal dealt
dig dug|draw drew drawn|dream dreamt|drink drank drunk|drive drove driven|eat ate eaten
fall fell fallen|feed fed|feel felt|fight fought|find found|flee fled|fly flew flown
forbid forbade forbidden|forget forgot forgotten|forgive forgave forgiven|freeze froze frozen
get got gotten|give gave given|go went gone|grow grew grown|hang hung|hear heard|hide hid hidden
bite bitten|hold held|keep kept|kneel knelt|know knew known|lead led|leap leapt|learn learnt
leave left|lend lent|lose lost|make made|mean meant|meet met|pay paid|ride rode ridden
ring rang rung|rise risen|run ran|say said|see saw seen|seek sought|sell sold|send sent
shake shook shaken|shine shone|shoot shot|show shown|shrink shrank shrunk|sing sang sung
sink sank sunk|sit sat|sleep slept|slide slid|speak spoke spoken|speed sped|spend spent
spin spun|stand stood|steal stole stolen|sting stung|strike struck|swear swore sworn
sweep swept|swim swam swum|swing swung|take took taken|teach taught|tell told|think thought
throw threw thrown|understand understood|wake woke woken|wear wore worn|weave wove woven
weep wept|write wrote written
child children|man men|woman women|foot feet|tooth teeth|mouse mice|goose geese
"""


def _groups() -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """Base form of each listed form; every form by the stem of its base form."""
    base: dict[str, str] = {}
    by_key: dict[str, tuple[str, ...]] = {}
    for group in _TABLE.replace("\n", "|").split("|"):
        words = tuple(group.split())
        if words:
            base.update((word, words[0]) for word in words)
            by_key[stem(words[0])] = words
    return base, by_key


_BASE, _BY_KEY = _groups()


@lru_cache(maxsize=65_536)
def word_key(token: str) -> str:
    """What ranking compares a folded token by: the Porter stem of its base form."""
    return stem(_BASE.get(token, token))


def word_forms(token: str) -> tuple[str, ...]:
    """``token`` (folded), then the forms of its word that the index stems differently.

    ``buy`` and ``buying`` both give ``bought`` as well; a word without irregular forms gives
    ``(token,)``.
    """
    forms = _BY_KEY.get(word_key(token))
    if forms is None:
        return (token,)
    own = stem(token)
    return (token, *(form for form in forms if stem(form) != own))


@lru_cache(maxsize=16_384)
def key_stems(key: str) -> tuple[str, ...]:
    """The Porter stems of every form of the word whose :func:`word_key` is ``key``: what the
    index holds for it (``buy``, ``bought``)."""
    forms = _BY_KEY.get(key)
    if forms is None:
        return (key,)
    return tuple(dict.fromkeys((key, *(stem(form) for form in forms))))
