"""Claude Code hooks: save the session to memory before it compacts, bring memory back after.

Claude Code runs a hook command with the event as JSON on stdin (``docs/adapters/claude-code.md``
has the ``settings.json``). :func:`handle_hook` does what memdir does for each event:

``PreCompact`` (and ``SessionEnd``)
    ingest the session's transcript (``transcript_path``): every message to
    ``sessions/<session_id>.log.jsonl``, the facts to the daily ledger, then ``MEMORY.md``.
    Idempotent: a transcript ingested before adds only what it gained since, so the hook may
    run at every compaction of a long session.
``SessionStart`` (sources ``startup``, ``resume``, ``clear``, ``compact``)
    answer with the date, memory guidance and ``MEMORY.md`` within a token budget (the
    context a :class:`~memdir.HarnessAgent` gets), as ``additionalContext``.

Other events are ignored (no output), so one hook entry can serve several events. No Claude
package is needed. From the Claude Agent SDK, a ``PreCompact`` hook callback can return
``await handle_hook(input_data, workspace=ws)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from memdir.errors import ConfigError
from memdir.store.workspace import Workspace

__all__ = [
    "INGEST_EVENTS",
    "START_SOURCES",
    "HookOutcome",
    "handle_hook",
    "session_start_context",
]

INGEST_EVENTS: Final = frozenset({"PreCompact", "SessionEnd"})
"""Events whose transcript is ingested."""
START_SOURCES: Final = frozenset({"startup", "resume", "clear", "compact"})
"""``SessionStart`` sources answered with the memory context."""
DEFAULT_CONTEXT_TOKENS: Final = 8_000


@dataclass(frozen=True, slots=True, kw_only=True)
class HookOutcome:
    """What a hook run did.

    Attributes:
        output: the JSON object for Claude Code (print it on stdout), or ``None`` for none.
        note: one line for the user (the command prints it on stderr).
        report: the ingest report of a ``PreCompact`` / ``SessionEnd`` run.
    """

    output: dict[str, Any] | None = None
    note: str = ""
    report: Any = field(default=None, repr=False)


def session_start_context(
    workspace: Workspace | str | os.PathLike[str] | None,
    *,
    max_tokens: int = DEFAULT_CONTEXT_TOKENS,
    memory_tools: bool = True,
) -> str:
    """The memory context for a new, resumed or compacted session.

    The date, how to use memory, and ``MEMORY.md`` within ``max_tokens`` (whole sections by
    priority, the rest named with their line ranges), labelled as recalled data.

    Args:
        workspace: the workspace (or its path).
        max_tokens: the budget of ``MEMORY.md`` in the context.
        memory_tools: Claude Code has memdir's MCP server (``memory_search`` and friends);
            without it the guidance does not mention them.
    """
    from memdir.agent import WorkspaceContextHook

    hook = WorkspaceContextHook(
        Workspace.coerce(workspace),
        max_context_tokens=max_tokens,
        memory_tools=memory_tools,
        agents_md=False,  # Claude Code reads its own CLAUDE.md / AGENTS.md
    )
    return hook.render()


def _field(payload: Mapping[str, Any], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value.strip():
        event = payload.get("hook_event_name")
        raise ConfigError(f"the {event} hook input has no {name!r}; is this a Claude Code hook?")
    return value


async def handle_hook(
    payload: Mapping[str, Any],
    *,
    workspace: Workspace | str | os.PathLike[str] | None = None,
    model: Any = None,
    max_tokens: int = DEFAULT_CONTEXT_TOKENS,
    memory_tools: bool = True,
    consolidate: bool = True,
) -> HookOutcome:
    """Handle one Claude Code hook event.

    Args:
        payload: the hook's input (the JSON Claude Code writes on stdin).
        workspace: the memdir workspace (or its path).
        model: the memdir ``ChatModel`` that extracts facts when ingesting (default: the
            offline extractive model).
        max_tokens: the ``MEMORY.md`` budget of the ``SessionStart`` context.
        memory_tools: see :func:`session_start_context`.
        consolidate: merge new facts into ``MEMORY.md`` after an ingest.

    Raises:
        ConfigError: the payload is not a hook input, or names no transcript.
    """
    if not isinstance(payload, Mapping):
        raise ConfigError("a hook input must be a JSON object (Claude Code writes one on stdin)")
    event = payload.get("hook_event_name")
    if event in INGEST_EVENTS:
        return await _ingest(payload, workspace, model, consolidate)
    if event == "SessionStart" and payload.get("source", "startup") in START_SOURCES:
        context = session_start_context(workspace, max_tokens=max_tokens, memory_tools=memory_tools)
        output = {
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}
        }
        return HookOutcome(output=output)
    if not isinstance(event, str):
        raise ConfigError("the hook input has no 'hook_event_name'; is this a Claude Code hook?")
    return HookOutcome()


async def _ingest(
    payload: Mapping[str, Any],
    workspace: Workspace | str | os.PathLike[str] | None,
    model: Any,
    consolidate: bool,
) -> HookOutcome:
    from memdir.ingest import ingest

    transcript = Path(_field(payload, "transcript_path")).expanduser()
    if not transcript.is_file():
        raise ConfigError(f"the transcript {transcript} does not exist")
    report = await ingest(
        [transcript], workspace=Workspace.coerce(workspace), model=model, consolidate=consolidate
    )
    if report.failures:
        raise ConfigError(f"{transcript.name}: {report.failures[0].error}")
    logged = sum(s.logged for s in report.sessions)
    facts = sum(len(s.bullets) for s in report.sessions)
    note = (
        f"memdir: {transcript.name} was ingested before; nothing new"
        if logged == 0 and facts == 0
        else f"memdir: {logged} new message(s) logged, {facts} fact(s) saved from {transcript.name}"
    )
    return HookOutcome(note=note, report=report)
