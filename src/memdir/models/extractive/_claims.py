"""What a bullet says, as far as telling whether a newer one updates it.

:func:`claim` reads one bullet: its label ("Alice" in "Alice: …"), its strongest update cue
(an old value named: "(was 5,000)", "from X to Y", "instead of X", "not X but Y",
"previously X", "X was replaced by Y", "5,000 → 2,000", 原来是X, 从X改为Y, 而不是X; a
negation: "no longer", "not … anymore", "stopped", 不再; a change: "changed / switched /
moved … to", "is now", 改为, 改成, 换成, 现在是; a bare "now", 现在), its values (numbers,
versions, identifiers, names) and its subject words: stemmed, function words, cue words and
values left out; Chinese one character per token, as the index cuts it (a segmenter cuts the
same phrase differently in different sentences), each worth half a word (:func:`weight`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from memdir.index._porter import stem
from memdir.index._stopwords import EN_STOPWORDS, ZH_STOPWORDS
from memdir.index._text import HAN
from memdir.store.ledger import BULLET_MARKER

__all__ = ["EXPLICIT", "NEGATION", "STRONG", "WEAK", "Claim", "claim", "weight"]

EXPLICIT, NEGATION, STRONG, WEAK = "explicit", "negation", "strong", "weak"

_PART = r"(?:[^,;.!?()\[\]（）。；，！？\n]|[,.](?=\d))"
_ZH_PART = r"[^，。；,;()（）\n]"
_END = r"(?=\s+(?:with|by|as|for|in|on|at)\b|[,;.!?()\[\]（）。；，！？\n]|$)"
_TO_VERBS = (
    r"chang(?:e|ed|es|ing)|switch(?:ed|es|ing)?|mov(?:e|ed|es|ing)|updat(?:e|ed|es|ing)"
    r"|upgrad(?:e|ed|es|ing)|downgrad(?:e|ed|es|ing)|migrat(?:e|ed|es|ing)"
    r"|increas(?:e|ed|es|ing)|decreas(?:e|ed|es|ing)|rais(?:e|ed|es|ing)|lower(?:ed|s|ing)?"
    r"|reduc(?:e|ed|es|ing)|bump(?:ed|s|ing)?|shift(?:ed|s|ing)?|reschedul(?:e|ed|es|ing)"
    r"|postpon(?:e|ed|es|ing)|renam(?:e|ed|es|ing)|revert(?:ed|s|ing)?|extend(?:ed|s)?"
    r"|shorten(?:ed|s)?|improv(?:e|ed|es|ing)|adjust(?:ed|s|ing)?"
)
_FROM_VERBS = _TO_VERBS + r"|went|gone|grew|dropp(?:ed|ing)|cut|replac(?:e|ed|es)"
_ZH_TO = (
    "改为|改成|改到|改用|换成|换为|换到|换用|调整为|调整到|调为|调到|变为|变成|更新为|更新到"
    "|升级到|升级为|降级到|降级为|切换到|切换为|迁移到|迁到|搬到|降到|降为|降低到|降低为|升到"
    "|升为|提高到|提高为|提升到|提升为|增加到|增加为|减少到|减少为|延期到|推迟到|提前到"
)

# 现在 (now), but not 出现在 (appears in); 现为 (is now), but not 体现为 (shows as).
_ZH_NOW = "(?<![出表体实发显呈])现在|目前|如今"

# Cues that name the old value (group ``w``); ``cue`` is the cue word itself.
_WAS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"[(（]\s*(?P<cue>was|were|previously|formerly|originally|used to be|原来是|原来为|原来|"
        r"原为|之前是|之前为|之前|以前是|以前|此前是|此前|曾是|曾为)"
        r"\s*[:：]?\s*(?P<w>[^()（）\n]{1,60}?)\s*[)）]",
        rf"\b(?P<cue>previously|formerly|used to be|originally)\s+(?P<w>{_PART}{{1,60}})",
        rf"\b(?P<cue>{_FROM_VERBS})\b{_PART}{{0,40}}?\bfrom\s+(?P<w>{_PART}{{1,40}}?)\s+(?:to|into)\b",
        rf"\b(?P<cue>instead of|rather than|in place of)\s+(?P<w>{_PART}{{1,40}}?){_END}",
        rf"\b(?P<cue>not)\s+(?P<w>{_PART}{{1,40}}?)\s*,?\s+but\b",
        rf"\b(?P<cue>replac(?:es|ed))\s+(?!by\b|with\b)(?P<w>{_PART}{{1,40}}?){_END}",
        # Only the values of these count ("Postgres was replaced by MySQL"; "5,000 → 2,000"):
        # the words before a cue are as often the subject.
        r"(?P<v>[\w./+-]+(?:\s+[\w./+-]+){0,2})\s+(?:(?:was|were|has been|have been|is|are|"
        r"got|gets)\s+)?(?P<cue>replaced\s+(?:by|with))\b",
        r"(?P<v>[$€£¥]?\d[\d,.:]*\s?%?)\s*(?P<cue>→|->|=>)",
        rf"(?P<cue>从)(?P<w>[^，。；,;()（）\n从]{{1,30}}?)(?:{_ZH_TO})",
        rf"(?P<cue>原来是|原来为|原为|之前是|之前为|以前是|此前是|曾是|曾为)(?P<w>{_ZH_PART}{{1,30}})",
        rf"(?P<cue>而不是|而非|代替了?|取代了?|替代了|替换了)(?P<w>{_ZH_PART}{{1,30}})",
        rf"(?P<cue>不是)(?P<w>{_ZH_PART}{{1,30}}?)[，,]?而是",
    )
)
# Negations (group ``p``: what is no longer true).
_NEGATIONS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"\b(?P<cue>no longer|stopped|quit)\s+(?P<p>{_PART}{{1,60}})",
        rf"\b(?P<cue>(?:do|does|did|is|are|was|were|will|would|can)(?:\s+not|n['’]t))\s+"
        rf"(?P<p>{_PART}{{1,60}}?)\s+(?:any ?more|any longer)\b",
        rf"(?P<cue>已经不再|已不再|不再|再也不)(?P<p>{_ZH_PART}{{1,30}})",
    )
)
_CHANGES = (
    re.compile(rf"\b(?P<cue>{_TO_VERBS})\b(?:\s+[\w'’-]+){{0,4}}?\s+(?:to|into)\b", re.I),
    re.compile(r"\b(?P<cue>(?:is|are|has|have) now)\b", re.IGNORECASE),
    re.compile(r"\b(?P<cue>replaced (?:by|with))\b", re.IGNORECASE),
    re.compile(
        rf"(?P<cue>{_ZH_TO}|(?:{_ZH_NOW})是|(?<![出表体实发显呈])现为|现改为)(?P<v>{_ZH_PART}{{0,30}})"
    ),
)
_NOW = re.compile(rf"\b(?P<cue>now|nowadays|these days)\b|{_ZH_NOW}", re.IGNORECASE)
# Any word some cue above starts with: most bullets have none, and skip the cue patterns.
_ANY_CUE = re.compile(
    rf"\b(?:was|were|previously|formerly|originally|used|from|instead|rather|in place|not|"
    rf"replac|no longer|stopped|quit|any ?more|any longer|now|nowadays|these days|is now|"
    rf"{_TO_VERBS})|n['’]t\b|→|->|=>|从|原来|原为|之前|以前|此前|曾是|曾为|而不是|而非|代替|取代|"
    rf"替代了|替换了|不是|不再|再也不|{_ZH_NOW}|现为|现改为|{_ZH_TO}",
    re.IGNORECASE,
)
_NEGATIVE = re.compile(r"\b(?:not|never|no longer|no)\b|n['’]t\b|[不没别未非]", re.IGNORECASE)

_LABEL = re.compile(rf"^(?P<label>[A-Za-z{HAN}][A-Za-z{HAN}'’ -]{{0,30}}?)\s*(?::\s+|：\s*)")
_TOKEN = re.compile(
    r"`(?P<code>[^`\n]{1,80})`|(?P<num>[$€£¥]?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?)"
    r"|(?P<tok>[$€£¥_]*[A-Za-z0-9][A-Za-z0-9_./:+%'’-]*)"
)
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_HAN_RUN = re.compile(f"[{HAN}]+")
_HAN_CHAR = re.compile(f"[{HAN}]")
_STARTS = frozenset(".!?;:。！？；：(（[\"“'‘")


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FILLER = EN_STOPWORDS | _word_set(
    """now new old current currently still back anymore longer usually always often normally
    generally regularly every one ones go goes went gone get gets got set nowadays days"""
)
_CHANGE_WORDS = re.compile(rf"^(?:{_FROM_VERBS}|replaced|stopped|quit)$")
_ZH_FILLER = re.compile(
    "每天|每周|每晚|每月|早上|晚上|平时|平常|通常|经常|常常|一直|总是|已经|目前|现在|如今"
)
_ZH_STOP = frozenset(w for w in ZH_STOPWORDS if len(w) == 1) | frozenset("为已再")
_MAX_WAS_UNITS = 4  # a longer "old value" of plain words is more than a value


@dataclass(frozen=True, slots=True)
class Claim:
    """What a bullet says, for :func:`memdir.models.extractive._supersede.supersedes`.

    Attributes:
        body: the text after its label, on one line.
        label: the speaker or topic before a colon ("alice" in "Alice: …"), case-folded.
        kind: the strongest update cue: ``"explicit"`` (names the old value),
            ``"negation"``, ``"strong"``, ``"weak"`` (a bare "now"), or ``""``.
        units: subject words: stemmed, function words and values left out (CJK: characters).
        values: numbers, versions, identifiers and names, normalised.
        names: the values that are not numbers.
        was_values: values the bullet says were before.
        was_units: the old value's words, when it has no number or name (原来是李明).
        now_han: a new value written in Chinese characters only (改为王芳: "王芳").
        negated: the words of what the bullet says is no longer so.
        negative: the bullet says "not", "never", 不… itself.
        spans: ``(value, start, end)`` of each value in ``body``.
    """

    body: str
    label: str
    kind: str
    units: frozenset[str]
    values: frozenset[str]
    names: frozenset[str]
    was_values: frozenset[str]
    was_units: frozenset[str]
    now_han: str
    negated: frozenset[str]
    negative: bool
    spans: tuple[tuple[str, int, int], ...]


_Span = tuple[int, int]
_Value = tuple[str, int, int, bool]  # (value, start, end, not a number)
_Word = tuple[str, int, int]


@dataclass(slots=True)
class _Cues:
    """Where the cues of a body are."""

    cues: list[_Span] = field(default_factory=list)  # the cue words themselves
    was: list[_Span] = field(default_factory=list)  # the old value
    was_of_values: list[_Span] = field(default_factory=list)  # an old value, by its values only
    negated: list[_Span] = field(default_factory=list)
    han_value: _Span | None = None  # a new value in Chinese characters only
    strong: bool = False
    weak: bool = False


def _find_cues(body: str) -> _Cues:
    found = _Cues()
    if _ANY_CUE.search(body) is None:
        return found
    for pattern in _WAS:
        for m in pattern.finditer(body):
            spans = found.was_of_values if "v" in pattern.groupindex else found.was
            spans.append(m.span("v" if "v" in pattern.groupindex else "w"))
            found.cues.append(m.span("cue"))
    for pattern in _NEGATIONS:
        for m in pattern.finditer(body):
            found.negated.append(m.span("p"))
            found.cues.append(m.span("cue"))
    for pattern in _CHANGES:
        for m in pattern.finditer(body):
            found.strong = True
            found.cues.append(m.span("cue"))
            if "v" in pattern.groupindex and found.han_value is None:
                value = m.group("v").rstrip("了的")
                if value and all(_HAN_CHAR.match(c) for c in value):
                    found.han_value = (m.start("v"), m.start("v") + len(value))
    for m in _NOW.finditer(body):
        found.weak = True
        found.cues.append(m.span())
    return found


@functools.lru_cache(maxsize=8192)
def claim(text: str) -> Claim:
    """Parse one bullet (list marker optional)."""
    line = " ".join(BULLET_MARKER.sub("", text.strip(), count=1).split())
    label, body = _split_label(line)
    cues = _find_cues(body)
    masked = [*cues.cues, *cues.was, *([cues.han_value] if cues.han_value else [])]
    values: list[_Value] = []
    words: list[_Word] = []
    for m in _TOKEN.finditer(body):
        _classify(body, m, values, words)
    values = _merge_names(body, values)
    units = {w for w, s, e in words if not _inside(s, e, masked)}
    units |= _han_units(body, masked)
    if label:
        units |= {w for w, _, _ in _words_of(label)} | _han_units(label, [])
    was_values = {v for v, s, e, _ in values if _inside(s, e, cues.was + cues.was_of_values)}
    was_units: set[str] = set()
    if cues.was and not was_values:
        was_units = _units_in(body, words, cues.was)
        if len(was_units) > _MAX_WAS_UNITS:
            was_units = set()
    negated = {v for v, s, e, _ in values if _inside(s, e, cues.negated)}
    negated |= _units_in(body, words, cues.negated)
    if was_values or was_units:
        kind = EXPLICIT
    elif negated:
        kind = NEGATION
    else:
        kind = STRONG if cues.strong else WEAK if cues.weak else ""
    han_value = cues.han_value
    return Claim(
        body=body,
        label=label,
        kind=kind,
        units=frozenset(units),
        values=frozenset(v for v, _, _, _ in values),
        names=frozenset(v for v, _, _, name in values if name),
        was_values=frozenset(was_values),
        was_units=frozenset(was_units),
        now_han=body[han_value[0] : han_value[1]] if han_value else "",
        negated=frozenset(negated),
        negative=bool(_NEGATIVE.search(body)),
        spans=tuple((v, s, e) for v, s, e, _ in values),
    )


# -- parsing helpers ---------------------------------------------------------------------


def _split_label(line: str) -> tuple[str, str]:
    match = _LABEL.match(line)
    if match is None:
        return "", line
    label = match.group("label").strip()
    if len(label.split()) > 3 or (_HAN_CHAR.search(label) and len(label) > 8):
        return "", line
    return label.casefold(), line[match.end() :]


def _inside(start: int, end: int, spans: list[_Span]) -> bool:
    return any(s <= start and end <= e for s, e in spans)


def _sentence_start(body: str, start: int) -> bool:
    before = body[:start].rstrip(" \"'“‘")
    return not before or before[-1] in _STARTS


def _units_in(body: str, words: list[_Word], spans: list[_Span]) -> set[str]:
    """The subject words inside ``spans`` (Latin words and Chinese characters)."""
    units = {w for w, s, e in words if _inside(s, e, spans)}
    return units | {u for s, e in spans for u in _han_units(body[s:e], [])}


def _classify(body: str, m: re.Match[str], values: list[_Value], words: list[_Word]) -> None:
    """Add one token to ``values`` (a number, identifier or name) or to ``words``."""
    start = m.start()
    if m.group("code") is not None:
        values.append((m.group("code").strip().casefold(), start, m.end(), True))
        return
    if m.group("num") is not None:
        values.append((m.group("num").lstrip("$€£¥").replace(",", ""), start, m.end(), False))
        return
    token = m.group("tok").rstrip(".:'’-+/")
    end = start + len(token)
    if token[-2:] in ("'s", "’s"):
        token = token[:-2]
    if not token:
        return
    low = token.casefold()
    if any(c.isdigit() for c in token):
        number = low.lstrip("$€£¥")
        values.append((number, start, end, not number[0].isdigit()))
    elif "_" in token or "/" in token or ("." in token and min(map(len, token.split("."))) >= 2):
        values.append((low, start, end, True))  # snake_case, a/path, deploy.sh
    elif _is_name(body, start, token.replace("’", "'")):
        values.append((low, start, end, True))
    else:
        words.extend(_words_of(token, start))


def _is_name(body: str, start: int, token: str) -> bool:
    """``API``, or a capitalised word inside a sentence (``Postgres``, ``Berlin``, ``A``)."""
    if len(token) >= 2 and token.isalpha() and token.isupper():
        return True
    return (
        token[0].isupper()
        and token != "I"
        and not _sentence_start(body, start)
        and (len(token) == 1 or token.casefold() not in EN_STOPWORDS)
    )


def _words_of(text: str, offset: int = 0) -> list[_Word]:
    out = []
    for m in _LATIN_WORD.finditer(text):
        word = m.group().casefold()
        if len(word) < 2 or word in _FILLER or _CHANGE_WORDS.match(word):
            continue
        out.append((stem(word), offset + m.start(), offset + m.end()))
    return out


def _merge_names(body: str, values: list[_Value]) -> list[_Value]:
    """Adjacent names are one value: "New York", "Acme Corp"."""
    merged: list[_Value] = []
    for value in values:
        if merged and value[3] and merged[-1][3] and body[merged[-1][2] : value[1]] == " ":
            last = merged.pop()
            value = (f"{last[0]} {value[0]}", last[1], value[2], True)
        merged.append(value)
    return merged


def _han_units(text: str, masked: list[_Span]) -> set[str]:
    units: set[str] = set()
    for run in _HAN_RUN.finditer(text):
        kept = "".join(
            c for i, c in enumerate(run.group(), run.start()) if not _inside(i, i + 1, masked)
        )
        units.update(c for c in _ZH_FILLER.sub("", kept) if c not in _ZH_STOP)
    return units


def weight(units: Iterable[str]) -> float:
    """How many words ``units`` are worth (a Chinese character: half a word)."""
    return sum(0.5 if _HAN_CHAR.match(u) else 1.0 for u in units)
