"""Days a query names: ``on 9 November, 2022``, ``in June``, ``2023年5月3日``, ``yesterday``.

A daily ledger is named by its day, so a question that names a day names the file that most
likely holds the answer. :func:`date_cue` finds those days; the ranking then prefers the lines
of matching daily files (:meth:`DateCue.weight`), and the few days after a named day a little
less: a ledger records an event on its day or later ("yesterday I ...").

Recognised, in English and Chinese: a full date (``9 November 2022``, ``November 9th, 2022``,
``2022-11-09``, ``2022/11/09``, ``2022年11月9日``), a day of a month in any year (``3 March``,
``3月5日``), a month of a year (``November 2022``, ``2022年11月``), a month in any year after
``in``/``during``/``of``/``throughout`` (``in June``; a bare ``may`` or ``march`` is a verb
too often to count) or written ``6月`` / ``六月``, a season of a year (``summer 2021``: June to
August; a winter is its January, February and December), a year after those words or as
``2023年``,
and ``today``, ``yesterday``, ``the day before yesterday``, ``今天``, ``昨天``, ``前天``
(relative to the clock's local date). Impossible dates (``31 February``) are ignored.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

__all__ = ["DateCue", "date_cue"]

_MONTHS = {
    name: number
    for number in range(1, 13)
    for name in {calendar.month_name[number].lower(), calendar.month_abbr[number].lower()}
}
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_FULL_MONTH = "|".join(name.lower() for name in calendar.month_name[1:])
_YEAR = r"(?:19|20)\d\d"
_CN_NUMBERS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6}
_CN_NUMBERS |= {"七": 7, "八": 8, "九": 9, "十": 10, "十一": 11, "十二": 12}

# Each form starts with a digit or a month, season or day word, and is tried only where a
# cheap scan found one (a pattern of literals, which the regular expression engine scans fast:
# a dialogue-length query is read in microseconds, where one pattern of every form took
# hundreds). The text is lower-cased first; word boundaries before a form, and the
# preposition a bare month or year needs, are checked on the text before it.
_DIGIT_FORMS = re.compile(
    "|".join(
        (
            rf"(?P<iso>(?P<iso_y>{_YEAR})[-/.](?P<iso_m>\d{{1,2}})[-/.](?P<iso_d>\d{{1,2}})(?!\d))",
            rf"(?P<cn>(?:(?P<cn_y>{_YEAR})\s*年\s*)?(?P<cn_m>1[0-2]|0?[1-9])\s*月"
            r"(?:份|\s*(?P<cn_d>\d{1,2})\s*[日号])?)",
            rf"(?P<cny>(?P<cny_y>{_YEAR})\s*年)",
            rf"(?P<dmy>(?P<dmy_d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<dmy_m>{_MONTH})\b\.?"
            rf"(?:,?\s*(?P<dmy_y>{_YEAR})\b)?)",
            rf"(?P<y>(?P<y_y>{_YEAR})\b)",
        )
    )
)
_WORD_FORMS = re.compile(
    "|".join(
        (
            rf"(?P<mdy>(?P<mdy_m>{_MONTH})\b\.?\s+(?P<mdy_d>\d{{1,2}})(?:st|nd|rd|th)?\b"
            rf"(?:,?\s*(?P<mdy_y>{_YEAR})\b)?)",
            rf"(?P<my>(?P<my_m>{_MONTH})\b\.?,?\s+(?P<my_y>{_YEAR})\b)",
            rf"(?P<m>(?P<m_m>{_FULL_MONTH})\b)",
            rf"(?P<s>(?P<s_s>spring|summer|autumn|fall|winter)\s+(?:of\s+)?(?P<s_y>{_YEAR})\b)",
            r"(?P<rel>(?:yesterday|today|tonight)\b)",
        )
    )
)
_DIGIT_RUN = re.compile(r"\d+")
_WORD_STARTS = tuple(
    sorted(
        {name[:3] for name in _MONTHS} | {"spr", "sum", "aut", "fal", "win", "yes", "tod", "ton"}
    )
)
_DIGITS = "0123456789"
_CJK_WORDS = {f"{numeral}月": number for numeral, number in _CN_NUMBERS.items()}
_CJK_RELATIVE = {"前天": 2, "昨天": 1, "昨日": 1, "昨晚": 1, "今天": 0, "今日": 0, "今晚": 0}
_CJK_FORMS = re.compile("|".join(sorted((*_CJK_WORDS, *_CJK_RELATIVE), key=len, reverse=True)))
_PREPOSITION = re.compile(r"\b(?:in|during|of|throughout)\s+(?:early\s+|late\s+|mid-?)?$")
_DAY_BEFORE = re.compile(r"\bthe\s+day\s+before\s+$")
_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}
_SEASONS = {
    "spring": (3, 5),
    "summer": (6, 8),
    "autumn": (9, 11),
    "fall": (9, 11),
    "winter": (1, 2),
}


@dataclass(frozen=True, slots=True)
class DateCue:
    """The days a query names.

    ``spans`` are inclusive ranges of proleptic ordinals (``date.toordinal()``); ``yearless``
    holds ``(month, day)`` pairs of any year, ``day`` 0 for the whole month. The ``after``
    days that follow a named day weigh ``after_weight``.
    """

    spans: tuple[tuple[int, int], ...] = ()
    yearless: tuple[tuple[int, int], ...] = ()
    after: int = 7
    after_weight: float = 0.5

    def __bool__(self) -> bool:
        return bool(self.spans or self.yearless)

    def weight(self, day: int | None) -> float:
        """1 for a named day (or a day of a named month or year), ``after_weight`` for the
        ``after`` days that follow a named day, else 0."""
        if day is None:
            return 0.0
        after, after_weight = self.after, self.after_weight
        best = 0.0
        for first, last in self.spans:
            if first <= day <= last:
                return 1.0
            if first == last and 0 < day - last <= after:
                best = after_weight
        if self.yearless:
            when = date.fromordinal(day)
            for month, dom in self.yearless:
                if not dom:
                    if when.month == month:
                        return 1.0
                    continue
                for year in (when.year, when.year - 1):
                    named = _ordinal(year, month, dom)
                    if named == day:
                        return 1.0
                    if named is not None and 0 < day - named <= after:
                        best = after_weight
        return best


def _ordinal(year: int, month: int, day: int) -> int | None:
    try:
        return date(year, month, day).toordinal()
    except ValueError:
        return None


def _month_span(year: int, month: int) -> tuple[int, int]:
    last = calendar.monthrange(year, month)[1]
    return date(year, month, 1).toordinal(), date(year, month, last).toordinal()


def date_cue(
    query: str, *, today: date | None = None, after: int = 7, after_weight: float = 0.5
) -> DateCue:
    """The days ``query`` names (an empty cue when it names none).

    Args:
        query: the search text.
        today: the day ``today`` and ``yesterday`` are relative to (the local date if not
            given).
        after: how many days after a named day still count.
        after_weight: the weight of those days (a named day weighs 1).
    """
    spans: list[tuple[int, int]] = []
    yearless: list[tuple[int, int]] = []

    def day_of(year: str | None, month: int, dom: int) -> None:
        if year:
            named = _ordinal(int(year), month, dom)
            if named is not None:
                spans.append((named, named))
        elif 1 <= month <= 12 and 1 <= dom <= calendar.monthrange(2000, month)[1]:
            yearless.append((month, dom))

    def month_of(year: str | None, month: int) -> None:
        if not 1 <= month <= 12:
            return
        if year:
            spans.append(_month_span(int(year), month))
        else:
            yearless.append((month, 0))

    def relative(back: int) -> None:
        named = (today or datetime.now().astimezone().date()) - timedelta(days=back)
        spans.append((named.toordinal(), named.toordinal()))

    text = query.lower()
    if len(text) != len(query):  # a character whose lower case is longer: ASCII only
        text = query.translate(_ASCII_LOWER)
    for match in _matches(text):
        kind = match.lastgroup
        get = match.group
        if kind == "iso":
            day_of(get("iso_y"), int(get("iso_m")), int(get("iso_d")))
        elif kind in ("dmy", "mdy"):
            day_of(get(f"{kind}_y"), _MONTHS[get(f"{kind}_m")], int(get(f"{kind}_d")))
        elif kind == "my":
            month_of(get("my_y"), _MONTHS[get("my_m")])
        elif kind == "m":
            month_of(None, _MONTHS[get("m_m")])
        elif kind in ("y", "cny"):
            year = int(get(f"{kind}_y"))
            spans.append((date(year, 1, 1).toordinal(), date(year, 12, 31).toordinal()))
        elif kind == "s":
            year = int(get("s_y"))
            months = _SEASONS[get("s_s")]
            spans.append((date(year, months[0], 1).toordinal(), _month_span(year, months[1])[1]))
            if months[0] == 1:  # winter: its December too
                spans.append(_month_span(year, 12))
        elif kind == "cn":
            month = int(get("cn_m"))
            if get("cn_d"):
                day_of(get("cn_y"), month, int(get("cn_d")))
            else:
                month_of(get("cn_y"), month)
        elif _DAY_BEFORE.search(text, max(0, match.start() - 40), match.start()):
            relative(2)  # the day before yesterday
        else:
            relative(1 if get(0) == "yesterday" else 0)
    cjk = "月" in query or "天" in query or "日" in query or "晚" in query
    for match in _CJK_FORMS.finditer(query) if cjk else ():
        word = match.group()
        if word in _CJK_RELATIVE:
            relative(_CJK_RELATIVE[word])
        elif match.start() == 0 or query[match.start() - 1] not in "十":
            month_of(None, _CJK_WORDS[word])
    return DateCue(tuple(dict.fromkeys(spans)), tuple(dict.fromkeys(yearless)), after, after_weight)


def _matches(text: str) -> list[re.Match[str]]:
    """The date forms in lower-cased ``text``, in order, none overlapping an earlier one."""
    found: list[re.Match[str]] = []
    if any(digit in text for digit in _DIGITS):  # ``in``: a fast scan each
        for run in _DIGIT_RUN.finditer(text):
            if (match := _DIGIT_FORMS.match(text, run.start())) is not None:
                found.append(match)
    for prefix in _WORD_STARTS:  # str.find: far faster than a pattern over the whole text
        start = text.find(prefix)
        while start >= 0:
            before = text[start - 1] if start else " "
            if not (before.isascii() and before.isalpha()) and (
                match := _WORD_FORMS.match(text, start)
            ):
                found.append(match)
            start = text.find(prefix, start + 1)
    if not found:
        return []
    found.sort(key=lambda m: (m.start(), -m.end()))
    out: list[re.Match[str]] = []
    end = 0
    for match in found:
        start = match.start()
        if start < end:
            continue
        if start and text[start - 1].isascii() and text[start - 1].isalnum():
            continue  # inside a word or a number
        if match.lastgroup in ("m", "y") and not _PREPOSITION.search(
            text, max(0, start - 40), start
        ):
            continue  # a bare ``may``, or a number that may not be a year
        out.append(match)
        end = match.end()
    return out
