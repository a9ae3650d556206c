"""The summary prompt, the transcript the summariser reads, and the summary message.

The summariser sees every message of the prefix as one labelled line: text in full, tool calls
*with* their arguments (long strings shortened in the middle, so paths, commands and ids stay),
tool results shortened to their head and tail, and error results kept much longer, because the
error is usually what the next attempt needs. An earlier summary is given as the running state to
fold into the new one.

The summary message is a ``user`` message named :data:`~memdir.messages.SUMMARY_NAME`, with a
stable id derived from its text. It is a user message because every provider accepts one
anywhere in the conversation (Anthropic has no system role inside ``messages`` and several
OpenAI-compatible servers reject a system message after the first), while an assistant message
would put words in the model's mouth. Its lead-in says it is context, not a new request, and
names the session log lines it replaced, so the exact messages can be read back.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memdir.messages import SUMMARY_NAME, Msg, TextBlock
from memdir.messages._render import render_message
from memdir.provenance._trust import escape_tags

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "LOG_POINTER_SUMMARY",
    "SUMMARY_META_KEY",
    "SUMMARY_SECTIONS",
    "SummaryLog",
    "build_summary_message",
    "render_messages",
    "render_prompt",
    "summarized_count",
    "summary_log",
    "summary_text",
]

SUMMARY_SECTIONS = ("## SESSION INTENT", "## SUMMARY", "## ARTIFACTS", "## NEXT STEPS")
"""The four sections every summary has, in this order."""

LOG_POINTER_SUMMARY = (
    "## SESSION INTENT\nSee the latest request.\n## SUMMARY\nNot summarised: the earlier "
    "messages did not fit the context window even as a summary; read them from the log lines "
    "named above when they matter.\n## ARTIFACTS\nNone recorded.\n## NEXT STEPS\nAnswer the "
    "latest request."
)
"""The summary of a last-resort compaction (overflow recovery), when no summary fits."""

SUMMARY_META_KEY = "memdir.compaction"
"""Metadata key of a summary message: ``{"log": {"path", "start_line", "end_line"} | None,
"summarized": <number of messages>}``."""

DEFAULT_SUMMARY_PROMPT = """\
You are compacting the history of a working session between a user and an AI assistant that \
uses tools. The messages below will be removed from the assistant's context and replaced by \
your summary, so whatever you leave out is gone for the assistant. Write the summary it needs \
to continue the work without asking again.

Rules:
- Keep every identifier exactly as written: file paths, URLs, function and class names, \
commands, ticket numbers, ids, version numbers, numbers and dates.
- Keep decisions and their reasons, constraints and preferences the user stated, and \
approaches that failed and why (so they are not tried again).
- Quote the user's latest request word for word, and say what is still pending.
- If a previous summary is given, fold it in: keep what still matters from it, update what \
changed. Produce one summary, not two.
- Do not invent anything. Write "None" under a heading that has nothing.

Answer with exactly these four Markdown sections and nothing else:

## SESSION INTENT
What the user wants overall, and their latest request quoted.

## SUMMARY
What happened, in order: findings, decisions, results, errors.

## ARTIFACTS
Files, resources and commands touched, with their paths and what changed.

## NEXT STEPS
What remains to do, starting with what the assistant was doing when this summary was made.

<messages>
{messages}
</messages>
"""


def render_messages(msgs: Sequence[Msg], *, previous_summary: str | None = None) -> str:
    """The transcript placed in the prompt's ``{messages}``, previous summary first.

    The quoted text cannot close the prompt's wrappers (``</messages>``…): their tags in it
    are escaped (:func:`memdir.provenance.escape_tags`).
    """
    chunks: list[str] = []
    if previous_summary and previous_summary.strip():
        quoted = escape_tags(previous_summary.strip())
        chunks.append(f"<previous_summary>\n{quoted}\n</previous_summary>")
    chunks.extend(escape_tags(render_message(m)) for m in msgs)
    return "\n\n".join(chunks)


def render_prompt(template: str, transcript: str) -> str:
    """The prompt with ``{messages}`` replaced (other braces left alone)."""
    return template.replace("{messages}", transcript)


# -- the summary message -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryLog:
    """Where the messages a summary replaced are kept: a session log and a line range."""

    path: str
    start_line: int
    end_line: int


_OPEN, _CLOSE = "<summary>\n", "\n</summary>"
_LEAD_LOGGED = (
    "[Context note, not a new request] Earlier messages of this conversation were compacted "
    "into the summary below. They are saved word for word in {path}, lines {start}-{end} "
    "(one JSON message per line); read those lines back when an exact detail is needed."
)
_LEAD_UNLOGGED = (
    "[Context note, not a new request] Earlier messages of this conversation were compacted "
    "into the summary below."
)


def build_summary_message(
    summary: str,
    *,
    log: SummaryLog | None,
    summarized: int,
    created_at: datetime,
) -> Msg:
    """The message that stands for a compacted prefix.

    Args:
        summary: the four-section summary text.
        log: the session log lines holding the replaced messages (``None`` if not saved).
        summarized: how many messages it replaced (including those earlier summaries replaced).
        created_at: its timestamp.
    """
    if log is not None:
        lead = _LEAD_LOGGED.format(path=log.path, start=log.start_line, end=log.end_line)
    else:
        lead = _LEAD_UNLOGGED
    text = f"{lead}\n\n{_OPEN}{summary.strip()}{_CLOSE}"
    meta: dict[str, Any] = {
        "log": (
            {"path": log.path, "start_line": log.start_line, "end_line": log.end_line}
            if log is not None
            else None
        ),
        "summarized": summarized,
    }
    stable = uuid.uuid5(uuid.NAMESPACE_URL, "memdir-summary:" + text).hex
    return Msg(
        role="user",
        content=(TextBlock(text=text),),
        name=SUMMARY_NAME,
        id=f"{SUMMARY_NAME}:{stable}",
        created_at=created_at,
        metadata={SUMMARY_META_KEY: meta},
    )


def summary_text(msg: Msg) -> str:
    """The summary inside a summary message (its whole text if it has no wrapper)."""
    text = msg.text
    start = text.find(_OPEN)
    end = text.rfind(_CLOSE)
    if start != -1 and end > start:
        return text[start + len(_OPEN) : end].strip()
    return text.strip()


_LEAD_SPAN = re.compile(r"saved word for word in (\S+?), lines (\d+)-(\d+)")


def summary_log(msg: Msg) -> SummaryLog | None:
    """The log lines a summary message names (from its metadata, else from its text)."""
    meta = msg.metadata.get(SUMMARY_META_KEY)
    if isinstance(meta, Mapping):
        log = meta.get("log")
        if isinstance(log, Mapping):
            try:
                return SummaryLog(
                    path=str(log["path"]),
                    start_line=int(log["start_line"]),
                    end_line=int(log["end_line"]),
                )
            except (KeyError, TypeError, ValueError):
                pass
    match = _LEAD_SPAN.search(msg.text)
    if match:
        return SummaryLog(
            path=match.group(1), start_line=int(match.group(2)), end_line=int(match.group(3))
        )
    return None


def summarized_count(msg: Msg) -> int:
    """How many messages an earlier summary message replaced (0 if unknown)."""
    meta = msg.metadata.get(SUMMARY_META_KEY)
    if isinstance(meta, Mapping):
        value = meta.get("summarized")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0
