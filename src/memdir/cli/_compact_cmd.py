"""``memdir compact``: compact a saved conversation, offloading the originals first."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memdir.cli._common import (
    EXIT_HELP,
    CliState,
    base_url_option,
    context_window_option,
    echo_json,
    info,
    pass_state,
)
from memdir.errors import MemdirError

if TYPE_CHECKING:
    from memdir.compaction import CompactionResult
    from memdir.messages import Msg

__all__ = ["compact_cmd"]


@click.command("compact", epilog=EXIT_HELP)
@click.argument("session_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--model",
    "model_spec",
    envvar="MEMDIR_MODEL",
    default="extractive",
    show_default=True,
    help='Summary model: "extractive" (offline, no LLM) or e.g. "openai:gpt-4o-mini" '
    "[env MEMDIR_MODEL].",
)
@base_url_option
@context_window_option
@click.option(
    "--trigger-messages",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Compact at this many messages (0: off).",
)
@click.option(
    "--trigger-tokens",
    type=click.IntRange(min=0),
    default=80_000,
    show_default=True,
    help="Compact at this many estimated tokens (0: off).",
)
@click.option(
    "--keep-messages",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Newest messages kept verbatim.",
)
@click.option("--force", is_flag=True, help="Compact even below the triggers.")
@click.option(
    "--session-id",
    metavar="ID",
    help="Session log to offload to [default: the log's own id for the workspace's "
    "sessions/<id>.log.jsonl, else compact-<file name>].",
)
@click.option(
    "--dry-run", is_flag=True, help="Show where the cut would be; call no model, write nothing."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the compacted messages (memdir JSON) to this file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@pass_state
def compact_cmd(
    state: CliState,
    session_file: Path,
    model_spec: str,
    base_url: str | None,
    context_window: int | None,
    trigger_messages: int,
    trigger_tokens: int,
    keep_messages: int,
    force: bool,
    session_id: str | None,
    dry_run: bool,
    output: Path | None,
    as_json: bool,
) -> None:
    """Compact the conversation in SESSION_FILE.

    SESSION_FILE is a memdir session log (sessions/<id>.log.jsonl) or a JSON list of messages
    in OpenAI or Anthropic format; a relative path not found in the current directory is
    looked up in the workspace. The summarised messages are appended to the workspace's
    session log first (messages already there are not written twice), then replaced by one
    summary that names the log lines holding them. Prints the summary (or, with --json, the
    counts, the log span and the compacted messages). Message counts include system messages
    (the triggers do not count them). Nothing to summarise is not an error; exit code 1 if the
    summary failed, and the conversation is then left as it was.
    """
    from memdir.cli._ingest_cmd import build_model
    from memdir.compaction import CompactionConfig, CompactionEvent, ConversationCompactor
    from memdir.ingest.transcripts import load_transcript, session_id_for
    from memdir.messages import msgs_to_json, stable_ids
    from memdir.store.workspace import SESSIONS_DIR, atomic_write, resolve_workspace_root

    if trigger_messages and keep_messages >= trigger_messages:
        raise click.UsageError("--keep-messages must be smaller than --trigger-messages")
    session_file = _locate(session_file, resolve_workspace_root(state.workspace_arg))
    transcript = load_transcript(session_file)
    ws = state.workspace()
    sid = session_id
    if sid is None:
        own_log = session_file.resolve().parent == (ws.root / SESSIONS_DIR).resolve()
        # Any other file gets its own log: "chat.json" must not write into `memdir chat`'s.
        sid = (
            transcript.session_id
            if own_log and transcript.format == "memdir"
            else session_id_for(f"compact-{transcript.session_id}")
        )
    msgs = list(transcript.messages)
    if transcript.format != "memdir":
        msgs = stable_ids(msgs, sid)
    config = CompactionConfig(
        trigger_messages=trigger_messages,
        trigger_tokens=trigger_tokens,
        keep_messages=keep_messages,
    )
    model = build_model(model_spec, base_url, context_window=context_window)
    comp = ConversationCompactor(model, ws, config)
    plan = comp.plan(msgs, force=force)
    size = _size(msgs)

    if dry_run:
        if as_json:
            echo_json(
                {
                    "compacted": False,
                    "dry_run": True,
                    "reason": plan.reason,
                    "cut_index": plan.cut_index,
                    "before": {"messages": plan.messages, "tokens": plan.tokens},
                    "after": {"messages": plan.kept if plan.reason else plan.messages},
                    "summarized": plan.summarized if plan.reason else 0,
                    "log": None,
                    "messages": [],
                }
            )
            return
        if plan.reason is None:
            info(f"nothing to compact: {size}, ~{plan.tokens:,} tokens")
        elif plan.cut_index is None:
            info(_nothing_before_tail(plan.reason, size, keep_messages))
        else:
            info(
                f"would compact ({plan.reason}): summarise {plan.summarized} of {plan.messages} "
                f"messages, keeping {plan.kept} (cut at message {plan.cut_index})"
            )
        return

    events: list[CompactionEvent] = []
    comp.add_listener(events.append)
    _quiet_library_warnings()
    result = asyncio.run(comp.compact_if_needed(msgs, session_id=sid, force=force))
    failed = next((e for e in events if e.kind == "compaction.failed"), None)
    # Too short to summarise: nothing to do (as --dry-run says), not a failure.
    too_short = (
        plan.reason
        if result is None
        and failed is not None
        and plan.cut_index is None
        and failed.reason.startswith("nothing")
        else None
    )
    if too_short is not None:
        failed = None
        if not as_json:
            info(_nothing_before_tail(too_short, size, keep_messages))
    after = result.messages if result is not None else msgs
    if output is not None:
        atomic_write(output, (msgs_to_json(after) + "\n").encode("utf-8"))
    if as_json:
        tokens_before = comp.measure(msgs)[1]
        tokens_after = result.tokens_after if result else tokens_before
        payload: dict[str, Any] = {
            "compacted": result is not None,
            "session_id": sid,
            "stages": list(result.stages) if result else [],
            "before": {"messages": len(msgs), "tokens": tokens_before},
            "after": {"messages": len(after), "tokens": tokens_after},
            "log": _log(result),
            "messages": [m.to_dict() for m in after],
        }
        if failed is not None:
            payload["error"] = failed.reason
        echo_json(payload)
    elif result is not None:
        span = result.log_span
        where = (
            f"; originals in {span.path} lines {span.start_line}-{span.end_line}" if span else ""
        )
        info(
            f"compacted {result.messages_before} -> {result.messages_after} messages, "
            f"~{result.tokens_before:,} -> ~{result.tokens_after:,} tokens"
            f" ({'+'.join(result.stages)}){where}"
        )
        if result.summary:
            click.echo(result.summary)
    elif failed is None and too_short is None:
        info(f"nothing to compact: {size}, ~{plan.tokens:,} tokens (use --force)")
    if failed is not None:
        raise MemdirError(f"compaction failed: {failed.reason}")


def _locate(path: Path, root: Path) -> Path:
    """``path`` as typed, or the same relative path in the workspace ``root``.

    The workspace is tried only for a relative path missing from the current directory, and
    only if it stays inside the workspace: ``../x`` means the cwd's parent, nothing else.
    """
    if path.is_absolute() or path.exists():
        return path
    candidate = root / path
    try:
        inside = candidate.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        inside = False
    if inside and candidate.exists():
        return candidate
    if inside and root.is_dir():
        raise MemdirError(
            f"transcript not found: {path} (neither in the current directory nor in the "
            f"workspace {root})"
        )
    return path


def _quiet_library_warnings() -> None:
    """Failures are reported once, by the command; the library's warnings show with -v."""
    logger = logging.getLogger("memdir.compaction")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


def _size(msgs: list[Msg]) -> str:
    """``"15 messages, 1 of them system"``: every count shown includes system messages."""
    system = sum(1 for m in msgs if m.role == "system")
    return f"{len(msgs)} messages" + (f", {system} of them system" if system else "")


def _nothing_before_tail(reason: str, size: str, keep: int) -> str:
    return f"nothing to compact ({reason}): {size}, nothing before the tail of {keep} to summarise"


def _log(result: CompactionResult | None) -> dict[str, Any] | None:
    span = None if result is None else result.log_span
    if span is None:
        return None
    return {"path": span.path, "start_line": span.start_line, "end_line": span.end_line}
