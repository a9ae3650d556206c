"""``memdir sessions search|list|show``: the past sessions kept in ``sessions/``."""

from __future__ import annotations

import re

import click
from click.core import ParameterSource

from memdir.cli._common import EXIT_HELP, CliState, echo_json, info, pass_state

__all__ = ["sessions_cmd"]

JSON_HELP = "Print JSON on stdout instead of text."


def _iso(value: object) -> str | None:
    from datetime import datetime

    return value.isoformat() if isinstance(value, datetime) else None


@click.group("sessions", epilog=EXIT_HELP)
def sessions_cmd() -> None:
    """Search, list and read the past sessions (the messages compaction offloaded).

    Every message offloaded before a compaction stays in sessions/<id>.log.jsonl; these
    commands find it again, as the agent's session_search, session_list and
    session_history tools do.
    """


@sessions_cmd.command("search", epilog=EXIT_HELP)
@click.argument("query")
@click.option("--session", "session_id", metavar="ID", help="Search only this session.")
@click.option(
    "-k",
    "--max-results",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="How many hits to show (at most 50).",
)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_state
def search_cmd(
    state: CliState, query: str, session_id: str | None, max_results: int, as_json: bool
) -> None:
    """Search the past sessions' messages for QUERY (keywords, any language), best first.

    Each hit prints as sessions/<id>.log.jsonl#L<n> [role tool · time]: excerpt. No hits is
    not an error (exit 0).
    """
    from memdir.sessions import validate_session_id
    from memdir.tools._core import MAX_QUERY_CHARS, check_text
    from memdir.tools._sessions import MAX_HITS, find_in_sessions, format_session_hits

    text = check_text("query", query, max_chars=MAX_QUERY_CHARS, hint="give a few keywords")
    only = None if session_id is None else validate_session_id(session_id)
    ws = state.workspace(create=False)
    hits = find_in_sessions(ws, text, min(max_results, MAX_HITS), only)
    if as_json:
        echo_json(
            [
                {
                    "citation": hit.citation,
                    "session_id": hit.session_id,
                    "path": hit.path,
                    "line": hit.line,
                    "role": hit.role,
                    "tools": list(hit.tools),
                    "at": _iso(hit.at),
                    "text": hit.text,
                    "score": hit.score,
                }
                for hit in hits
            ]
        )
        return
    header, *lines = format_session_hits(text, hits, char_cap=10**9).split("\n")
    info(header)
    for line in lines:
        click.echo(line)


@sessions_cmd.command("list", epilog=EXIT_HELP)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_state
def list_cmd(state: CliState, as_json: bool) -> None:
    """List the logged sessions, the most recently active first.

    One line each: id, first and last message time (UTC), message count and the first
    user message.
    """
    from memdir.tools._sessions import session_infos

    infos = session_infos(state.workspace(create=False))
    if as_json:
        echo_json(
            [
                {
                    "session_id": i.session_id,
                    "path": i.path,
                    "first_at": _iso(i.first_at),
                    "last_at": _iso(i.last_at),
                    "messages": i.messages,
                    "lines": i.lines,
                    "summary": i.summary,
                }
                for i in infos
            ]
        )
        return
    if not infos:
        info("No sessions are logged yet.")
        return
    for i in infos:
        first = i.first_at.strftime("%Y-%m-%d %H:%M") if i.first_at else "?"
        last = i.last_at.strftime("%Y-%m-%d %H:%M") if i.last_at else "?"
        click.echo(f"{i.session_id}\t{first}\t{last}\t{i.messages}\t{i.summary}")


@sessions_cmd.command("show", epilog=EXIT_HELP)
@click.argument("session_id", metavar="ID")
@click.option(
    "--last",
    "last_n",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many messages to show (at most 200).",
)
@click.option(
    "--start", type=click.IntRange(min=1), help="First log line to show (default: the last)."
)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_state
def show_cmd(
    state: CliState, session_id: str, last_n: int, start: int | None, as_json: bool
) -> None:
    """Print the messages of session ID as logged, N| being each one's line in the log.

    ID may also be a search citation (sessions/<id>.log.jsonl#L12). With --json, the
    messages are printed whole, as JSON records of the log.
    """
    from memdir.errors import ToolInputError
    from memdir.sessions import SessionLog
    from memdir.tools._sessions import HISTORY_MAX, read_session_lines, session_ref

    sid, cited = session_ref(session_id)
    if cited is not None and cited.start is not None and cited.end is not None and start is None:
        start = cited.start  # the citation's lines, unless --last says how many
        source = click.get_current_context().get_parameter_source("last_n")
        if source is ParameterSource.DEFAULT:
            last_n = cited.end - cited.start + 1
    ws = state.workspace(create=False)
    count = min(last_n, HISTORY_MAX)
    if as_json:
        records = SessionLog(ws, sid).read().records
        if not records:
            raise ToolInputError(f"no messages are logged for session {sid!r}")
        chosen = [r for r in records if r.line >= start][:count] if start else records[-count:]
        echo_json(
            [
                {"line": r.line, "offloaded_at": _iso(r.offloaded_at), "msg": r.msg.to_dict()}
                for r in chosen
            ]
        )
        return
    header, *lines = read_session_lines(ws, sid, start=start, count=count, from_end=True).split(
        "\n"
    )
    info(header)
    for line in lines:
        if line.startswith("... "):
            # The tool's hint names its own call; on the command line it is an option.
            more = line.split("; call ", 1)[0]
            later = re.search(r"start=(\d+)\)$", line)
            info(f"{more}; memdir sessions show {sid} --start {later.group(1)}" if later else more)
        else:
            click.echo(line)
