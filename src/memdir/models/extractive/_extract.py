"""Text heuristics shared by the extractive model: sentences, tokens, cue words, artifacts.

Everything here is deterministic and language-aware for English and Chinese; nothing calls a
model. The cue lists are deliberately conservative: a missed fact stays in the ledger and the
session log, a wrong one pollutes memory.
"""

from __future__ import annotations

import functools
import re

from memdir.index._rules import RULE_START

__all__ = [
    "clip",
    "cue_kind",
    "cue_kinds",
    "has_cjk",
    "name_tokens",
    "near_duplicate",
    "sentences",
    "split_label",
    "tokens",
]

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
# Sentence ends: Latin punctuation followed by a space (not after "Dr." or "e.g."), or by a
# CJK character, CJK punctuation, or a line break.
_ABBREVIATIONS = "".join(
    rf"(?<!\b{re.escape(a)})" for a in ("Mr.", "Mrs.", "Ms.", "Dr.", "St.", "vs.", "e.g.", "i.e.")
)
_SENT_END = re.compile(
    r"(?<=[.!?])" + _ABBREVIATIONS + r"\s+(?=\S)|(?<=[!?])(?=[\u3400-\u9fff])|(?<=[。！？；;])|\n+"
)
_SENT_END_WHOLE = re.compile(  # the same, but a clause after ";" stays with its sentence
    r"(?<=[.!?])" + _ABBREVIATIONS + r"\s+(?=\S)|(?<=[!?])(?=[\u3400-\u9fff])|(?<=[。！？])|\n+"
)
_TOKEN = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?|[\u3400-\u9fff]")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._'-]*")


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains Chinese (CJK ideograph) characters."""
    return bool(_CJK.search(text))


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1].rstrip() + "…"


def sentences(text: str, *, semicolons: bool = True) -> list[str]:
    """Prose sentences of ``text`` (fenced code left out), whitespace-normalised.

    Args:
        text: any message text.
        semicolons: whether ``;`` and ``；`` end a sentence. A remembered fact keeps its
            clauses together ("Priya owns that module; open a ticket for her" would leave
            "open a ticket for her" without its subject).
    """
    prose = _FENCE.sub("\n", text)
    out = []
    for part in (_SENT_END if semicolons else _SENT_END_WHOLE).split(prose):
        sentence = " ".join(part.split()).strip(" -*•>")
        if sentence:
            out.append(sentence)
    return out


@functools.lru_cache(maxsize=8192)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(text.casefold()))


def tokens(text: str) -> list[str]:
    """Comparable tokens: lower-cased Latin words and single CJK characters."""
    return list(_tokens(text))


# -- cue words -------------------------------------------------------------------------------

_CUES: list[tuple[str, re.Pattern[str]]] = [
    (
        "remember",
        re.compile(
            r"\b(?:remember|don'?t forget|note that|keep in mind|for future reference)\b"
            r"|记住|记得|别忘|不要忘|备忘",
            re.IGNORECASE,
        ),
    ),
    (
        "preference",
        re.compile(
            r"\bi (?:really )?(?:prefer|like|love|enjoy|hate|dislike|can'?t stand)\b"
            r"|\bi (?:don'?t|do not) (?:like|want|use)\b|\bmy favou?rite\b|\bprefer(?:s|red)?\b"
            r"|\bi'?m (?:really )?(?:into|a (?:big |huge )?fan of|passionate about|keen on)\b"
            r"|偏好|喜欢|爱喝|爱吃|讨厌|不喜欢|最爱|习惯用|倾向于",
            re.IGNORECASE,
        ),
    ),
    (
        "decision",
        re.compile(
            r"\b(?:we|i|let'?s|they) (?:decided|agreed|chose|settled on|will go with|will use)\b"
            r"|\b(?:decided|decision|agreed) (?:to|on|that)\b|\blet'?s (?:go with|use)\b"
            r"|\b(?:decision|decided|agreed)\s*[:：]|\bwe(?:'ll| will| are going to) (?:use|go with"
            r"|switch to|adopt)\b|\b(?:we|all|everyone) agreed\b"
            r"|决定|确定|选定|选用|采用|改用|定下|同意",
            re.IGNORECASE,
        ),
    ),
    (
        "person",
        re.compile(
            r"\bmy name is\b|\bcall me\b|\bi'?m called\b"
            r"|\bmy (?:wife|husband|partner|son|daughter|manager|boss|colleague|friend|"
            r"mother|father|mom|dad|sister|brother|team ?lead|dentist|doctor)\b"
            r"|我叫|我的名字|叫我|我的(?:妻子|丈夫|老婆|老公|经理|老板|同事|朋友|妈妈|爸爸|儿子|女儿)",
            re.IGNORECASE,
        ),
    ),
    (
        "deadline",
        re.compile(
            r"\b(?:deadline|due (?:on|by|date)|by (?:monday|tuesday|wednesday|thursday|friday|"
            r"saturday|sunday|tomorrow|next week|end of)|launch(?:es)? on|release date)\b"
            r"|截止|截至|到期|之前(?:完成|交付|提交)|上线|发布日期|交付",
            re.IGNORECASE,
        ),
    ),
    (
        "rule",
        re.compile(
            r"\b(?:always|never) (?:use|do|run|call|send|write|deploy|push|commit|put|add)\b"
            r"|必须|务必|永远不|从不",
            re.IGNORECASE,
        ),
    ),
    # A sentence that starts as a standing rule ("From now on, answer in German"): the
    # user's, an assistant's "Always happy to help!" is none.
    ("standing", RULE_START),
    (
        "commitment",
        re.compile(
            r"\b(?:i|we) (?:will|'ll|promise|must|need to|have to)\b|\bi'll\b|\bwe'll\b"
            r"|承诺|答应|不要|不能|一定要",
            re.IGNORECASE,
        ),
    ),
    (
        "fact",
        re.compile(
            r"\b(?:i|we) (?:live|work|study) (?:in|at|for)\b|\bi'?m (?:a|an) \w+"
            r"|\b(?:my|our) (?:\w+ ){1,3}(?:is|are|was|lives|runs|uses)\b"
            r"|我住在|我在.{1,12}(?:工作|上班|读书)|我是|我的.{1,8}是",
            re.IGNORECASE,
        ),
    ),
]


def cue_kinds(sentence: str) -> list[str]:
    """Every durable-fact cue in ``sentence``, in the order of :func:`cue_kind`."""
    return [kind for kind, pattern in _CUES if pattern.search(sentence)]


def cue_kind(sentence: str) -> str | None:
    """The first durable-fact cue in ``sentence``: ``remember``, ``preference``, ``decision``,
    ``person``, ``deadline``, ``rule``, ``standing``, ``commitment``, ``fact`` — or ``None``."""
    for kind, pattern in _CUES:
        if pattern.search(sentence):
            return kind
    return None


# -- near duplicates -------------------------------------------------------------------------


def name_tokens(text: str) -> set[str]:
    """Tokens that name things (capitalised mid-sentence, with digits, single letters)."""
    words = _WORD.findall(text)
    out = set()
    for i, word in enumerate(words):
        if any(c.isdigit() for c in word) or len(word) == 1 or (i > 0 and word[0].isupper()):
            out.update(tokens(word))
    return out


_LABEL = re.compile(r"^([^:：\n]{1,40})[:：]\s*")
# Dated or numbered facts and first-person past events: "went to the park" and "went to the
# beach" are two outings, not an update of one fact.
_EVENTFUL = re.compile(
    r"\d|\b(?:i|we)\s+(?:\w+\s+)?(?:\w+ed|went|got|made|took|saw|met|bought|found|ran|won|"
    r"wrote|built|left|lost|paid|sold|spent|began)\b|[了过]",
    re.IGNORECASE,
)


def split_label(text: str) -> tuple[str, str]:
    """``("caroline", "I went …")`` from ``"Caroline: I went …"``; no label: ``("", text)``.

    The label (a speaker, at most 40 characters before the first colon) is case-folded.
    """
    match = _LABEL.match(text)
    if match is None:
        return "", text
    return match.group(1).strip().casefold(), text[match.end() :]


def near_duplicate(a: str, b: str) -> bool:
    """Whether two facts say the same thing about the same subject.

    True when one contains the other, or when they share their opening (subject and verb),
    overlap strongly, and differ only in common words — never when they differ in a name,
    number or identifier ("project A" vs "project B" are different facts), nor when they
    are said by different speakers ("Ann: I like tea" vs "Bob: I like tea"). Dated and past
    events need a much stronger overlap than preferences and states.
    """
    label_a, body_a = split_label(a)
    label_b, body_b = split_label(b)
    if label_a and label_b and label_a != label_b:
        return False
    ta, tb = tokens(body_a), tokens(body_b)
    if not ta or not tb:
        return False
    ja, jb = " ".join(ta), " ".join(tb)
    if len(ta) >= 3 and len(tb) >= 3 and (ja in jb or jb in ja):
        return True
    opening = 3 if has_cjk(body_a) else 2  # subject + verb: two words, or three characters
    if ta[:opening] != tb[:opening]:
        return False
    sa, sb = set(ta), set(tb)
    if _EVENTFUL.search(body_a) or _EVENTFUL.search(body_b):
        needed = 0.85
    else:
        # Short facts need more overlap: "I like tea" and "I like coffee" are both true.
        needed = 0.6 if len(sa | sb) >= 6 else 0.75
    if len(sa & sb) / len(sa | sb) < needed:
        return False
    return not ((sa ^ sb) & (name_tokens(a) | name_tokens(b)))
