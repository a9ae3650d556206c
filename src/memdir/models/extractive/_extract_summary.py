"""The extractive compaction summary: four sections pulled out of the messages, no model.

``## SESSION INTENT``
    The first substantive request and each later change of direction.
``## SUMMARY``
    Labelled bullets: decisions, constraints, preferences and facts the user stated, the
    assistant's decisions and findings, error and outcome lines of tool output, and a tally of
    the tools used. Newest wins: a repeated line moves to its latest place, and a decision or
    preference that changes an earlier one replaces it.
``## ARTIFACTS``
    ``Files`` / ``Commands`` / ``Identifiers`` / ``URLs`` (see :mod:`._summary_artifacts`),
    each deduplicated and ordered by last mention.
``## NEXT STEPS``
    The open user request(s) nearly word for word, pending tool calls, and what the assistant
    said it would do next.

An earlier summary among the messages is folded in: its sections are carried over and merged
with the new messages. Every section has a cap; what goes over it is dropped oldest (and least
important) first and counted in a ``(+N … in the session log)`` line, so the summary stays
bounded however many times it is folded. Labels follow the conversation's language. Secrets
are masked with :func:`memdir.redact.redact`. The output is a pure function of the input.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from memdir.messages import SUMMARY_NAME, Msg, ToolUseBlock, dangling_tool_calls
from memdir.models.extractive._extract import clip, sentences
from memdir.models.extractive._summary_artifacts import call_command, key_of, scan_call, scan_text
from memdir.models.extractive._summary_fold import (
    Artifacts,
    Notes,
    dropped_line,
    guard,
    parse_dropped,
    tools_line,
)
from memdir.models.extractive._summary_notes import (
    assistant_kind,
    call_label,
    commitment,
    direction_change,
    language,
    output_lines,
    request_gist,
    user_kinds,
)
from memdir.redact import redact
from memdir.store.ledger import normalize_bullet

__all__ = ["SECTIONS", "parse_summary", "summarize"]

SECTIONS = ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")
_INTENT_CAP, _INTENT_HEAD, _STEPS_CAP = 6, 2, 6
# What share of a tight budget each section may keep before it gives up lines.
_SHARES = {"SESSION INTENT": 0.15, "SUMMARY": 0.4, "ARTIFACTS": 0.35, "NEXT STEPS": 0.1}
_HEADER = re.compile(r"^\s*#{1,3}\s*(SESSION INTENT|SUMMARY|ARTIFACTS|NEXT STEPS)\s*$", re.I)
_STEP_TEXT = {
    "en": {
        "open": "Open user request: ",
        "answered": "Last user request (answered): ",
        "call": "Pending tool call: ",
        "plan": "Assistant's plan: ",
    },
    "zh": {
        "open": "未完成的用户请求：",
        "answered": "最后的用户请求（已答复）：",
        "call": "未完成的工具调用：",
        "plan": "助手计划：",
    },
}


def parse_summary(text: str) -> dict[str, list[str]]:
    """The lines of each section of a summary (``None`` placeholders left out).

    Lines are ``- `` bullets, except the group headings of ``## ARTIFACTS`` (``Files:`` …),
    which are kept as they are.
    """
    out: dict[str, list[str]] = {name: [] for name in SECTIONS}
    current: str | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = header.group(1).upper()
            continue
        if line.lstrip().startswith(("#", "</summary>")):
            current = None
            continue
        body = line.strip()
        if current is None or not body or body.lower() in ("none", "- none", "(none)"):
            continue
        if current == "ARTIFACTS" and Artifacts.is_heading(body):
            out[current].append(body)
        else:
            out[current].append(body if body.startswith("- ") else f"- {body.lstrip('-*• ')}")
    return out


def _is_summary(msg: Msg) -> bool:
    return msg.name == SUMMARY_NAME or (msg.role != "tool" and "## SESSION INTENT" in msg.text)


def summarize(msgs: Sequence[Msg], *, max_chars: int | None = None) -> str:
    """The four-section summary of ``msgs`` (earlier summaries among them folded in).

    Args:
        msgs: the messages to summarise, oldest first; summary messages are folded in.
        max_chars: an upper bound on the length of the answer, met by dropping the oldest,
            least important lines first, then by shortening lines (``None``: only the
            per-section caps apply).
    """
    conv = [m for m in msgs if m.role != "system" and not _is_summary(m)]
    draft = _Draft(language(conv, "\n".join(m.text for m in msgs if _is_summary(m))))
    old_steps: list[str] = []
    for msg in msgs:
        if _is_summary(msg):
            old_steps.extend(draft.carry(parse_summary(msg.text)))

    # The nearest earlier call of each id: models that number calls per answer reuse ids.
    calls: dict[str, ToolUseBlock] = {}
    gists = [request_gist(m.text) if m.role == "user" else "" for m in conv]
    for msg, gist in zip(conv, gists, strict=True):
        calls.update((c.id, c) for c in msg.tool_uses)
        _read_message(msg, calls, draft.notes, draft.artifacts, draft.tools)
        if gist and (not draft.intents or direction_change(gist, draft.intents)):
            draft.intents.append(gist)
    # A new request makes the old next steps history; otherwise they still stand.
    asked = any(gists)
    fresh = _next_steps(conv, gists, draft.lang)
    draft.set_steps(fresh if asked else [*old_steps, *fresh], reset=asked)
    return draft.fit(max_chars)


class _Draft:
    """The summary being assembled: its four sections and what each has dropped."""

    def __init__(self, lang: str) -> None:
        self.lang = lang
        self.notes = Notes(lang)
        self.artifacts = Artifacts(lang)
        self.tools: Counter[str] = Counter()
        self.intents: list[str] = []
        self.intents_dropped = 0
        self.steps: list[str] = []
        self.steps_dropped = 0

    def carry(self, old: dict[str, list[str]]) -> list[str]:
        """Take an earlier summary's sections; return its next steps (kept or not later)."""
        for line in old["SESSION INTENT"]:
            count = parse_dropped(line)
            if count is None:
                self.intents.append(line[2:])
            else:
                self.intents_dropped += count
        self.notes.carry(old["SUMMARY"], self.tools)
        self.artifacts.carry(old["ARTIFACTS"])
        steps = []
        for line in old["NEXT STEPS"]:
            count = parse_dropped(line)
            if count is None:
                steps.append(line[2:])
            else:
                self.steps_dropped += count
        return steps

    def set_steps(self, steps: list[str], *, reset: bool) -> None:
        """Settle the next steps (and the intents' cap: the first ones and the latest)."""
        self.steps = _dedupe(steps)
        if reset:
            self.steps_dropped = 0
        if len(self.steps) > _STEPS_CAP:
            self.steps_dropped += len(self.steps) - _STEPS_CAP
            self.steps = self.steps[-_STEPS_CAP:]
        self.intents = _dedupe(self.intents)
        if len(self.intents) > _INTENT_CAP:
            cut = len(self.intents) - _INTENT_CAP
            self.intents_dropped += cut
            del self.intents[_INTENT_HEAD : _INTENT_HEAD + cut]

    def render(self, width: int | None = None) -> str:
        """The summary text; ``width`` shortens every line (the last resort of :meth:`fit`)."""
        lang = self.lang
        intents = [guard(f"- {i}") for i in self.intents]
        if self.intents_dropped:
            at = min(_INTENT_HEAD, len(intents))
            intents.insert(at, dropped_line(self.intents_dropped, "requests", lang))
        steps = [guard(f"- {s}") for s in self.steps]
        if self.steps_dropped:
            steps.insert(0, dropped_line(self.steps_dropped, "steps", lang))
        bodies = {
            "SESSION INTENT": intents,
            "SUMMARY": [*self.notes.render(), *tools_line(self.tools, lang)],
            "ARTIFACTS": self.artifacts.render(),
            "NEXT STEPS": steps,
        }
        blocks = []
        for name in SECTIONS:
            lines = bodies[name]
            if width is not None:
                lines = [clip(ln, width) if ln.startswith("- ") else ln for ln in lines]
            blocks.append(f"## {name}\n" + ("\n".join(lines) or "None"))
        return redact("\n\n".join(blocks) + "\n")

    def fit(self, max_chars: int | None) -> str:
        """Render within ``max_chars``: drop lines from the section furthest over its share
        (oldest and least important first), then, if that is not enough, shorten lines."""
        text = self.render()
        while max_chars is not None and len(text) > max_chars:
            self._drop(len(text) - max_chars)
            shorter = self.render()
            if len(shorter) >= len(text):
                break  # nothing left to drop
            text = shorter
        width = 160
        while max_chars is not None and len(text) > max_chars and width >= 40:
            text = self.render(width)
            width -= 20
        return text

    def _drop(self, over: int) -> None:
        while over > 0:
            sizes = {
                "SESSION INTENT": _size(self.intents) if len(self.intents) > 1 else 0,
                "SUMMARY": self.notes.size(),
                "ARTIFACTS": self.artifacts.size(),
                "NEXT STEPS": _size(self.steps) if len(self.steps) > 1 else 0,
            }
            name = max(SECTIONS, key=lambda n: (sizes[n] / _SHARES[n], -SECTIONS.index(n)))
            if sizes[name] == 0:
                return
            if name == "SUMMARY":
                self.notes.drop_one()
                over -= sizes[name] - self.notes.size()
            elif name == "ARTIFACTS":
                self.artifacts.drop_one()
                over -= sizes[name] - self.artifacts.size()
            elif name == "SESSION INTENT":
                at = _INTENT_HEAD if len(self.intents) > _INTENT_HEAD else 1
                over -= len(self.intents.pop(at)) + 3
                self.intents_dropped += 1
            else:
                over -= len(self.steps.pop(0)) + 3
                self.steps_dropped += 1


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 3 for line in lines)


def _dedupe(lines: Sequence[str]) -> list[str]:
    """First occurrence of each line (compared as normalised bullets)."""
    seen: set[str] = set()
    out = []
    for line in lines:
        key = normalize_bullet(line)
        if key and key not in seen:
            seen.add(key)
            out.append(line)
    return out


def _read_message(
    msg: Msg,
    calls: dict[str, ToolUseBlock],
    notes: Notes,
    artifacts: Artifacts,
    tools: Counter[str],
) -> None:
    """Add what one message contributes to the SUMMARY and ARTIFACTS sections."""
    if msg.role == "user":
        for sentence in sentences(msg.text):
            kind = user_kinds(sentence)
            if kind:
                notes.add(kind, clip(sentence, 220))
        artifacts.add(scan_text(msg.text, tier=1))
    elif msg.role == "assistant":
        said = [(s, assistant_kind(s)) for s in sentences(msg.text)]
        for sentence, kind in said:
            if kind:
                notes.add(kind, clip(sentence, 220))
        # A final answer (no tool call follows): its first plain sentence is the gist.
        plain = [s for s, kind in said if not kind]
        if plain and not msg.tool_uses:
            notes.add("answer", clip(plain[0], 200))
        artifacts.add(scan_text(msg.text, tier=1))
        for call in msg.tool_uses:
            tools[call.name] += 1
            artifacts.add(scan_call(call))
    elif msg.role == "tool":
        for result in msg.tool_results:
            origin = calls.get(result.tool_use_id)
            lines = output_lines(result.text, result.is_error)
            label = call_label(origin, result.name)
            for kind, line in lines:
                notes.add(kind, line, context=label)
            artifacts.add(scan_text(result.text[:20_000], tier=0, output=True))
            command = call_command(origin) if origin is not None else None
            if command:
                failed = result.is_error or any(kind == "error" for kind, _ in lines)
                artifacts.set_status(key_of("Commands", command), failed=failed)


def _is_answer(msg: Msg) -> bool:
    return msg.role == "assistant" and not msg.tool_uses and bool(msg.text.strip())


def _next_steps(conv: Sequence[Msg], gists: Sequence[str], lang: str) -> list[str]:
    """Open requests, pending tool calls and the assistant's stated plans, oldest first."""
    words = _STEP_TEXT[lang]
    steps: list[str] = []
    asks = [i for i, gist in enumerate(gists) if gist]
    last_answer = next((i for i in range(len(conv) - 1, -1, -1) if _is_answer(conv[i])), -1)
    open_asks = [i for i in asks if i > last_answer][-3:]
    for i in open_asks:
        steps.append(words["open"] + clip(conv[i].text, 400))
    # Plans said after the last request, or just before it (the request may accept them).
    since = asks[-1] if asks else 0
    before = next(
        (
            i
            for i in range(since - 1, -1, -1)
            if conv[i].role == "assistant" and conv[i].text.strip()
        ),
        since,
    )
    for i in range(before, len(conv)):
        if conv[i].role == "assistant":
            plans = [s for s in sentences(conv[i].text) if commitment(s)]
            steps.extend(words["plan"] + clip(s, 200) for s in plans)
    for call in dangling_tool_calls(conv):
        args = ", ".join(f"{k}={v!r}" for k, v in list(call.input.items())[:3])
        steps.append(f"{words['call']}{call.name}({clip(args, 120)})")
    if not steps and asks:
        steps.append(words["answered"] + clip(conv[asks[-1]].text, 400))
    return steps
