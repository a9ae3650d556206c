"""An offline, deterministic :class:`~memdir.models.ChatModel` that extracts instead of writing.

:class:`ExtractiveModel` serves memdir's own requests without any language model, so that
compaction, memory flush and consolidation work with no network and no API key, and so that
a failed model call can fall back to something useful. It reads the task marker on the last
user message (``metadata["memdir.task"]``, see :mod:`memdir.models`):

``summarize``
    ``metadata["memdir.messages"]`` holds the messages to summarise; the answer has the four
    sections ``## SESSION INTENT``, ``## SUMMARY``, ``## ARTIFACTS``, ``## NEXT STEPS``.
``flush``
    ``metadata["memdir.messages"]`` holds new messages, ``metadata["memdir.known"]`` the text
    already remembered; the answer is ``- `` bullets of new durable facts, or ``NO_REPLY``.
``consolidate``
    ``metadata["memdir.current"]`` (MEMORY.md), ``metadata["memdir.entries"]`` (new bullets,
    oldest first), ``metadata["memdir.max_chars"]``; the answer is the complete new MEMORY.md.
    With ``metadata["memdir.sources"]`` (source ids) each bullet ends with ``[src: …]``.

Without a marker it answers with the sentences of the conversation that best match the last
user message. It never calls tools.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from memdir.errors import ModelError
from memdir.messages import MessageFormatError, Msg
from memdir.models._base import (
    CURRENT_KEY,
    ENTRIES_KEY,
    KNOWN_KEY,
    MAX_CHARS_KEY,
    MESSAGES_KEY,
    SOURCES_KEY,
    TASK_KEY,
    ModelResponse,
    ToolSpec,
)
from memdir.models.extractive._extract import clip, sentences, tokens
from memdir.models.extractive._extract_memory import (
    CANNED_PREFIX,
    NO_REPLY,
    consolidate,
    extract_facts,
)
from memdir.models.extractive._extract_summary import summarize
from memdir.models.extractive._source_ids import add_marker
from memdir.models.extractive._summary_notes import language

__all__ = ["NO_REPLY", "ExtractiveModel"]

_TASKS = ("summarize", "flush", "consolidate")


class ExtractiveModel:
    """Heuristic extraction behind the :class:`~memdir.models.ChatModel` protocol.

    Args:
        context_window: what :attr:`context_window` reports (default ``None``: no limit of
            its own).

    Its limits: it copies, scores and classifies sentences, it does not understand them.
    A flush keeps the sentences that carry enough signals of a durable fact (a first-person
    statement, a name, a number or date, a relation, a plan, a preference or decision…),
    prefixed with the speaker and with relative dates made absolute; pronouns are not
    resolved, summaries are lists rather than prose, and paraphrases are not recognised as
    duplicates.
    """

    def __init__(self, *, context_window: int | None = None) -> None:
        self.name = "extractive"
        self.context_window = context_window

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        """Answer the request (see the module docstring for the tasks it serves).

        Raises:
            ModelError: the request's task metadata is malformed.
        """
        # The work below is CPU-only; yielding before and after it gives a pending
        # cancellation (Ctrl-C, a timeout) a chance to land between calls.
        await asyncio.sleep(0)
        last = next((m for m in reversed(messages) if m.role == "user"), None)
        meta: dict[str, Any] = dict(last.metadata) if last is not None else {}
        task = meta.get(TASK_KEY)
        if task == "summarize":
            inputs = _messages(meta, messages, last)
            text = summarize(inputs, max_chars=_char_budget(max_output_tokens, inputs))
        elif task == "flush":
            known = meta.get(KNOWN_KEY) or ""
            if not isinstance(known, str):
                raise ModelError(f"extractive: metadata[{KNOWN_KEY!r}] must be a string")
            text = extract_facts(_messages(meta, messages, last), known)
        elif task == "consolidate":
            text = _consolidate(meta)
        elif task is not None and task not in _TASKS:
            raise ModelError(f"extractive: unknown task {task!r}; expected one of {_TASKS}")
        else:
            text = _reply(messages)
        await asyncio.sleep(0)
        return ModelResponse(message=Msg.assistant(text), stop_reason="stop")


def _messages(meta: dict[str, Any], messages: Sequence[Msg], last: Msg | None) -> list[Msg]:
    raw = meta.get(MESSAGES_KEY)
    if raw is None:
        # No structured copy: use the conversation before the instruction itself.
        return [m for m in messages if m is not last and m.role != "system"]
    if not isinstance(raw, list):
        raise ModelError(f"extractive: metadata[{MESSAGES_KEY!r}] must be a list of messages")
    try:
        return [Msg.from_dict(d) for d in raw]
    except MessageFormatError as exc:
        raise ModelError(f"extractive: bad metadata[{MESSAGES_KEY!r}]: {exc}") from exc


def _char_budget(max_output_tokens: int | None, msgs: Sequence[Msg]) -> int | None:
    if max_output_tokens is None:
        return None
    # Roughly one token per Chinese character, three to four characters per English token.
    return max_output_tokens * (1 if language(msgs) == "zh" else 3)


def _consolidate(meta: dict[str, Any]) -> str:
    current = meta.get(CURRENT_KEY) or ""
    entries = meta.get(ENTRIES_KEY) or []
    max_chars = meta.get(MAX_CHARS_KEY)
    if not isinstance(current, str):
        raise ModelError(f"extractive: metadata[{CURRENT_KEY!r}] must be a string")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ModelError(f"extractive: metadata[{ENTRIES_KEY!r}] must be a list of strings")
    if max_chars is not None and (not isinstance(max_chars, int) or max_chars <= 0):
        raise ModelError(f"extractive: metadata[{MAX_CHARS_KEY!r}] must be a positive integer")
    sources = meta.get(SOURCES_KEY)
    if isinstance(sources, dict):  # the same ids an LLM is shown: cite them back
        marked = sources.get("current")
        ids = sources.get("entries")
        if isinstance(marked, str):
            current = marked
        if isinstance(ids, list) and len(ids) == len(entries):
            entries = [
                add_marker(e, [i]) if isinstance(i, str) else e
                for e, i in zip(entries, ids, strict=True)
            ]
    return consolidate(current, entries, max_chars)


def _reply(messages: Sequence[Msg]) -> str:
    last = next((m for m in reversed(messages) if m.role == "user"), None)
    if last is None or not last.text.strip():
        return f"{CANNED_PREFIX} nothing to answer)"
    wanted = set(tokens(last.text))
    scored: list[tuple[float, int, str]] = []
    for position, msg in enumerate(messages):
        if msg is last or msg.role == "system":
            continue
        texts = [msg.text] + [r.text for r in msg.tool_results]
        for sentence in (s for t in texts for s in sentences(t)):
            overlap = len(wanted & set(tokens(sentence)))
            if overlap:
                scored.append((overlap / (len(wanted) or 1), position, sentence))
    if not scored:
        return f"{CANNED_PREFIX} no context matches {clip(last.text, 80)!r})"
    best = sorted(scored, key=lambda s: (-s[0], -s[1]))[:3]
    return "\n".join(clip(s, 300) for _, _, s in sorted(best, key=lambda s: s[1]))
