"""Extractive memory work: pick durable facts out of messages (flush), merge them into
MEMORY.md (consolidate). Deterministic, no model.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memdir.messages import SUMMARY_NAME, Msg
from memdir.models.extractive._extract import (
    clip,
    cue_kinds,
    has_cjk,
    name_tokens,
    near_duplicate,
    sentences,
    split_label,
    tokens,
)
from memdir.models.extractive._extract_dates import resolve_dates
from memdir.models.extractive._extract_signals import KEEP, fact_score
from memdir.models.extractive._source_ids import add_marker, split_marker
from memdir.models.extractive._supersede import Updates
from memdir.store.ledger import normalize_bullet

__all__ = ["CANNED_PREFIX", "NO_REPLY", "STANDARD_SECTIONS", "consolidate", "extract_facts"]

NO_REPLY = "NO_REPLY"
CANNED_PREFIX = "(extractive model:"  # how ExtractiveModel's own fixed replies begin
_PER_MESSAGE = 3  # a long message still yields only its best few facts
_MAX_FACTS = 40
_ELABORATES = 1.5  # a sentence right after a fact that has content joins its bullet
_MAX_ELABORATION = 2
_ASSISTANT_CUES = frozenset({"decision", "deadline", "rule"})

_REMEMBER_LEAD = re.compile(
    r"^(?:(?:please|pls|also|and|oh|btw|fyi)[,\s]+)*"
    r"(?:remember|don'?t forget|note|keep in mind)(?: that|:|,)?\s+"
    r"|^(?:请|请你|也|还有)?(?:记住|记得|别忘了|不要忘记|备忘)[：:，,]?\s*",
    re.IGNORECASE,
)
_NAME_CHARS = re.compile(r"[\s:：\[\]()#*`]+")
# Closing chatter ("Let's stop here for today.", "Thanks!", 好的，明天见) says nothing about
# the fact before it, even when a date or a name makes it look like content.
_CHATTER = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|all right|so|well|great|cool)[,!.\s]+)*"
    r"(?:let'?s (?:stop|call it|wrap|pause|end|finish|continue|pick (?:this|it|that) up)|"
    r"talk (?:to you )?(?:later|soon|tomorrow)|(?:see|catch) you|speak soon|thanks|thank you|thx|"
    r"cheers|bye|good ?bye|good ?night|have a (?:good|nice|great)|that'?s (?:all|it) for|"
    r"(?:i'?ll|we'?ll) (?:stop|leave it) (?:here|there)|more (?:tomorrow|later)|until tomorrow)\b"
    r"|^(?:好的|好吧|谢谢|多谢|感谢|辛苦|今天就到|今天先|先这样|就这样|就到这|再见|拜拜|明天见|回头见|"
    r"下次见|晚安|明天再|回头再)",
    re.IGNORECASE,
)
# Closing a conversation is never a fact, even with a date in it ("…for today (2026-11-26)").
_CLOSING = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|all right|so|well|great|cool)[,!.\s]+)*"
    r"(?:let'?s (?:stop|call it|wrap|pause|end|finish|pick (?:this|it|that) up)|"
    r"talk (?:to you )?(?:later|soon|tomorrow))\b|^(?:今天就到|今天先|先这样|就这样|就到这)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class _Fact:
    text: str
    score: float
    position: int
    label: str
    words: frozenset[str]
    core: frozenset[str]  # the words without any "Decision:"-style label of the text itself
    assistant: bool = False


def _core(body: str) -> frozenset[str]:
    return frozenset(tokens(split_label(body)[1]))


@functools.lru_cache(maxsize=4096)
def _known_fact(line: str) -> tuple[str, _Fact]:
    """``(normalised key, fact)`` of a known line; cached, as the same lines come every call."""
    key = normalize_bullet(line)
    label, body = split_label(key)
    return key, _Fact(line, 0.0, -1, label, frozenset(tokens(body)), _core(body))


def _repeats(new: _Fact, old: _Fact) -> bool:
    """Whether ``new`` says nothing that ``old`` does not already say.

    A user's fact repeats only the same speaker's (two people saying the same thing are two
    facts); an assistant restating anyone's fact ("Decision: we use X") repeats it.
    """
    if new.assistant:
        mine, theirs = new.core, old.core
    elif new.label and old.label and new.label != old.label:
        return False
    else:
        mine, theirs = new.words, old.words
    if len(mine) < 2 or not theirs:
        return False
    if mine <= theirs:
        return True
    overlap = len(mine & theirs) / len(mine | theirs)
    return overlap >= 0.85 and not (mine ^ theirs) & (name_tokens(new.text) | name_tokens(old.text))


class _Seen:
    """The facts seen so far, indexed by word so that a new fact is compared only with those
    that could repeat it, not with all of them (a long conversation has thousands)."""

    def __init__(self) -> None:
        self._facts: list[_Fact] = []
        self._postings: dict[str, list[int]] = {}  # word -> indexes of facts that have it

    def add(self, fact: _Fact) -> None:
        for word in fact.words | fact.core:
            self._postings.setdefault(word, []).append(len(self._facts))
        self._facts.append(fact)

    def repeated(self, new: _Fact) -> bool:
        """``any(_repeats(new, old) for old in seen)``, computed on few candidates.

        A repeated fact's words are all in the old one, or 85 % of their union is shared: so
        at most ``m = ⌊0.15 n⌋`` of the ``n`` new words are missing from it, and any ``m + k``
        of them hold at least ``k`` it has. The ``m + 3`` rarest (the shortest lists) are
        taken, and only facts found in three of them (or all, when fewer) are compared.
        """
        mine = new.core if new.assistant else new.words
        if len(mine) < 2:
            return False
        missing = int(0.15 * len(mine))
        lists = sorted((self._postings.get(w, ()) for w in mine), key=len)[: missing + 3]
        hits = Counter(i for ids in lists for i in ids)
        least = len(lists) - missing
        candidates = sorted(i for i, n in hits.items() if n >= least)
        return any(_repeats(new, self._facts[i]) for i in candidates)


def _speaker(msg: Msg, cjk: bool) -> str:
    name = _NAME_CHARS.sub(" ", msg.name or "").strip()[:40]
    if name:
        return name
    if msg.role == "assistant":
        return "助手" if cjk else "Assistant"
    return "用户" if cjk else "User"


def _groups(msg: Msg, addressees: frozenset[str]) -> list[tuple[float, list[str]]]:
    """Kept sentences of ``msg`` with their score, each joined by up to two following
    sentences that elaborate on it and have some content ("We adopted a puppy. His name is
    Max."): on its own, "His name is Max" would not say whose name it is. Clauses joined by
    ";" stay one sentence; closing chatter ("Let's stop here for today.") never joins."""
    groups: list[tuple[float, list[str]]] = []
    open_group = False
    for sentence in sentences(msg.text, semicolons=False):
        kinds = cue_kinds(sentence)
        if msg.role == "assistant" and (
            msg.text.lstrip().startswith(CANNED_PREFIX) or not _ASSISTANT_CUES.intersection(kinds)
        ):
            open_group = False  # an assistant's own chatter and plans are not memories
            continue
        score = None if _CLOSING.match(sentence) else fact_score(sentence, addressees=addressees)
        if score is None:
            open_group = False
            continue
        if score >= KEEP:
            if "remember" in kinds:
                sentence = _REMEMBER_LEAD.sub("", sentence).strip()
            groups.append((score, [sentence]))
            open_group = True
        elif (
            open_group
            and score >= _ELABORATES
            and len(groups[-1][1]) <= _MAX_ELABORATION
            and not _CHATTER.match(sentence)
        ):
            groups[-1][1].append(sentence)
        else:
            open_group = False
    return groups


def _candidates(msg: Msg, position: int, addressees: frozenset[str]) -> list[_Fact]:
    """The facts of one message worth keeping, best :data:`_PER_MESSAGE` at most, in order."""
    day = msg.created_at.date()
    found: list[_Fact] = []
    for score, group in _groups(msg, addressees):
        cjk = has_cjk(group[0])
        text = ("" if cjk else " ").join(group)
        if len(text) < (4 if cjk else 8):
            continue
        text = clip(resolve_dates(text, day), 300)
        text = f"{_speaker(msg, cjk)}{'：' if cjk else ': '}{text}"
        label, body = split_label(normalize_bullet(text))
        words = frozenset(tokens(body))
        found.append(
            _Fact(text, score, position, label, words, _core(body), msg.role == "assistant")
        )
    best = sorted(found, key=lambda f: -f.score)[:_PER_MESSAGE]
    return [f for f in found if f in best]


def extract_facts(msgs: Sequence[Msg], known: str) -> str:
    """Durable facts in ``msgs`` that ``known`` does not already hold, as ``- `` bullets.

    Every sentence of a user message is scored by :func:`fact_score` (first-person
    statements, names, numbers, dates, relations, plans, preferences, decisions…); those
    that reach :data:`KEEP` become bullets, prefixed with the speaker (``Msg.name``, else
    ``User``/``用户``) and with relative dates made absolute from ``Msg.created_at``.
    Questions, reactions, greetings, code and credentials are never kept. Assistant
    messages give only decisions, deadlines and rules. A fact that repeats one in ``known``
    or an earlier one in the batch is dropped (same text, or no word the other lacks, or
    85 % of the words in common and no differing name or number). At most three facts come
    from one message and ``2 + 2 × messages`` (40 at most) from one call: the best-scored,
    the newer of equals, in conversation order.

    Returns:
        The bullets, one per line, or :data:`NO_REPLY` when there is nothing new.
    """
    known_lines = [ln for ln in known.splitlines() if ln.strip() and not ln.startswith("#")]
    parsed = [_known_fact(ln) for ln in known_lines]
    known_keys = {key for key, _ in parsed}
    seen = _Seen()
    for _, old in parsed:
        seen.add(old)
    facts: list[_Fact] = []
    mined = [m for m in msgs if m.name != SUMMARY_NAME and m.role in ("user", "assistant")]
    # People addressed by name ("Thanks, Anna!") are the speakers of the conversation.
    addressees = frozenset(n for m in mined if m.name for n in m.name.split())
    for position, msg in enumerate(mined):
        for fact in _candidates(msg, position, addressees):
            if normalize_bullet(fact.text) in known_keys:
                continue
            if seen.repeated(fact):
                continue
            seen.add(fact)
            facts.append(fact)
    if not facts:
        return NO_REPLY
    cap = min(_MAX_FACTS, 2 + 2 * len(mined))
    if len(facts) > cap:
        # Best first, the newer of two equals; then back into conversation order.
        best = sorted(facts, key=lambda f: (-f.score, -f.position))[:cap]
        facts = [f for f in facts if f in best]
    return "\n".join(f"- {f.text}" for f in facts)


# -- consolidation ---------------------------------------------------------------------------

STANDARD_SECTIONS = ("Preferences", "People", "Decisions", "Projects", "Facts")
_ALIASES = {
    "Preferences": ("preference", "likes", "偏好", "喜好", "习惯"),
    "People": ("people", "person", "contacts", "人物", "人员", "联系人", "家人"),
    "Decisions": ("decision", "决定", "决策"),
    "Projects": ("project", "work", "deadline", "项目", "工作", "截止"),
    "Facts": ("fact", "notes", "misc", "other", "general", "事实", "其他", "笔记"),
}
_NEW_WEIGHT = 2
_ENTRY_SHARE = 4  # an entry is clipped to a quarter of the budget
_MIN_ENTRY = 200
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
    new: bool = False  # added, updated or said again by this consolidation's entries
    ids: list[str] = field(default_factory=list)  # the source ids it was given / came from

    def cite(self, ids: Iterable[str]) -> None:
        self.ids += [i for i in ids if i not in self.ids]


@dataclass(slots=True)
class _Doc:
    title: str = "# Memory"
    preamble: list[str] = field(default_factory=list)
    sections: dict[str, list[_Item]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # the sections the file had, in its order


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
        # A title needs words: a bare "# " stays prose, so re-reading the output is stable.
        if (
            section is None
            and line.startswith("# ")
            and stripped[1:].strip()
            and not doc.preamble
            and rank == 0
        ):
            doc.title = stripped
        elif line.startswith("## "):
            section = _canonical(line[3:])
            doc.sections.setdefault(section, [])
        elif _BULLET.match(line):
            rank += 1
            text, ids = split_marker(_BULLET.sub("", line, count=1).rstrip())
            # Bullets above any section are filed like new entries.
            home = section if section is not None else _classify(text)
            doc.sections.setdefault(home, []).append(_Item(text, bullet=True, rank=rank, ids=ids))
        elif stripped and line[:1].isspace() and section and doc.sections[section]:
            more, ids = split_marker(line.rstrip())
            doc.sections[section][-1].text += "\n" + more  # continuation line
            doc.sections[section][-1].cite(ids)
        elif section is None:
            doc.preamble.append(line.rstrip())
        elif stripped:
            doc.sections[section].append(_Item(line.rstrip(), bullet=False))
    doc.order = list(doc.sections)
    return doc


def _classify(text: str) -> str:
    kinds = cue_kinds(text)
    for kind, section in (
        ("person", "People"),
        ("preference", "Preferences"),
        ("standing", "Preferences"),  # how the user wants things done from now on
        ("decision", "Decisions"),
        ("deadline", "Projects"),
    ):
        if kind in kinds:
            return section
    return "Projects" if _PROJECT.search(text) else "Facts"


def consolidate(current: str, entries: Iterable[str], max_chars: int | None = None) -> str:
    """A complete new MEMORY.md: ``current`` merged with new ledger ``entries`` (oldest first).

    Bullets are deduplicated by normalised text; a new entry replaces a near-duplicate older
    one (newest wins), and an update replaces, in its place, each fact it supersedes ("batch
    size changed to 2,000 (was 5,000)" replaces "batches of 5,000 rows", see
    :mod:`memdir.models.extractive._supersede`); other new entries are filed under Preferences /
    People / Decisions / Projects / Facts. Prose the user wrote is kept. Over ``max_chars``,
    bullets are dropped lowest priority first: the section's weight (Facts 1, Projects and
    Decisions 2, Preferences and People 3), +1 when marked important ("always", 重要…), +2
    when these entries brought or restated it — so a full file still takes in new facts, and the
    oldest go first within a priority. An entry longer than a quarter of ``max_chars`` is
    clipped to its head with an ellipsis.

    Source ids (``[src: e1]`` after an entry or a bullet, :mod:`._source_ids`) are carried: a
    bullet ends with the ids of everything it was made from (a repeat or a near-duplicate adds
    its ids, an update replaces the ids of the fact it supersedes). ``max_chars`` counts the
    text without them.
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
                index[key].cite(item.ids)
            else:
                index[key] = item
    updates = Updates()
    for key, item in index.items():
        updates.add(key, item.text)
    rank = max((i.rank for i in index.values()), default=0)
    # One entry may not take more than a share of the budget: a huge one is kept by its head
    # rather than dropped whole, which would leave nothing of it and stall the next runs.
    longest = max(_MIN_ENTRY, max_chars // _ENTRY_SHARE) if max_chars else None
    for entry in entries:
        body, ids = split_marker(entry)
        text = " ".join(_BULLET.sub("", body.strip(), count=1).split())
        if longest is not None:
            text = clip(text, longest)
        key = normalize_bullet(text)
        if not key:
            continue
        rank += 1
        stale = [index[k] for k in updates.superseded_by(text) if k != key]
        if key in index:
            index[key].rank, index[key].new = rank, True
            index[key].cite(ids)
        else:
            similar = next((i for i in index.values() if near_duplicate(i.text, text)), None)
            if similar is None and stale:
                similar = stale[0]  # the update takes the place of the fact it replaces
                similar.ids = []  # and only the update is its source
            if similar is not None:
                old_key = normalize_bullet(similar.text)
                del index[old_key]
                updates.discard(old_key)
                similar.text, similar.rank, similar.new = text, rank, True
                similar.cite(ids)
                index[key] = similar
            else:
                item = _Item(text, bullet=True, rank=rank, new=True, ids=list(ids))
                doc.sections.setdefault(_classify(text), []).append(item)
                index[key] = item
            updates.add(key, text)
        for item in stale:
            if item is not index[key]:
                _drop(doc, index, updates, item)
    if max_chars is None or len(_render(doc, cite=False)) <= max_chars:
        return _render(doc)
    return _fit(doc, max_chars)


def _drop(doc: _Doc, index: dict[str, _Item], updates: Updates, item: _Item) -> None:
    """Remove a superseded bullet from the file and from the lookups."""
    key = normalize_bullet(item.text)
    index.pop(key, None)
    updates.discard(key)
    for items in doc.sections.values():
        for i, other in enumerate(items):
            if other is item:
                del items[i]
                return


def _fit(doc: _Doc, max_chars: int) -> str:
    # Lowest priority goes first: section weight, +1 for "important", +2 for what this
    # consolidation brought, so that new facts can enter a full file; oldest first on ties.
    victims = sorted(
        ((name, item) for name, items in doc.sections.items() for item in items if item.bullet),
        key=lambda pair: (
            _WEIGHT.get(pair[0], 2)
            + (1 if _IMPORTANT.search(pair[1].text) else 0)
            + (_NEW_WEIGHT if pair[1].new else 0),
            pair[1].rank,
        ),
    )
    excess = len(_render(doc, cite=False)) - max_chars
    # Old bullets leave to make room for new ones: keep as many new bullets as possible while
    # dropping at most one old bullet per new one kept, plus a quarter of the old ones (a
    # full file turns over gradually). If even that cannot fit (a file over budget before
    # any entry), drop by priority alone.
    fresh = [i for i, (_, item) in enumerate(victims) if item.new]
    slack = max(1, (len(victims) - len(fresh)) // 4)
    plan = None
    for keep in range(len(fresh), -1, -1):
        protected = set(fresh[len(fresh) - keep :])  # the highest-priority new bullets
        plan = _plan(victims, excess, protected, max_old=keep + slack)
        if plan is not None:
            break
    if plan is None:
        plan = _plan(victims, excess, set(), max_old=len(victims)) or []
    for index in plan:
        name, item = victims[index]
        doc.sections[name].remove(item)
    return _render(doc)


def _plan(
    victims: list[tuple[str, _Item]], excess: int, protected: set[int], *, max_old: int
) -> list[int] | None:
    """Indexes of ``victims`` to drop, in order, to save ``excess`` characters, or ``None``."""
    plan: list[int] = []
    old = 0
    for index, (_, item) in enumerate(victims):
        if excess <= 0:
            break
        if index in protected or (not item.new and old >= max_old):
            continue
        plan.append(index)
        excess -= len(item.text) + 3  # "- " and the newline
        old += not item.new
    return plan if excess <= 0 else None


def _render(doc: _Doc, *, cite: bool = True) -> str:
    """The file; with ``cite``, each bullet ends with its source ids (``[src: …]``)."""
    parts = [doc.title]
    preamble = "\n".join(doc.preamble).strip("\n")
    if preamble:
        parts.append(preamble)
    order = _section_order(doc)
    for name in order:
        items = doc.sections[name]
        if not items:
            continue
        lines = [
            add_marker(f"- {i.text}", i.ids if cite else ()) if i.bullet else i.text for i in items
        ]
        parts.append(f"## {name}\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _section_order(doc: _Doc) -> list[str]:
    """The file's own sections in their places (a user's "## About Jing" stays on top); a new
    standard section goes next to its standard neighbours, other new sections last."""
    order = [s for s in doc.order if s in doc.sections]
    for rank, name in enumerate(STANDARD_SECTIONS):
        if name not in doc.sections or name in order:
            continue
        before = [order.index(s) for s in STANDARD_SECTIONS[:rank] if s in order]
        after = [order.index(s) for s in STANDARD_SECTIONS[rank + 1 :] if s in order]
        at = max(before) + 1 if before else min(after) if after else len(order)
        order.insert(at, name)
    return order + [s for s in doc.sections if s not in order]
