"""Whether a summary is about the messages it replaces: a cheap check of a model's answer.

A small model may answer the summary prompt with the prompt: the four headings and the line
under each that says what belongs there, or "None" under every heading. Replacing the
history with that would lose it. A summary is refused when

- nothing is left under its headings once placeholders ("None", 无) and lines of the prompt
  are set aside;
- more than half of its text is lines of the prompt;
- it is long enough to name something (:data:`_MIN_WORDS` words), the messages name
  identifiers, paths, numbers or names, and the summary names none of them and shares less
  than a fifth of its words with the messages.

Anything else is accepted: a short summary, a summary in other words, one with headings of its
own. A line that also stands in the messages is never the prompt's, whatever the prompt says.
The check reads the summary and what the summariser was shown, once, with regular
expressions; it cannot tell a summary that invents a fact from one that does not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memdir._scaffold import Scaffold, words
from memdir.compaction.summary import render_messages, render_prompt
from memdir.index._stopwords import EN_STOPWORDS, ZH_STOPWORDS
from memdir.index._text import HAN

__all__ = ["summary_refusal"]

_MIN_WORDS = 12
_MIN_SHARED = 0.2
_MAX_ECHO = 0.5
_SCAN_CHARS = 400_000  # what is read of the messages for their terms (the summariser's input)

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_PLACEHOLDERS = frozenset(
    {"none", "n a", "na", "nothing", "null", "tbd", "none yet", "nothing yet", "无", "暂无", "没有"}
)
_BLANK = "\x00"
_NAME_CHARS = r"A-Za-z0-9_"
_TERM = re.compile(
    r"https?://[^\s<>()\"'`]+"  # URLs
    r"|[\w.~-]*[/\\][\w./\\-]*\w"  # paths
    r"|`[^`\n]{2,80}`"  # inline code
    rf"|\b[{_NAME_CHARS}]+\.[A-Za-z][A-Za-z0-9]{{0,5}}\b"  # file.ext, module.name
    r"|\b[A-Za-z]+[0-9]*(?:[_-][A-Za-z0-9]+)+\b"  # snake_case, kebab-case, ABC-123
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"  # camelCase
    r"|\d+(?:[.,:]\d+)*"  # numbers
    r"|[《「“][^》」”\n]{1,30}[》」”]"  # quoted names
    r"|(?<=[a-z0-9,;] )[A-Z][a-z]{2,}"  # a capitalised word inside a sentence: a name
)
_WORD = re.compile(rf"[{HAN}]+|[^\W\d_]{{3,}}")
_ROLES = frozenset({"user", "assistant", "tool", "result", "system"})  # the transcript's labels


def summary_refusal(summary: str, *, template: str, sources: Sequence[str]) -> str | None:
    """Why ``summary`` is not a summary of ``sources`` (log-safe), or ``None`` to accept it.

    Args:
        summary: the model's answer.
        template: the summary prompt (with its ``{messages}`` placeholder).
        sources: what the summariser was shown: the running summary and the rendered messages.
    """
    prompt = render_prompt(template, _BLANK)
    prompt = "\n".join(ln for ln in prompt.splitlines() if _BLANK not in ln)
    tags = render_messages([], previous_summary=_BLANK).replace(_BLANK, "")
    scaffold = Scaffold([prompt, tags], data=sources)
    content: list[str] = []
    echoed: list[str] = []
    for line in summary.splitlines():
        if not line.strip() or _HEADING.match(line) or words(line) in _PLACEHOLDERS:
            continue
        if not words(line):
            continue
        (echoed if scaffold.matches(line) else content).append(line.strip())
    if not content:
        what = "the prompt's own lines" if echoed else "placeholders such as None"
        return f"it has nothing under its headings but {what}"
    echo_chars = sum(len(ln) for ln in echoed)
    if echo_chars > _MAX_ECHO * (echo_chars + sum(len(ln) for ln in content)):
        return f"{len(echoed)} of its {len(echoed) + len(content)} lines are the prompt's own"
    return _unrelated("\n".join(content), sources)


def _unrelated(content: str, sources: Sequence[str]) -> str | None:
    """Why ``content`` is about something else than ``sources``, or ``None``."""
    mine = _words(content)
    if len(mine) < _MIN_WORDS:
        return None  # too short to be expected to name anything
    text = "\n".join(sources)[:_SCAN_CHARS]
    terms = {t.strip("`《》「」“”").casefold() for t in _TERM.findall(text)}
    terms = {t for t in terms if len(t) >= 2}
    if not terms:
        return None
    folded = content.casefold()
    if any(term in folded for term in terms):
        return None
    theirs = _words(text)
    if len(mine & theirs) >= _MIN_SHARED * len(mine):
        return None
    return (
        f"it names none of the {len(terms)} identifiers, paths, numbers and names of the "
        f"messages and shares {len(mine & theirs)} of its {len(mine)} words with them"
    )


def _words(text: str) -> set[str]:
    """Content words: Latin words of three letters or more, Chinese as pairs of characters."""
    out: set[str] = set()
    for word in _WORD.findall(text.casefold()):
        if word[0] >= "\u2e80":
            out.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
            continue
        if word not in EN_STOPWORDS and word not in _ROLES:
            out.add(word)
    return {w for w in out if w not in ZH_STOPWORDS}
