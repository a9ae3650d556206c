"""Extractive memory work: pick durable facts out of messages (flush), merge them into
MEMORY.md (consolidate). Deterministic, no model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memdir.ledger import normalize_bullet
from memdir.messages import SUMMARY_NAME, Msg
from memdir.models._extract import clip, cue_kind, cue_kinds, has_cjk, near_duplicate, sentences

__all__ = ["NO_REPLY", "STANDARD_SECTIONS", "consolidate", "extract_facts"]

NO_REPLY = "NO_REPLY"
_MAX_FACTS = 20

_REMEMBER_LEAD = re.compile(
    r"^(?:(?:please|pls|also|and|oh|btw|fyi)[,\s]+)*"
    r"(?:remember|don'?t forget|note|keep in mind)(?: that|:|,)?\s+"
    r"|^(?:请|请你|也|还有)?(?:记住|记得|别忘了|不要忘记|备忘)[：:，,]?\s*",
    re.IGNORECASE,
)
# Never remember credentials, even when asked in passing.
_SECRET = re.compile(
    r"\b(?:sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{12,}|\bapi[_ -]?key\b|\bpassword\b"
    r"|\bpasswd\b|\bsecret\b|\btoken\s*[:=]|密码|口令|密钥",
    re.IGNORECASE,
)


def extract_facts(msgs: Sequence[Msg], known: str) -> str:
    """Durable facts in ``msgs`` that ``known`` does not already hold, as ``- `` bullets.

    Facts come from user sentences with a cue (preference, decision, name, date or deadline,
    commitment, "remember that…", and their Chinese equivalents). Assistant messages are not
    mined: what an assistant decides mid-task is rarely worth keeping for months, and what
    the user confirms is caught from the user's side. Returns :data:`NO_REPLY` when there is
    nothing new.
    """
    known_lines = [normalize_bullet(ln) for ln in known.splitlines() if ln.strip()]
    known_keys = set(known_lines)
    facts: list[str] = []
    for msg in msgs:
        if msg.name == SUMMARY_NAME or msg.role != "user":
            continue
        for sentence in sentences(msg.text):
            fact = _fact(sentence)
            if fact is None:
                continue
            key = normalize_bullet(fact)
            body = normalize_bullet(fact.split(":", 1)[-1].split("：", 1)[-1])
            if key in known_keys or any(body in line for line in known_lines):
                continue
            if any(near_duplicate(fact, line) for line in known_lines):
                continue
            if any(normalize_bullet(f) == key or near_duplicate(f, fact) for f in facts):
                continue
            facts.append(fact)
    if not facts:
        return NO_REPLY
    return "\n".join(f"- {f}" for f in facts[-_MAX_FACTS:])


def _fact(sentence: str) -> str | None:
    kind = cue_kind(sentence)
    if kind is None or _SECRET.search(sentence):
        return None
    if sentence.rstrip().endswith(("?", "？", "吗")) and kind != "remember":
        return None
    text = _REMEMBER_LEAD.sub("", sentence).strip() if kind == "remember" else sentence
    if len(text) < (4 if has_cjk(text) else 10) or len(text) > 400:
        return None
    text = clip(text, 300)
    return ("用户：" if has_cjk(text) else "User: ") + text


# -- consolidation ---------------------------------------------------------------------------

STANDARD_SECTIONS = ("Preferences", "People", "Decisions", "Projects", "Facts")
_ALIASES = {
    "Preferences": ("preference", "likes", "偏好", "喜好", "习惯"),
    "People": ("people", "person", "contacts", "人物", "人员", "联系人", "家人"),
    "Decisions": ("decision", "决定", "决策"),
    "Projects": ("project", "work", "deadline", "项目", "工作", "截止"),
    "Facts": ("fact", "notes", "misc", "other", "general", "事实", "其他", "笔记"),
}
_WEIGHT = {"Preferences": 3, "People": 3, "Decisions": 2, "Projects": 2, "Facts": 1}
_IMPORTANT = re.compile(r"\b(?:important|always|never|must)\b|重要|务必|一定|永远|必须", re.I)
_PROJECT = re.compile(
    r"\b(?:project|repo|release|milestone|sprint|roadmap)\b|项目|仓库|版本|里程碑"
)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


@dataclass(slots=True)
class _Item:
    text: str
    bullet: bool
    rank: int = 0


@dataclass(slots=True)
class _Doc:
    title: str = "# Memory"
    preamble: list[str] = field(default_factory=list)
    sections: dict[str, list[_Item]] = field(default_factory=dict)


def _canonical(header: str) -> str:
    low = header.strip().lower()
    for name, aliases in _ALIASES.items():
        if any(a in low for a in aliases):
            return name
    return header.strip()


def _parse(current: str) -> _Doc:
    doc = _Doc()
    section: str | None = None
    rank = 0
    for line in current.splitlines():
        stripped = line.strip()
        if section is None and line.startswith("# ") and not doc.preamble and rank == 0:
            doc.title = stripped
        elif line.startswith("## "):
            section = _canonical(line[3:])
            doc.sections.setdefault(section, [])
        elif _BULLET.match(line):
            rank += 1
            text = _BULLET.sub("", line, count=1).rstrip()
            # Bullets above any section are filed like new entries.
            home = section if section is not None else _classify(text)
            doc.sections.setdefault(home, []).append(_Item(text, bullet=True, rank=rank))
        elif stripped and line[:1].isspace() and section and doc.sections[section]:
            doc.sections[section][-1].text += "\n" + line.rstrip()  # continuation line
        elif section is None:
            doc.preamble.append(line.rstrip())
        elif stripped:
            doc.sections[section].append(_Item(line.rstrip(), bullet=False))
    return doc


def _classify(text: str) -> str:
    kinds = cue_kinds(text)
    for kind, section in (
        ("person", "People"),
        ("preference", "Preferences"),
        ("decision", "Decisions"),
        ("deadline", "Projects"),
    ):
        if kind in kinds:
            return section
    return "Projects" if _PROJECT.search(text) else "Facts"


def consolidate(current: str, entries: Iterable[str], max_chars: int | None = None) -> str:
    """A complete new MEMORY.md: ``current`` merged with new ledger ``entries`` (oldest first).

    Bullets are deduplicated by normalised text; a new entry replaces a near-duplicate older
    one (newest wins); new entries are filed under Preferences / People / Decisions /
    Projects / Facts. Prose the user wrote is kept. Over ``max_chars``, the least important,
    oldest bullets are dropped first.
    """
    doc = _parse(current)
    index: dict[str, _Item] = {}
    for items in doc.sections.values():
        for item in list(items):
            if not item.bullet:
                continue
            key = normalize_bullet(item.text)
            if key in index:
                items.remove(item)  # exact repeat inside MEMORY.md
            else:
                index[key] = item
    rank = max((i.rank for i in index.values()), default=0)
    for entry in entries:
        text = " ".join(_BULLET.sub("", entry.strip(), count=1).split())
        key = normalize_bullet(text)
        if not key:
            continue
        rank += 1
        if key in index:
            index[key].rank = rank
            continue
        similar = next((i for i in index.values() if near_duplicate(i.text, text)), None)
        if similar is not None:
            del index[normalize_bullet(similar.text)]
            similar.text, similar.rank = text, rank
            index[key] = similar
            continue
        item = _Item(text, bullet=True, rank=rank)
        doc.sections.setdefault(_classify(text), []).append(item)
        index[key] = item
    rendered = _render(doc)
    if max_chars is None or len(rendered) <= max_chars:
        return rendered
    return _fit(doc, max_chars)


def _fit(doc: _Doc, max_chars: int) -> str:
    victims = sorted(
        ((name, item) for name, items in doc.sections.items() for item in items if item.bullet),
        key=lambda pair: (
            _WEIGHT.get(pair[0], 2) + (1 if _IMPORTANT.search(pair[1].text) else 0),
            pair[1].rank,
        ),
    )
    size = len(_render(doc))
    for name, item in victims:
        if size <= max_chars:
            break
        doc.sections[name].remove(item)
        size -= len(item.text) + 3  # "- " and the newline
    return _render(doc)


def _render(doc: _Doc) -> str:
    parts = [doc.title]
    preamble = "\n".join(doc.preamble).strip("\n")
    if preamble:
        parts.append(preamble)
    order = [s for s in STANDARD_SECTIONS if s in doc.sections]
    order += [s for s in doc.sections if s not in STANDARD_SECTIONS]
    for name in order:
        items = doc.sections[name]
        if not items:
            continue
        lines = [f"- {i.text}" if i.bullet else i.text for i in items]
        parts.append(f"## {name}\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"
