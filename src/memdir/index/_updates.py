"""Updates that win: a later line that changes a value ranks above the line it updates.

When a fact changes ("the batch size is now 5,000"), the stale line and the current one are
said in much the same words, so lexical ranking cannot tell them apart, and the older one
often wins: it stated the fact plainly, while the update is a clause of a longer line. Among
the best ``RankConfig.updates_top`` hits of a search, a line *updates* an earlier one when:

- it was written later: a later daily file, or further down the same file (undated files,
  ``MEMORY.md`` among them, have no order with the ledgers and are left alone);
- both have the same speaker (``- 10:00 Alice: …``), or neither has one;
- it states a change: a number follows a change word (``now``, ``new``, ``increased``,
  ``rescheduled``, ``extended``, 改为, 现在…) within ``updates_cue_reach`` words, and a
  word of the query stands within ``updates_reach`` words of that number; when the query
  asks for the value as it stands now (``recently``, ``latest``, ``currently``, ``so far``,
  目前…), any number near words of the query does, change word or not (the line's own
  time stamp, ``- 10:00 …``, aside); when it asks for a time of day or a share (``what
  time``, ``what … accuracy``, ``what … percentage``, 几点, 准确率是多少…) without naming one,
  any number of that kind near words of the query does, with one query word more in common
  (below);
- the earlier line holds a number of the same kind (money, percent, time of day, day of a
  month, version, or a count of the same thing) near words of the query, which the later one
  lacks, and does not state the later one's new number of the same words;
- the query words near the two numbers overlap: at least two in common (one when the query
  has a single word).

A name has no kind to compare: a later line updates a name only when it says what replaced
what ("moved the billing database from Postgres to MySQL", "replaced Jenkins with GitHub
Actions", "从 Jenkins 换成了 GitLab": :mod:`memdir.index._renames`) and the earlier line says
the old name, not the new one, with at least as many query words in common as above.

The later line is then moved up to just above the earlier one (it takes its score), unless
the query asks about the past or a change (``between``, ``before``, ``originally``,
``previously``, 以前, 原来…: both lines answer it, in the order found), and the two hits
name each other: :attr:`~memdir.index.SearchHit.superseded_by` on the old one,
:attr:`~memdir.index.SearchHit.supersedes` on the new one. A line of more than
``_MAX_WORDS`` words (a page of an answer) updates nothing: it restates, it is not one fact.
The test reads only the few hits shown first: a tokenisation of ten lines per search.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from memdir.index._forms import word_key
from memdir.index._paths import ledger_day
from memdir.index._query import Term
from memdir.index._rank import RankConfig
from memdir.index._renames import renames
from memdir.index._stopwords import EN_STOPWORDS, ZH_STOPWORDS
from memdir.index._text import CJK_CHARS, fold
from memdir.index._types import SearchHit

__all__ = ["Place", "citation", "ledger_place", "with_updates"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that say a value changed. A later line on the same subject without one is more
# often a follow-up (an answer repeats the words of the line above) than an update.
_CUES = _words(
    """now new newly latest currently updated changed increased decreased reduced raised
    lowered extended shortened adjusted moved rescheduled postponed delayed revised switched
    replaced upgraded downgraded bumped grew grown dropped reached improved expanded cut
    added"""
)
_CJK_CUES = re.compile(
    "改为|改成|改到|换成|换为|调整为|调整到|调为|调到|变为|变成|更新为|更新到|升级到|降到|降为|"
    "提高到|提升到|增加到|减少到|延期到|推迟到|提前到|(?<![出表体实发显呈])现在|目前|如今|现为"
)
_LATIN = re.compile(r"[a-z]+")
_DIGIT = re.compile(r"\d")
_TOKEN = re.compile(
    rf"\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:[.:]\d+)*|[{CJK_CHARS}]|[^\W\d_{CJK_CHARS}]+"
)
_SPEAKER = re.compile(r"^\s*(?:[-*+]\s+)?(?:\d{1,2}:\d{2}\s+)?([^\W\d][^:：\n]{0,39}?)(?::\s|：)")
_STAMP = re.compile(r"^\s*(?:[-*+]\s+)?\d{1,2}:\d{2}\s")  # when the line was said
_MONTHS = _words(
    """jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june
    july august september october november december"""
)
_CURRENCY = frozenset("$€£¥")
_MAX_WORDS = 160
_MAX_CHARS = 8 * _MAX_WORDS  # a longer line has more words than that, or is not prose
# A question about what a value was, or about two points in time, wants the old line too.
_HISTORY = re.compile(
    r"\b(?:between|before|originally|initially|previously|formerly|earlier|used to|at first)\b"
    "|以前|之前|原来|最初|起初|当初",
    re.IGNORECASE,
)

# A question about the value as it stands now: the latest line that says it answers it,
# change word or not ("how many hours have I tracked most recently?").
_LATEST = re.compile(
    r"\b(?:recent|recently|latest|current|currently|nowadays|these days|so far|"
    r"at the moment|as of today|up to date)\b|目前",
    re.IGNORECASE,
)

# A question that asks for a time of day or a share ("what time…", "what is my accuracy…"): a
# later line that says one near its words answers it, change word or not (as for a question
# about the latest value, but only for that kind, and with one query word more in common).
# Money and counts are left out: a chat says them of many things in the same words.
_ASKED = (
    ("time", re.compile(r"\b(?:what|which) time\b|几点|什么时间", re.IGNORECASE)),
    (
        "%",
        re.compile(
            r"\b(?:what|which)\b[^?.,;]{0,40}\b(?:percent|percentage|accuracy)\b"
            "|百分之多少|百分比是多少|准确率是多少|准确率多少",
            re.IGNORECASE,
        ),
    ),
)
# A question that names a value of the kind is about that value, not asking for one.
_NAMED = {
    "time": re.compile(r"\d:\d\d|\d\s*(?:am|pm)\b|\d+点", re.IGNORECASE),
    "%": re.compile(r"\d\s*(?:%|percent)|百分之", re.IGNORECASE),
}


def _asked(query: str) -> frozenset[str]:
    """The kinds of value (:data:`Value`) ``query`` asks for."""
    return frozenset(
        kind for kind, pattern in _ASKED if pattern.search(query) and not _NAMED[kind].search(query)
    )


Value = tuple[str, str]
"""A number and its kind: ``("$", "650")``, ``("%", "78")``, ``("time", "4:30")``, ``("date",
"22")`` (a day of a month), ``("v", "1.2.3")`` (a version), or ``("", "12")`` (a count)."""


@dataclass(frozen=True, slots=True)
class Place:
    """When a hit was written, as far as known, and by whom.

    ``when`` orders hits of different files: a ledger's day (proleptic ordinal), a logged
    message's time (POSIX seconds); ``None``: unknown (``MEMORY.md``), then only the lines of
    one file are ordered, by ``line``.
    """

    when: int | None
    path: str
    line: int
    speaker: str | None


@dataclass(frozen=True, slots=True)
class _Line:
    """What the test reads of one hit: its place, its numbers and the query words near them."""

    place: Place
    values: frozenset[Value]  # every number of the line
    units: dict[Value, frozenset[str]]  # what a count counts (:func:`_unit`)
    near: dict[Value, frozenset[str]]  # a number near query words: those words
    new: dict[Value, frozenset[str]]  # a number right after a change word: query words near it
    unsaid: frozenset[Value] = frozenset()  # in ``new`` only as a value of the kind asked for


def _says_change(text: str) -> bool:
    """Whether ``text`` holds a change word (a quick look before it is read)."""
    if not _CUES.isdisjoint(_LATIN.findall(text.lower())):
        return True
    return not text.isascii() and _CJK_CUES.search(text) is not None


def ledger_place(hit: SearchHit) -> Place:
    """The :class:`Place` of a memory search hit: its ledger's day, its line and the speaker
    its text starts with (``- 10:00 Alice: …``)."""
    label = _SPEAKER.match(hit.content)
    return Place(
        when=ledger_day(hit.path),
        path=hit.path,
        line=hit.line_number,
        speaker=label.group(1).strip().casefold() if label else None,
    )


def citation(hit: SearchHit) -> str:
    """``path#Lstart-Lend`` of a hit, as the tools cite it."""
    return f"{hit.path}#L{hit.line_number}-L{hit.line_end}"


def _year(word: str, unit: frozenset[str]) -> bool:
    """Whether a count is a year ("in 2024", "August 2024", but not "2000 rows"): it dates
    something, it is not the value."""
    return len(word) == 4 and word[:2] in ("19", "20") and (not unit or unit == {"年"})


def _kind(text: str, found: re.Match[str], before: str, after: str) -> str:
    """The kind of the number ``found`` (``before`` and ``after``: the words around it,
    lower case)."""
    start, end, word = found.start(), found.end(), found.group()
    if start and text[start - 1] in _CURRENCY:
        return "$"
    if text[end : end + 1] == "%" or text[end : end + 2] == " %":
        return "%"
    if ":" in word or after in ("am", "pm"):
        return "time"
    if before in _MONTHS or after in _MONTHS:
        return "date"
    if word.count(".") > 1 or (start and text[start - 1] in "vV"):
        return "v"
    return ""


def _unit(text: str, matches: Sequence[re.Match[str]], at: int) -> frozenset[str]:
    """What the count at ``matches[at]`` counts: the word keys of the (at most three) words
    right after it, up to a punctuation mark, function words left out."""
    out: set[str] = set()
    end = matches[at].end()
    for found in matches[at + 1 : at + 4]:
        word = found.group()
        if word[0].isdigit() or text[end : found.start()].strip():
            break
        end = found.end()
        folded = fold(word)
        if folded not in EN_STOPWORDS and folded not in ZH_STOPWORDS:
            out.add(word_key(folded))
    return frozenset(out)


def _cues(text: str, matches: Sequence[re.Match[str]], words: Sequence[str]) -> list[int]:
    """The token numbers of the change words of a line (``matches``: its tokens, ``words``
    their text)."""
    if len(words) > _MAX_WORDS:
        return []
    # A capitalised cue inside a sentence is a name ("New Balance"), not a change.
    cues = [
        i for i, word in enumerate(words) if word.lower() in _CUES and not (i and word[0].isupper())
    ]
    if not text.isascii():
        starts = [found.start() for found in matches]
        cues += [bisect_right(starts, m.start()) - 1 for m in _CJK_CUES.finditer(text)]
    return cues


def _changed(at: int, cues: Sequence[int], words: Sequence[str], cue_reach: int) -> bool:
    """Whether the number at token ``at`` follows a change word ("increased to 7", "new
    deadline of April 5"), or "now" just after it ("7 now")."""
    return any(
        0 < at - cue <= cue_reach or (0 < cue - at <= 2 and words[cue].lower() == "now")
        for cue in cues
    )


def _updater(
    hit: SearchHit,
    keys: frozenset[str],
    seen: dict[str, str | None],
    config: RankConfig,
    *,
    latest: bool,
    asked: frozenset[str] = frozenset(),
    place: Place,
) -> _Line | None:
    """What the test needs of a hit that states a change (:func:`_read`), or ``None``: no
    number of it follows a change word near words of the query (``latest``: the query asks
    for the value as it stands now, and any number near its words states it). Most lines
    stop at the change words."""
    text = hit.content
    matches = list(_TOKEN.finditer(text))
    words = [found.group() for found in matches]
    cues = _cues(text, matches, words)
    reach = config.updates_cue_reach
    if (
        not latest
        and not asked
        and not any(
            word[0].isdigit() and _changed(at, cues, words, reach) for at, word in enumerate(words)
        )
    ):
        return None
    line = _read(
        hit, keys, seen, config, (matches, words, cues), latest=latest, asked=asked, place=place
    )
    return line if line.new else None


def _read(
    hit: SearchHit,
    keys: frozenset[str],
    seen: dict[str, str | None],
    config: RankConfig,
    tokens: tuple[list[re.Match[str]], list[str], list[int]] | None = None,
    *,
    latest: bool = False,
    asked: frozenset[str] = frozenset(),
    place: Place,
) -> _Line:
    """What the test needs of a hit (``keys``: the query's word keys; ``seen``: the key of
    each word met so far, ``None`` when it is not one of them: a word is stemmed once;
    ``tokens``: its tokens, their text and its change words when known, else it is read
    without change words)."""
    text = hit.content
    if tokens is None:
        matches = list(_TOKEN.finditer(text))
        words = [found.group() for found in matches]
        cues: list[int] = []
    else:
        matches, words, cues = tokens
    reach = config.updates_reach
    # A line's own time stamp (``- 10:00 Alice: …``) is when it was said, not a value.
    said = stamp.end() if (latest or asked) and (stamp := _STAMP.match(text)) else 0
    values: dict[int, Value] = {}
    units: dict[Value, frozenset[str]] = {}
    for i, found in enumerate(matches):
        if words[i][0].isdigit():
            before = words[i - 1].lower() if i else ""
            after = words[i + 1].lower() if i + 1 < len(words) else ""
            kind = _kind(text, found, before, after)
            unit = _unit(text, matches, i) if kind in ("", "date") else frozenset()
            if kind in ("", "date") and _year(words[i], unit):
                continue
            value = values[i] = (kind, words[i].replace(",", ""))
            if kind == "" and unit:
                units[value] = units.get(value, frozenset()) | unit
    # Only the words within reach of a number matter.
    within = sorted({i for at in values for i in range(max(0, at - reach), at + reach + 1)})
    keyed: list[tuple[int, str]] = []
    for i in within:
        if i >= len(words) or words[i][0].isdigit():
            continue
        word = words[i].lower()
        if word not in seen:
            stemmed = word_key(fold(word))
            seen[word] = stemmed if stemmed in keys else None
        if (key := seen[word]) is not None:
            keyed.append((i, key))
    near: dict[Value, frozenset[str]] = {}
    new: dict[Value, frozenset[str]] = {}
    cued: set[Value] = set()
    for at, value in values.items():
        around = frozenset(key for i, key in keyed if abs(i - at) <= reach)
        if not around:
            continue
        near[value] = near.get(value, frozenset()) | around
        if (latest and matches[at].start() >= said) or _changed(
            at, cues, words, config.updates_cue_reach
        ):
            cued.add(value)
        elif not (value[0] in asked and matches[at].start() >= said):
            continue
        new[value] = new.get(value, frozenset()) | around
    return _Line(
        place=place,
        values=frozenset(values.values()),
        units=units,
        near=near,
        new=new,
        unsaid=frozenset(new.keys() - cued),
    )


def _later(new: Place, old: Place) -> bool:
    """Whether ``new`` was written after ``old``: a later day, or further down one file."""
    if new.path == old.path:
        return new.line > old.line
    if new.when is None or old.when is None:
        return False
    return new.when > old.when


def _may_update(new: Place, old: Place) -> bool:
    """Whether a line written at ``new`` may update one written at ``old``."""
    return new.speaker == old.speaker and _later(new, old)


def _same_kind(new: _Line, value: Value, old: _Line, before: Value) -> bool:
    """Whether two numbers measure the same kind of thing (counts: of the same thing, when
    both say what they count)."""
    if value[0] != before[0]:
        return False
    if value[0]:
        return True
    mine, theirs = new.units.get(value, frozenset()), old.units.get(before, frozenset())
    return not mine or not theirs or bool(mine & theirs)


def _updates(new: _Line, old: _Line, wanted: int) -> bool:
    """Whether ``new`` states a changed value of what ``old`` says (see the module)."""
    if not new.new or not _may_update(new.place, old.place):
        return False
    for value, keys in new.new.items():
        # The query words near the old line's numbers of this kind that the new one lacks.
        gone: frozenset[str] = frozenset()
        for before, around in old.near.items():
            if before not in new.values and _same_kind(new, value, old, before):
                gone |= around
        shared = len(keys & gone)
        # The old line may say the new value too, of the same thing ("5,000 for the backfill,
        # 2,000 for sync"): then it is no update.
        # A value only of the kind asked for, with no change word, needs one word more.
        need = wanted + 1 if value in new.unsaid else wanted
        if shared >= need and shared > len(keys & old.near.get(value, frozenset())):
            return True
    return False


def with_updates(
    hits: Sequence[SearchHit],
    query: str,
    terms: Sequence[Term],
    config: RankConfig,
    *,
    place_of: Callable[[SearchHit], Place] = ledger_place,
    cite: Callable[[SearchHit], str] = citation,
) -> list[SearchHit]:
    """``hits`` with each line that updates an earlier one among the first
    ``config.updates_top`` moved just above it, and both marked (see the module; ``terms``:
    :func:`~memdir.index._query.analyze_query` of ``query``; ``place_of``: when and by whom
    a hit was written, :func:`ledger_place` for memory files; ``cite``: how a hit names
    another, :func:`citation` for memory files)."""
    top = list(hits[: config.updates_top])
    keys = frozenset(
        word_key(fold(token))
        for term in terms
        if not term.stop and not term.part
        for token in term.tokens
    )
    if len(top) < 2 or not keys:
        return list(hits)
    wanted = 1 if len(keys) == 1 else 2
    seen: dict[str, str | None] = {}
    places = [place_of(hit) for hit in top]
    pairs = _number_pairs(top, places, query, keys, seen, config, wanted)
    pairs += [p for p in _name_pairs(top, places, keys, seen, wanted) if p not in pairs]
    if not pairs:
        return list(hits)
    newer: dict[int, int] = {}  # an old hit -> the newest hit that updates it
    for n, o in pairs:
        if o not in newer or _later(places[n], places[newer[o]]):
            newer[o] = n
    order = list(range(len(top)))
    if not _HISTORY.search(query):
        # Each update moves above the earliest line it updates, the newest first, so that a
        # chain (A, then B, then C) ends newest first.
        for n in sorted({n for n, _ in pairs}, key=lambda n: _when(places[n]), reverse=True):
            first = min(order.index(o) for m, o in pairs if m == n)
            if order.index(n) > first:
                order.remove(n)
                order.insert(first, n)
    olds: dict[int, list[str]] = {}
    for n, o in sorted(pairs, key=lambda pair: pair[1]):
        olds.setdefault(n, []).append(cite(top[o]))
    # A moved line takes the score of the line below it: the scores stay in order.
    scores = [top[i].score for i in order]
    for at in range(len(scores) - 2, -1, -1):
        scores[at] = max(scores[at], scores[at + 1])
    moved = [
        replace(
            top[i],
            score=score,
            superseded_by=cite(top[newer[i]]) if i in newer else None,
            supersedes=tuple(olds.get(i, ())),
        )
        for i, score in zip(order, scores, strict=True)
    ]
    return moved + list(hits[len(top) :])


def _number_pairs(
    top: list[SearchHit],
    places: list[Place],
    query: str,
    keys: frozenset[str],
    seen: dict[str, str | None],
    config: RankConfig,
    wanted: int,
) -> list[tuple[int, int]]:
    """``(new, old)`` hits among ``top`` where the new one changes a number the old one says."""
    # Only a short line with a change word and a number can state an update: those are read
    # first, then the lines they may update (same speaker, written before).
    lines: dict[int, _Line] = {}
    past = _HISTORY.search(query) is not None
    latest = not past and _LATEST.search(query) is not None
    asked = frozenset() if past else _asked(query)
    for i, hit in enumerate(top):
        if (
            len(hit.content) <= _MAX_CHARS
            and _DIGIT.search(hit.content)
            and (latest or asked or _says_change(hit.content))
            and (
                line := _updater(
                    hit, keys, seen, config, latest=latest, asked=asked, place=places[i]
                )
            )
            is not None
        ):
            lines[i] = line
    updaters = [line.place for line in lines.values()]
    if not updaters:
        return []
    for i, hit in enumerate(top):
        if i not in lines and any(_may_update(new, places[i]) for new in updaters):
            lines[i] = _read(hit, keys, seen, config, place=places[i])
    return [
        (n, o)
        for o, old in lines.items()
        for n, new in lines.items()
        if n != o and _updates(new, old, wanted)
    ]


def _name_pairs(
    top: list[SearchHit],
    places: list[Place],
    keys: frozenset[str],
    seen: dict[str, str | None],
    wanted: int,
) -> list[tuple[int, int]]:
    """``(new, old)`` hits among ``top`` where the new one says what replaced a name the old
    one says (:mod:`memdir.index._renames`), near the same query words."""
    named = {
        i: found
        for i, hit in enumerate(top)
        if len(hit.content) <= _MAX_CHARS and (found := renames(hit.content))
    }
    if not named:
        return []
    words: dict[int, frozenset[str]] = {}

    def words_of(i: int) -> frozenset[str]:
        if i not in words:
            words[i] = frozenset(m.group().lower() for m in _TOKEN.finditer(top[i].content))
        return words[i]

    def key_of(word: str) -> str | None:
        """The query word ``word`` is (its key), ``None`` when it is none."""
        if word not in seen:
            stemmed = word_key(fold(word))
            seen[word] = stemmed if stemmed in keys else None
        return seen[word]

    def query_keys(i: int) -> frozenset[str]:
        return frozenset(key for word in words_of(i) if (key := key_of(word)) is not None)

    pairs: list[tuple[int, int]] = []
    for n, found in named.items():
        for o in range(len(top)):
            if o == n or not _may_update(places[n], places[o]):
                continue
            theirs = words_of(o)
            if not any(
                new.isdisjoint(theirs) and any(w in theirs and key_of(w) is None for w in old)
                for old, new in found
            ):
                continue
            if len(query_keys(n) & query_keys(o)) >= wanted:
                pairs.append((n, o))
    return pairs


def _when(place: Place) -> tuple[int, str, int]:
    return (place.when or 0, place.path, place.line)
