"""The extractive compaction summary: four sections pulled out of the messages, no model.

``## SESSION INTENT`` lists the user's requests, ``## SUMMARY`` the decisions, facts, answers
and errors, ``## ARTIFACTS`` the files, URLs, commands and ids (from text and tool-call
arguments), ``## NEXT STEPS`` what was still open. An earlier summary among the messages is
folded in: its lines are carried over and deduplicated, newest kept when space runs out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from memdir.ledger import normalize_bullet
from memdir.messages import SUMMARY_NAME, Msg, dangling_tool_calls
from memdir.models._extract import (
    artifacts_in_call,
    artifacts_in_text,
    clip,
    cue_kind,
    has_cjk,
    sentences,
)

__all__ = ["SECTIONS", "parse_summary", "summarize"]

SECTIONS = ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")
_CAPS = {"SESSION INTENT": 8, "SUMMARY": 30, "ARTIFACTS": 40, "NEXT STEPS": 5}
_HEADER = re.compile(r"^\s*#{1,3}\s*(SESSION INTENT|SUMMARY|ARTIFACTS|NEXT STEPS)\s*$", re.I)
_ERROR = re.compile(
    r"^\s*(?:error|exception|traceback|fatal)\b|\b(?:error|exception):|\bfailed\b|错误|失败|异常|报错",
    re.IGNORECASE,
)
_NEXT = re.compile(
    r"\b(?:next,? i(?:'ll| will)|next step|then i(?:'ll| will)|todo|to do:|still need to|"
    r"remaining:)\b|接下来|下一步|待办|还需要|之后再",
    re.IGNORECASE,
)


def parse_summary(text: str) -> dict[str, list[str]]:
    """The bullet lines of each section of a summary (``None`` placeholders left out)."""
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
        out[current].append(body if body.startswith("- ") else f"- {body.lstrip('-*• ')}")
    return out


def _dedupe(lines: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for line in lines:
        key = normalize_bullet(line)
        if key and key not in seen:
            seen.add(key)
            out.append(line)
    return out


_FILLER = re.compile(
    r"^(?:ok(?:ay)?|yes|yeah|yep|no|sure|thanks?(?: you)?|great|good|fine|cool|got it|"
    r"好的?|好吧|嗯+|行|可以|谢谢|收到|明白了?)[\s.!。！,，]*$",
    re.IGNORECASE,
)


def _request(msg: Msg) -> str:
    """The gist of a user message: its first three sentences that are not acknowledgements."""
    parts = [s for s in sentences(msg.text) if not _FILLER.match(s)][:3]
    joiner = "" if any(has_cjk(p) for p in parts) else " "
    return clip(joiner.join(parts), 240) if parts else ""


def summarize(msgs: Sequence[Msg], *, max_chars: int | None = None) -> str:
    """The four-section summary of ``msgs`` (earlier summaries among them folded in)."""
    old: dict[str, list[str]] = {name: [] for name in SECTIONS}
    conv: list[Msg] = []
    for msg in msgs:
        if msg.name == SUMMARY_NAME or (msg.role != "tool" and "## SESSION INTENT" in msg.text):
            for name, lines in parse_summary(msg.text).items():
                old[name].extend(lines)
        elif msg.role != "system":
            conv.append(msg)

    requests = [r for m in conv if m.role == "user" and (r := _request(m))]
    intents = _dedupe([*old["SESSION INTENT"], *(f"- {r}" for r in requests)])
    if len(intents) > _CAPS["SESSION INTENT"]:
        intents = intents[:2] + intents[-(_CAPS["SESSION INTENT"] - 2) :]

    sections = {
        "SESSION INTENT": intents,
        "SUMMARY": _dedupe([*old["SUMMARY"], *_summary_lines(conv)])[-_CAPS["SUMMARY"] :],
        "ARTIFACTS": _dedupe([*old["ARTIFACTS"], *_artifact_lines(conv)])[-_CAPS["ARTIFACTS"] :],
        "NEXT STEPS": _next_steps(conv, requests) or old["NEXT STEPS"][-_CAPS["NEXT STEPS"] :],
    }
    text = _render(sections)
    # Over budget: drop the oldest lines of the longest-lived sections first.
    while max_chars is not None and len(text) > max_chars:
        for name in ("SUMMARY", "ARTIFACTS", "SESSION INTENT", "NEXT STEPS"):
            lines = sections[name]
            if len(lines) > 1:
                del lines[1 if name == "SESSION INTENT" else 0]
                break
        else:
            break
        text = _render(sections)
    return text


def _render(sections: dict[str, list[str]]) -> str:
    blocks = []
    for name in SECTIONS:
        body = "\n".join(sections[name]) if sections[name] else "None"
        blocks.append(f"## {name}\n{body}")
    return "\n\n".join(blocks) + "\n"


def _summary_lines(conv: Sequence[Msg]) -> list[str]:
    lines: list[str] = []
    tool_counts: Counter[str] = Counter()
    for index, msg in enumerate(conv):
        if msg.role == "user":
            for sentence in sentences(msg.text):
                if cue_kind(sentence) and not sentence.endswith(("?", "？")):
                    lines.append(f"- {_who('user', sentence)}{clip(sentence, 200)}")
        elif msg.role == "assistant":
            tool_counts.update(c.name for c in msg.tool_uses)
            said = sentences(msg.text)
            decided = [s for s in said if cue_kind(s) == "decision"]
            lines.extend(f"- {_who('assistant', s)}{clip(s, 200)}" for s in decided)
            nxt = conv[index + 1] if index + 1 < len(conv) else None
            is_answer = not msg.tool_uses and (nxt is None or nxt.role == "user")
            if is_answer and said and said[0] not in decided:
                lines.append(f"- {_who('answer', said[0])}{clip(said[0], 200)}")
        elif msg.role == "tool":
            for result in msg.tool_results:
                first = next((ln.strip() for ln in result.text.splitlines() if ln.strip()), "")
                if result.is_error or (first and _ERROR.search(first)):
                    label = result.name or "tool"
                    lines.append(f"- Error from {label}: {clip(first or 'failed', 160)}")
    if tool_counts:
        used = ", ".join(f"{name} ×{n}" for name, n in tool_counts.most_common())
        lines.append(f"- Tools used: {used}")
    return lines


def _who(role: str, sentence: str) -> str:
    zh = has_cjk(sentence)
    if role == "user":
        return "用户：" if zh else "User: "
    if role == "answer":
        return "答复：" if zh else "Answered: "
    return "助手：" if zh else "Assistant: "


def _artifact_lines(conv: Sequence[Msg]) -> list[str]:
    found = []
    for msg in conv:
        if msg.role in ("user", "assistant"):
            found.extend(artifacts_in_text(msg.text))
        for call in msg.tool_uses:
            found.extend(artifacts_in_call(call))
    return [
        f"- {kind}: `{value}`" if kind == "command" else f"- {kind}: {value}"
        for kind, value in found
    ]


def _next_steps(conv: Sequence[Msg], requests: Sequence[str]) -> list[str]:
    steps: list[str] = []
    for call in dangling_tool_calls(conv):
        args = ", ".join(f"{k}={v!r}" for k, v in list(call.input.items())[:3])
        steps.append(f"- Finish the pending tool call {call.name}({clip(args, 120)})")
    last_assistant = next((m for m in reversed(conv) if m.role == "assistant"), None)
    if last_assistant is not None:
        for sentence in sentences(last_assistant.text):
            if _NEXT.search(sentence):
                steps.append(f"- {clip(sentence, 200)}")
    if requests:
        last = next(m for m in reversed(conv) if m.role == "user" and _request(m))
        answered = any(
            m.role == "assistant" and m.text.strip() and not m.tool_uses
            for m in conv[conv.index(last) + 1 :]
        )
        zh = has_cjk(requests[-1])
        if answered:
            lead = "跟进最后的请求：" if zh else "Follow up on the last request: "
        else:
            lead = "继续处理未完成的请求：" if zh else "Continue the open request: "
        steps.append(f"- {lead}{requests[-1]}")
    return _dedupe(steps)[: _CAPS["NEXT STEPS"]]
