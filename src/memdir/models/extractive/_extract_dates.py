"""Relative dates made absolute: "yesterday" said on 2026-11-30 becomes "yesterday (2026-11-29)".

A memory bullet is read weeks later, when "yesterday" means nothing; the day the message was
written is known (``Msg.created_at``), so the phrase is kept and the absolute date is added
after it. Only unambiguous phrases are resolved: a bare weekday ("on Friday", 周三) or "in
three days" (a duration as often as an offset) are left as they are. Weeks start on Monday;
"last Friday" is the latest Friday before the day, "next Friday" the first after it, "this
Friday" the Friday of the same week. Chinese 上周三 / 下周三 name a weekday of the previous or
next week. Japanese and Korean day and week words are understood too.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

__all__ = ["has_date_phrase", "resolve_dates"]

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_EN_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "a couple of": 2,
    "couple of": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5}
_ZH_DIGITS |= {"六": 6, "七": 7, "八": 8, "九": 9}

_EN_NUM = r"(?P<n>\d{1,3}|" + "|".join(sorted(_EN_NUMBERS, key=len, reverse=True)) + ")"
_ZH_NUM = r"(?P<zn>\d{1,3}|[一二两三四五六七八九十]{1,3})"

# Day offsets of single words, longest first so that 大前天 wins over 前天.
_DAY_WORDS = {
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "yesterday": -1,
    "last night": -1,
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "tomorrow": 1,
    "大前天": -3,
    "大后天": 3,
    "前天": -2,
    "昨天": -1,
    "昨晚": -1,
    "昨日": -1,
    "今天": 0,
    "今晚": 0,
    "今日": 0,
    "明天": 1,
    "明日": 1,
    "后天": 2,
    "어제": -1,
    "오늘": 0,
    "내일": 1,
}
# (unit, offset) of week, month and year words.
_PERIOD_WORDS = {
    "last week": ("week", -1),
    "this week": ("week", 0),
    "next week": ("week", 1),
    "last month": ("month", -1),
    "this month": ("month", 0),
    "next month": ("month", 1),
    "last year": ("year", -1),
    "this year": ("year", 0),
    "next year": ("year", 1),
    "last weekend": ("weekend", -1),
    "this weekend": ("weekend", 0),
    "next weekend": ("weekend", 1),
    "上个星期": ("week", -1),
    "上星期": ("week", -1),
    "上礼拜": ("week", -1),
    "上周末": ("weekend", -1),
    "上周": ("week", -1),
    "这个星期": ("week", 0),
    "这星期": ("week", 0),
    "这周末": ("weekend", 0),
    "这周": ("week", 0),
    "本周": ("week", 0),
    "下个星期": ("week", 1),
    "下星期": ("week", 1),
    "下礼拜": ("week", 1),
    "下周末": ("weekend", 1),
    "下周": ("week", 1),
    "上个月": ("month", -1),
    "上月": ("month", -1),
    "这个月": ("month", 0),
    "本月": ("month", 0),
    "下个月": ("month", 1),
    "下月": ("month", 1),
    "前年": ("year", -2),
    "去年": ("year", -1),
    "今年": ("year", 0),
    "明年": ("year", 1),
    "先週": ("week", -1),
    "今週": ("week", 0),
    "来週": ("week", 1),
    "先月": ("month", -1),
    "今月": ("month", 0),
    "来月": ("month", 1),
    "来年": ("year", 1),
    "지난주": ("week", -1),
    "이번 주": ("week", 0),
    "다음 주": ("week", 1),
    "지난달": ("month", -1),
    "다음 달": ("month", 1),
    "작년": ("year", -1),
    "올해": ("year", 0),
    "내년": ("year", 1),
}


_JAPANESE = frozenset({"先週", "今週", "来週", "先月", "今月", "来月", "来年"})
_HAN = re.compile(r"[\u3400-\u9fff]")
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")  # kana and Han: full-width brackets


def _alternation(words: list[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_PHRASE = re.compile(
    # English: "last Friday", "3 days ago", "two weeks from now", fixed words.
    r"(?P<enwd>\b(?P<which>last|this|next) (?P<wd>" + "|".join(_WEEKDAYS) + r")\b)"
    r"|(?P<enago>\b" + _EN_NUM + r" (?P<unit>day|week|month|year)s? (?P<dir>ago|from now)\b)"
    r"|(?P<enword>\b(?:"
    + _alternation([w for w in [*_DAY_WORDS, *_PERIOD_WORDS] if w.isascii()])
    + r")\b(?!['’]))"
    # Chinese: 上周三, 下个星期五, 三天前, 两个月后, fixed words.
    r"|(?P<zhwd>(?P<zwhich>上个?|下个?|这个?|本)(?:周|星期|礼拜)(?P<zwd>[一二三四五六日天]))"
    r"|(?P<zhago>"
    + _ZH_NUM
    + r"(?P<zunit>天|日|周|个星期|星期|个月|年)(?P<zdir>以前|之前|前|以后|之后|后))"
    r"|(?P<cjkword>"
    + _alternation([w for w in [*_DAY_WORDS, *_PERIOD_WORDS] if not w.isascii()])
    + r")",
    re.IGNORECASE,
)
# Already followed by a date in brackets: resolved before (idempotence).
_ANNOTATED = re.compile(r"\s?[(（][^()（）]{0,30}\d{4}")


def _zh_number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if text == "十":
        return 10
    if "十" in text:
        tens, _, ones = text.partition("十")
        high = _ZH_DIGITS.get(tens, 1) if tens else 1
        low = _ZH_DIGITS.get(ones, 0) if ones else 0
        return high * 10 + low
    return _ZH_DIGITS.get(text) if len(text) == 1 else None


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _shift_month(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


_WEEK_FORMATS = {
    "en": ("week of {}", "weekend of {}"),
    "zh": ("{}起的一周", "{}周末"),
    "ja": ("{}の週", "{}の週末"),
}


def _period(day: date, unit: str, offset: int, lang: str) -> str:
    week, weekend = _WEEK_FORMATS[lang]
    if unit == "week":
        return week.format((_monday(day) + timedelta(weeks=offset)).isoformat())
    if unit == "weekend":
        return weekend.format((_monday(day) + timedelta(weeks=offset, days=5)).isoformat())
    if unit == "month":
        year, month = _shift_month(day, offset)
        return f"{year:04d}-{month:02d}"
    return f"{day.year + offset:04d}"


def _weekday(day: date, which: str, target: int) -> date:
    if which == "last":
        back = (day.weekday() - target) % 7 or 7
        return day - timedelta(days=back)
    if which == "next":
        ahead = (target - day.weekday()) % 7 or 7
        return day + timedelta(days=ahead)
    return _monday(day) + timedelta(days=target)


def _ago(day: date, n: int, unit: str, sign: int, cjk: bool) -> str:
    if unit in ("day", "天", "日"):
        return (day + timedelta(days=sign * n)).isoformat()
    if unit in ("week", "周", "星期", "个星期"):
        around = (day + timedelta(weeks=sign * n)).isoformat()
        return f"约{around}" if cjk else f"around {around}"
    if unit in ("month", "个月"):
        year, month = _shift_month(day, sign * n)
        return f"{year:04d}-{month:02d}"
    return f"{day.year + sign * n:04d}"


def _resolve(match: re.Match[str], day: date) -> str | None:
    """The absolute date (or period) a relative phrase names, or ``None`` if it names none."""
    groups = match.groupdict()
    if groups["enwd"]:
        target = _WEEKDAYS.index(groups["wd"].lower())
        return _weekday(day, groups["which"].lower(), target).isoformat()
    if groups["enago"]:
        n = _EN_NUMBERS.get(groups["n"].lower()) or int(groups["n"])
        sign = -1 if groups["dir"].lower() == "ago" else 1
        return _ago(day, n, groups["unit"].lower(), sign, cjk=False)
    if groups["zhwd"]:
        head = groups["zwhich"][0]
        offset = {"上": -1, "下": 1}.get(head, 0)
        target = _ZH_WEEKDAY[groups["zwd"]]
        return (_monday(day) + timedelta(weeks=offset, days=target)).isoformat()
    if groups["zhago"]:
        zn = _zh_number(groups["zn"])
        if zn is None:
            return None
        sign = -1 if groups["zdir"].endswith("前") else 1
        return _ago(day, zn, groups["zunit"], sign, cjk=True)
    word = (groups["enword"] or groups["cjkword"] or "").lower()
    lang = "en"
    if word in _JAPANESE:
        lang = "ja"
    elif _HAN.search(word):
        lang = "zh"
    if word in _DAY_WORDS:
        return (day + timedelta(days=_DAY_WORDS[word])).isoformat()
    if word in _PERIOD_WORDS:
        unit, offset = _PERIOD_WORDS[word]
        return _period(day, unit, offset, lang)
    return None


def has_date_phrase(text: str) -> bool:
    """Whether ``text`` holds a relative date phrase :func:`resolve_dates` understands."""
    return _PHRASE.search(text) is not None


def resolve_dates(text: str, day: date) -> str:
    """``text`` with the absolute date added after each relative date phrase.

    Args:
        text: one sentence.
        day: the day it was said (the message's date).

    Returns:
        The sentence, e.g. ``"I moved here last month (2026-10)"`` or
        ``"我昨天（2026-11-29）去了医院"``; unchanged when it has no relative date.
    """
    out: list[str] = []
    last = 0
    for match in _PHRASE.finditer(text):
        if _ANNOTATED.match(text, match.end()):
            continue
        try:
            resolved = _resolve(match, day)
        except (OverflowError, ValueError):  # "999 years ago" said in year 1: leave it
            resolved = None
        if resolved is None:
            continue
        cjk = _WIDE.search(match.group(0)) is not None
        note = f"（{resolved}）" if cjk else f" ({resolved})"
        out += [text[last : match.end()], note]
        last = match.end()
    out.append(text[last:])
    return "".join(out)
