"""The bounded, foldable parts of the extractive summary: its notes and its artifacts.

Both collect lines in the order they are last mentioned, take the lines of an earlier summary
first (:meth:`Notes.carry`, :meth:`Artifacts.carry`), keep one line per thing (the newest), and
hold a cap: over it, the least important, then oldest, lines go first and are counted, and the
count is written as a ``(+N … in the session log)`` line that the next fold reads back. That is
what keeps a summary folded a hundred times the same size as one folded once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memdir.models.extractive._summary_artifacts import GROUPS, Found, key_of, scan_text
from memdir.models.extractive._summary_notes import (
    conflicts,
    parse_bullet,
    render_bullet,
    strip_label,
    tier,
)
from memdir.store.ledger import normalize_bullet

__all__ = [
    "Artifacts",
    "Notes",
    "dropped_line",
    "guard",
    "parse_dropped",
    "parse_tools",
    "tools_line",
]

NOTES_CAP = 30
GROUP_CAPS = {"Files": 25, "Commands": 12, "Identifiers": 25, "URLs": 12, "Other": 8}
_ALL_GROUPS = (*GROUPS, "Other")
_HEADINGS = {
    "en": {
        "Files": "Files",
        "Commands": "Commands",
        "Identifiers": "Identifiers",
        "URLs": "URLs",
        "Other": "Other",
    },
    "zh": {
        "Files": "文件",
        "Commands": "命令",
        "Identifiers": "标识符",
        "URLs": "链接",
        "Other": "其他",
    },
}
_HEADING_GROUP = {h.lower(): g for table in _HEADINGS.values() for g, h in table.items()}
_NOUNS = {
    "en": {
        "requests": "earlier requests",
        "points": "earlier points",
        "steps": "earlier steps",
        "Files": "more files",
        "Commands": "more commands",
        "Identifiers": "more identifiers",
        "URLs": "more URLs",
        "Other": "more items",
    },
    "zh": {
        "requests": "条较早的请求",
        "points": "条较早的要点",
        "steps": "条较早的步骤",
        "Files": "个文件",
        "Commands": "条命令",
        "Identifiers": "个标识符",
        "URLs": "个链接",
        "Other": "项",
    },
}
_DROPPED = re.compile(r"^-?\s*[(（]\s*(?:\+|另有\s*)(\d+)\b[^()（）]*[)）]\s*$")
_TOOLS = re.compile(r"^-?\s*(?:Tools used|使用的工具)\s*[:：]\s*(.*)$")
_TOOL_COUNT = re.compile(r"([^\s,，]+)\s*×\s*(\d+)")
_BRACKETS = str.maketrans("()（）", "[][]")
_CHOICES = frozenset({"decision", "preference", "constraint"})
_OLD_KINDS = {"file": "Files", "command": "Commands", "url": "URLs", "id": "Identifiers"}
_OLD_LINE = re.compile(r"^-\s*(file|command|url|id):\s*(.+)$")
_EDITED = {"en": " (edited)", "zh": "（已修改）"}
_FAILED = {"en": " (failed)", "zh": "（失败）"}
_SUFFIX = re.compile(r"\s*(?:\((?:edited|failed)\)|（(?:已修改|失败)）)$")


def dropped_line(count: int, noun: str, lang: str) -> str:
    """The line that stands for ``count`` lines dropped from a section or group."""
    if lang == "zh":
        return f"- （另有 {count} {_NOUNS['zh'][noun]}见会话日志）"
    return f"- (+{count} {_NOUNS['en'][noun]} in the session log)"


def parse_dropped(line: str) -> int | None:
    """The count in a line written by :func:`dropped_line` (``None`` for other lines)."""
    match = _DROPPED.match(line.strip())
    return int(match.group(1)) if match else None


def guard(line: str) -> str:
    """A content bullet that would read as one of our count lines, quoted so it does not."""
    if parse_dropped(line) is None and parse_tools(line) is None:
        return line
    return f'- "{line[2:]}"'


def parse_tools(line: str) -> Counter[str] | None:
    """The tally in a ``Tools used: a ×2, b ×1`` line (``None`` for other lines)."""
    match = _TOOLS.match(line.strip())
    if not match:
        return None
    return Counter({name: int(n) for name, n in _TOOL_COUNT.findall(match.group(1))})


def tools_line(tools: Counter[str], lang: str) -> list[str]:
    """The tally of tool calls as one bullet (no line when no tool was called)."""
    if not tools:
        return []
    used = ", ".join(f"{name} ×{n}" for name, n in sorted(tools.items(), key=lambda t: -t[1]))
    return [f"- 使用的工具：{used}" if lang == "zh" else f"- Tools used: {used}"]


@dataclass(slots=True, kw_only=True)
class _Note:
    kind: str
    context: str
    text: str
    pos: int


class Notes:
    """The bullets of ``## SUMMARY``: newest wins, decisions outlive errors, capped."""

    def __init__(self, lang: str, cap: int = NOTES_CAP) -> None:
        self.lang = lang
        self.cap = cap
        self.items: dict[tuple[str, str], _Note] = {}  # (kind, normalised text), in order
        self.dropped = 0
        self._pos = 0

    def carry(self, lines: Sequence[str], tools: Counter[str]) -> None:
        """Take the SUMMARY lines of an earlier summary (and its tool tally into ``tools``)."""
        for line in lines:
            count = parse_dropped(line)
            tally = parse_tools(line) if count is None else None
            if count is not None:
                self.dropped += count
            elif tally is not None:
                tools.update(tally)
            else:
                kind, context, text = parse_bullet(line)
                self.add(kind, text, context=context)

    def add(self, kind: str, text: str, *, context: str = "") -> None:
        """Add a line; an equal line, or an earlier choice it changes, is replaced."""
        text = strip_label(text, kind)
        # The context sits in brackets in the label: brackets of its own would break it.
        context = context.translate(_BRACKETS)
        key = (kind, normalize_bullet(text))
        if not key[1]:
            return
        self._pos += 1
        self.items.pop(key, None)
        if kind == "result" and context:  # one outcome per command: its latest run's
            for old in [k for k, n in self.items.items() if k[0] == kind and n.context == context]:
                del self.items[old]
        if kind in _CHOICES:
            for old in [k for k, n in self.items.items() if k[0] == kind]:
                if conflicts(text, self.items[old].text):
                    del self.items[old]
        self.items[key] = _Note(kind=kind, context=context, text=text, pos=self._pos)
        if len(self.items) > 4 * self.cap:  # bound the work on very long conversations
            self._enforce()

    def _enforce(self) -> None:
        extra = len(self.items) - self.cap
        if extra > 0:
            order = sorted(self.items, key=lambda k: (tier(k[0]), self.items[k].pos))
            for key in order[:extra]:
                del self.items[key]
            self.dropped += extra

    def drop_one(self) -> None:
        """Drop the least important, oldest line (and count it)."""
        self._enforce()
        if self.items:
            key = min(self.items, key=lambda k: (tier(k[0]), self.items[k].pos))
            del self.items[key]
            self.dropped += 1

    def render(self) -> list[str]:
        """The bullets, oldest first, after a count of the dropped ones."""
        self._enforce()
        lines = [dropped_line(self.dropped, "points", self.lang)] if self.dropped else []
        notes = sorted(self.items.values(), key=lambda n: n.pos)
        lines.extend(guard(render_bullet(n.kind, n.context, n.text, self.lang)) for n in notes)
        return lines

    def size(self) -> int:
        """Characters taken by the lines that could still be dropped."""
        self._enforce()
        return sum(len(n.text) + len(n.context) + 16 for n in self.items.values())


@dataclass(slots=True, kw_only=True)
class _Entry:
    group: str
    text: str
    tier: int
    pos: int
    failed: bool = False


class Artifacts:
    """The groups of ``## ARTIFACTS``: one line per artifact, ordered by last mention."""

    def __init__(self, lang: str) -> None:
        self.lang = lang
        self.entries: dict[tuple[str, str], _Entry] = {}
        self.dropped: Counter[str] = Counter()
        self._pos = 0

    @staticmethod
    def is_heading(line: str) -> bool:
        """Whether ``line`` is a group heading such as ``Files:`` or ``文件：``."""
        return line.rstrip(":：").strip().lower() in _HEADING_GROUP and line.endswith((":", "："))

    def carry(self, lines: Sequence[str]) -> None:
        """Take the ARTIFACTS lines of an earlier summary, in either language or old format."""
        group: str | None = None
        for line in lines:
            if self.is_heading(line):
                group = _HEADING_GROUP[line.rstrip(":：").strip().lower()]
                continue
            count = parse_dropped(line)
            if count is not None:
                self.dropped[group or "Other"] += count
                continue
            old = _OLD_LINE.match(line)
            if old:
                self._carry_one(_OLD_KINDS[old.group(1)], old.group(2).strip())
            elif group is not None:
                self._carry_one(group, line[2:].strip())
            else:
                self._carry_free(line[2:].strip())

    def _carry_one(self, group: str, text: str) -> None:
        edited = text.endswith(("(edited)", "（已修改）"))
        failed = text.endswith(("(failed)", "（失败）"))
        text = _SUFFIX.sub("", text)
        if group == "Commands" and len(text) > 2 and text[0] == text[-1] == "`":
            text = text[1:-1]
        if text:
            tier_ = 2 if edited else 1
            self.add([Found(group=group, key=key_of(group, text), text=text, tier=tier_)])
            if failed:
                self.set_status(key_of(group, text), failed=True)

    def _carry_free(self, text: str) -> None:
        """A line written by someone else (a language model): keep it, filed by its first name."""
        found = scan_text(text, tier=1)
        if found:
            first = found[0]
            shown = text if len(text) > len(first.text) else first.text
            self.add([Found(group=first.group, key=first.key, text=shown, tier=1)])
        elif text:
            self.add([Found(group="Other", key=text.casefold(), text=text, tier=1)])

    def add(self, found: Iterable[Found]) -> None:
        """Record mentions, in order; a known artifact moves to its latest mention."""
        for f in found:
            self._pos += 1
            entry = self.entries.pop((f.group, f.key), None)
            if entry is None:
                entry = _Entry(group=f.group, text=f.text, tier=f.tier, pos=self._pos)
            else:
                entry.pos = self._pos
                entry.tier = max(entry.tier, f.tier)
                # A description carried from an earlier summary beats a bare mention.
                if not (len(entry.text) > len(f.text) and entry.text.startswith(f.text)):
                    entry.text = f.text
            self.entries[(f.group, f.key)] = entry

    def set_status(self, command_key: str, *, failed: bool) -> None:
        """Mark the latest run of a command as failed or not."""
        entry = self.entries.get(("Commands", command_key))
        if entry is not None:
            entry.failed = failed

    def _enforce(self) -> None:
        for group in _ALL_GROUPS:
            members = [k for k, e in self.entries.items() if e.group == group]
            extra = len(members) - GROUP_CAPS[group]
            if extra > 0:
                members.sort(key=lambda k: (self.entries[k].tier, self.entries[k].pos))
                for key in members[:extra]:
                    del self.entries[key]
                self.dropped[group] += extra

    def drop_one(self) -> None:
        """Drop one line from the largest group: its least important, oldest artifact."""
        self._enforce()
        if not self.entries:
            return
        sizes = Counter(e.group for e in self.entries.values())
        group = max(_ALL_GROUPS, key=lambda g: (sizes[g], -_ALL_GROUPS.index(g)))
        key = min(
            (k for k, e in self.entries.items() if e.group == group),
            key=lambda k: (self.entries[k].tier, self.entries[k].pos),
        )
        del self.entries[key]
        self.dropped[group] += 1

    def render(self) -> list[str]:
        """Grouped lines: a heading, a count of dropped lines, the artifacts oldest first."""
        self._enforce()
        lines: list[str] = []
        for group in _ALL_GROUPS:
            members = sorted(
                (e for e in self.entries.values() if e.group == group), key=lambda e: e.pos
            )
            if not members and not self.dropped[group]:
                continue
            lines.append(_HEADINGS[self.lang][group] + ("：" if self.lang == "zh" else ":"))
            if self.dropped[group]:
                lines.append(dropped_line(self.dropped[group], group, self.lang))
            lines.extend(guard(f"- {self._show(e)}") for e in members)
        return lines

    def _show(self, entry: _Entry) -> str:
        if entry.group == "Files":
            return entry.text + (_EDITED[self.lang] if entry.tier == 2 else "")
        if entry.group == "Commands":
            return f"`{entry.text}`" + (_FAILED[self.lang] if entry.failed else "")
        return entry.text

    def size(self) -> int:
        """Characters taken by the artifact lines."""
        self._enforce()
        return sum(len(e.text) + 6 for e in self.entries.values())
