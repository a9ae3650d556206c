"""``memdir hook``: commands that agent tools run as hooks, reading the event on stdin."""

from __future__ import annotations

import asyncio
import json
import sys

import click

from memdir.cli._common import EXIT_HELP, CliState, echo_json, info, pass_state
from memdir.cli._ingest_cmd import build_model, model_option
from memdir.errors import ConfigError


@click.group("hook", epilog=EXIT_HELP)
def hook_cmd() -> None:
    """Hooks for agent tools (the event comes as JSON on stdin)."""


@hook_cmd.command("claude-code", epilog=EXIT_HELP)
@model_option("extractive", help="Model that extracts facts when a transcript is ingested.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=0),
    default=8_000,
    show_default=True,
    help="Budget of MEMORY.md in the SessionStart context.",
)
@click.option(
    "--no-tools",
    is_flag=True,
    help="Claude Code has no memdir MCP server: leave memory_search out of the guidance.",
)
@click.option("--no-consolidate", is_flag=True, help="Do not merge new facts into MEMORY.md.")
@pass_state
def claude_code_cmd(
    state: CliState, model_spec: str, max_tokens: int, no_tools: bool, no_consolidate: bool
) -> None:
    """Claude Code hook: PreCompact/SessionEnd ingest the transcript, SessionStart prints memory.

    Put it in settings.json for PreCompact, SessionEnd and SessionStart (see
    docs/adapters/claude-code.md). Ingesting is idempotent: a transcript ingested before adds
    only its new messages. Other events print nothing. Exits 1 with one line on stderr when the
    input is not a hook event or the transcript cannot be read (never 2, which would block
    Claude Code's compaction).
    """
    from memdir.adapters.claude_code import handle_hook

    raw = sys.stdin.read()
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as exc:
        message = f"the hook input on stdin is not JSON ({exc.msg}, line {exc.lineno})"
        raise ConfigError(message) from None
    model = build_model(model_spec, None) if payload_needs_model(payload) else None
    outcome = asyncio.run(
        handle_hook(
            payload,
            workspace=state.workspace(),
            model=model,
            max_tokens=max_tokens,
            memory_tools=not no_tools,
            consolidate=not no_consolidate,
        )
    )
    if outcome.output is not None:
        echo_json(outcome.output)
    if outcome.note:
        info(outcome.note)


def payload_needs_model(payload: object) -> bool:
    """Whether the event ingests a transcript (only then is a model built)."""
    from memdir.adapters.claude_code import INGEST_EVENTS

    return isinstance(payload, dict) and payload.get("hook_event_name") in INGEST_EVENTS
