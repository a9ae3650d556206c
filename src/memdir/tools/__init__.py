"""The memory tools an agent calls: ``memory_search``, ``memory_get``, ``memory_add``.

They are plain functions returning text for the model. The agent, the MCP server and the
adapters all wrap these same functions and :data:`TOOL_SCHEMAS`, so what a model sees cannot
drift between them. Tools never raise into the agent loop: bad arguments, a missing file or a
broken index come back as ``Error: ...`` text that says what to do instead.

Example::

    from memdir.tools import memory_search, memory_get
    print(memory_search("数据库迁移", workspace=ws))
    print(memory_get("memory/2026-10-14.md#L1-L4", workspace=ws))
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from memdir._opencache import set_open_index_limit
from memdir.errors import ToolInputError
from memdir.tools._core import (
    MAX_ADD_CHARS,
    MAX_PATH_CHARS,
    MAX_QUERY_CHARS,
    AddResult,
    MemoryExcerpt,
    add_memory,
    check_int,
    check_text,
    close_shared_indexes,
    masked_note,
    parse_citation,
    read_memory,
    shared_index,
    update_marks,
)
from memdir.tools._guard import WorkspaceArg, clip, lines_within, one_line, tool, workspace_of
from memdir.tools._sessions import (
    SESSION_TOOL_FUNCTIONS,
    SESSION_TOOL_SCHEMAS,
    find_in_sessions,
    format_session_hits,
    session_history,
    session_hit_line,
    session_list,
    session_search,
)

if TYPE_CHECKING:
    from memdir.index import SearchHit
    from memdir.sessions import SessionHit
    from memdir.store.workspace import Workspace

__all__ = [
    "ALL_TOOL_FUNCTIONS",
    "FORGET_TOOL_FUNCTIONS",
    "GET_CHAR_CAP",
    "GET_MAX_LINES",
    "MAX_RESULTS_CAP",
    "PROVENANCE_TOOL_FUNCTIONS",
    "SEARCH_CHAR_CAP",
    "SESSION_TOOL_FUNCTIONS",
    "TOOL_DESCRIPTIONS",
    "TOOL_FUNCTIONS",
    "TOOL_SCHEMAS",
    "call_tool",
    "close_shared_indexes",
    "format_added",
    "format_excerpt",
    "format_hits",
    "format_mixed",
    "format_search",
    "format_session_hits",
    "get_arguments",
    "hit_line",
    "memory_add",
    "memory_forget",
    "memory_get",
    "memory_search",
    "memory_why",
    "search_arguments",
    "session_history",
    "session_list",
    "session_search",
    "set_open_index_limit",
]

logger = logging.getLogger("memdir.tools")

MAX_RESULTS_CAP: Final = 50
"""``memory_search`` returns at most this many hits; larger ``max_results`` are lowered."""
SEARCH_CHAR_CAP: Final = 6_000
"""Characters of ``memory_search`` output, header included; lower-ranked hits are dropped."""
HIT_CHAR_CAP: Final = 400
"""Characters of one hit's text; longer lines end in an ellipsis."""
GET_MAX_LINES: Final = 200
"""Lines one ``memory_get`` call returns at most."""
GET_CHAR_CAP: Final = 12_000
"""Characters of ``memory_get`` output; the continuation hint says where to go on."""
GET_LINE_CHAR_CAP: Final = 2_000
"""Characters of one line in ``memory_get`` output; longer lines are clipped."""
DEFAULT_NUM_LINES: Final = 50


def hit_line(hit: SearchHit) -> str:
    """One memory hit as ``path#Lstart-Lend [section]: text``; a line a newer hit updates
    says ``[superseded by path#L…]``, the newer one ``[updates path#L…]``."""
    context = [label for label in ("archived" if hit.archived else None, hit.heading) if label]
    where = f" [{clip(one_line(' · '.join(context)), 60)}]" if context else ""
    where += update_marks(hit.superseded_by, hit.supersedes)
    return (
        f"{hit.path}#L{hit.line_number}-L{hit.line_end}{where}: "
        f"{clip(one_line(hit.content), HIT_CHAR_CAP)}"
    )


def format_hits(query: str, hits: Sequence[SearchHit], *, char_cap: int = SEARCH_CHAR_CAP) -> str:
    """Render search hits as citable lines, best first, within ``char_cap`` characters."""
    shown_query = clip(one_line(query), 80)
    if not hits:
        return (
            f'No memories matched "{shown_query}". Try fewer or different keywords, a synonym, '
            "or the same words in another language the notes may use."
        )
    noun = "result" if len(hits) == 1 else "results"
    return lines_within(
        f'{len(hits)} {noun} for "{shown_query}" (best first; cite as path#Lstart-Lend):',
        [hit_line(hit) for hit in hits],
        char_cap,
        "use a narrower query or read a file with memory_get",
        ("result", "results"),
    )


def format_mixed(
    query: str,
    hits: Sequence[SearchHit],
    session_hits: Sequence[SessionHit],
    limit: int,
    *,
    char_cap: int = SEARCH_CHAR_CAP,
) -> str:
    """Memory hits and past-session hits merged by score (best first, ``limit`` in all)."""
    ranked = sorted(
        [(hit.score, 0, i, hit_line(hit)) for i, hit in enumerate(hits)]
        + [(hit.score, 1, i, session_hit_line(hit, query)) for i, hit in enumerate(session_hits)],
        key=lambda item: (-item[0], item[1], item[2]),
    )[:limit]
    shown_query = clip(one_line(query), 80)
    if not ranked:
        return (
            f'Nothing in memory or past sessions matched "{shown_query}". Try fewer or '
            "different keywords, a synonym, or the words in another language."
        )
    noun = "result" if len(ranked) == 1 else "results"
    return lines_within(
        f'{len(ranked)} {noun} for "{shown_query}" in memory and past sessions (best first; '
        "cite as path#Lstart-Lend or sessions/<id>.log.jsonl#L<n>):",
        [line for *_, line in ranked],
        char_cap,
        "use a narrower query or read a file with memory_get",
        ("result", "results"),
    )


_SOURCES = ("memory", "sessions")


def search_arguments(
    query: object, max_results: object, sources: object
) -> tuple[str, int, tuple[str, ...]]:
    """``memory_search``'s arguments checked: the query, the number of hits (at most
    :data:`MAX_RESULTS_CAP`) and the sources, in their canonical order.

    Raises:
        ToolInputError: an argument the tool cannot use.
    """
    text = check_text(
        "query", query, max_chars=MAX_QUERY_CHARS, hint="give a few keywords to search for"
    )
    limit = min(check_int("max_results", max_results, minimum=1), MAX_RESULTS_CAP)
    return text, limit, _check_sources(sources)


def format_search(
    query: str,
    sources: Sequence[str],
    hits: Sequence[SearchHit],
    session_hits: Sequence[SessionHit],
    limit: int,
) -> str:
    """``memory_search``'s text for the hits found in ``sources``."""
    if "sessions" not in sources:
        return format_hits(query, hits)
    if "memory" not in sources:
        return format_session_hits(query, session_hits)
    return format_mixed(query, hits, session_hits, limit)


def _check_sources(sources: object) -> tuple[str, ...]:
    given = (sources,) if isinstance(sources, str) else sources
    if not isinstance(given, list | tuple) or not given:
        raise ToolInputError('sources must be a list of "memory" and "sessions"')
    unknown = [str(s) for s in given if s not in _SOURCES]
    if unknown:
        raise ToolInputError(
            f'unknown source(s) {", ".join(unknown)}: sources are "memory" and "sessions"'
        )
    return tuple(s for s in _SOURCES if s in given)


def get_arguments(path: object, start_line: object, num_lines: object) -> tuple[str, int, int]:
    """``memory_get``'s arguments checked and resolved: the file, the first line and how many
    lines to read (at most :data:`GET_MAX_LINES`). A range in ``path`` (a citation) wins over
    the defaults; explicit other values still apply.

    Raises:
        ToolInputError: an argument the tool cannot use.
    """
    raw = check_text("path", path, max_chars=MAX_PATH_CHARS, hint="give a path from memory_search")
    start = check_int("start_line", start_line, minimum=1)
    count = check_int("num_lines", num_lines, minimum=1)
    cited = parse_citation(raw)
    if cited.start is not None and cited.end is not None:
        if start == 1:
            start = cited.start
        if count == DEFAULT_NUM_LINES:
            count = cited.end - cited.start + 1
    return cited.path, start, min(count, GET_MAX_LINES)


def format_excerpt(excerpt: MemoryExcerpt, *, char_cap: int = GET_CHAR_CAP) -> str:
    """Render lines as ``N|text`` under a header, with a hint to continue when more remain."""
    body: list[str] = []
    used = 0
    last = excerpt.start_line - 1
    for number, text in enumerate(excerpt.lines, start=excerpt.start_line):
        if len(text) > GET_LINE_CHAR_CAP:
            text = text[:GET_LINE_CHAR_CAP] + f"… [line clipped; {len(text)} characters]"
        line = f"{number}|{text}"
        if body and used + len(line) + 1 > char_cap:
            break
        body.append(line)
        used += len(line) + 1
        last = number
    moved = f"; moved from {excerpt.requested}" if excerpt.requested != excerpt.path else ""
    header = f"{excerpt.path} (lines {excerpt.start_line}-{last} of {excerpt.total_lines}{moved}):"
    out = [header, *body]
    remaining = excerpt.total_lines - last
    if remaining > 0:
        noun = "line" if remaining == 1 else "lines"
        out.append(
            f'... {remaining} more {noun}; call memory_get(path="{excerpt.path}", '
            f"start_line={last + 1})"
        )
    return "\n".join(out)


@tool
def memory_search(
    query: str,
    max_results: int = 10,
    *,
    sources: Sequence[str] = ("memory",),
    workspace: WorkspaceArg = None,
    namespace: str | None = None,
) -> str:
    """Search long-term memory: the curated MEMORY.md and the daily notes under memory/.

    Use it before answering anything about earlier work, decisions, people, dates or
    preferences. Give a few keywords (English, Chinese or mixed). Each hit is one line,
    ``path#Lstart-Lend [section]: text``, best first; cite that location when you use the
    fact, and call memory_get with it to read the lines around a hit. A hit marked
    ``[superseded by path#L…]`` states an older value than the line it names, which is
    marked ``[updates path#L…]``: the newer one is current.

    Args:
        query: keywords to look for, e.g. "database migration decision" or "数据库迁移".
        max_results: how many hits to return, 1 to 50 (default 10).
        sources: what to search: ``("memory",)`` (default), ``("sessions",)`` (the
            past-session logs, as :func:`session_search`) or both, merged by score; not
            for the model, which has ``session_search``.
        workspace: the workspace (or its path) to search (default: the configured one); not
            for the model.
        namespace: the caller's namespace in that workspace (a user's, see
            :func:`memdir.namespace_for`; default: the workspace's own); not for the model.

    Returns:
        The hits as text, or a "no results" note suggesting a rephrasing, or ``Error: ...``.
    """
    ws = workspace_of(workspace, namespace)
    text, limit, chosen = search_arguments(query, max_results, sources)
    hits: list[SearchHit] = []
    if "memory" in chosen:
        index = shared_index(ws)
        index.refresh()
        hits = index.search(text, limit=limit)
    found = find_in_sessions(ws, text, limit) if "sessions" in chosen else []
    return format_search(text, chosen, hits, found, limit)


@tool
def memory_get(
    path: str,
    start_line: int = 1,
    num_lines: int = DEFAULT_NUM_LINES,
    *,
    sources: bool = False,
    workspace: WorkspaceArg = None,
    namespace: str | None = None,
) -> str:
    """Read lines of a memory file (MEMORY.md or a file under memory/), numbered ``N|text``.

    Pass a path from memory_search, e.g. "memory/2026-10-14.md"; a citation such as
    "memory/2026-10-14.md#L3-L5" or "MEMORY.md:10-20" reads exactly that range. At most 200
    lines come back per call; when more remain, the last line says how to continue.

    Args:
        path: a memory file path, optionally with a line range (``#L3-L5`` or ``:3-5``).
        start_line: first line to read, counting from 1 (default 1, or the range's start).
        num_lines: how many lines to read, 1 to 200 (default 50, or the range's length).
        sources: after the lines, where each bullet among them came from
            (``L12 <- memory/2026-10-14.md#L3``; see :func:`memory_why`); not for the model.
        workspace: the workspace (or its path) to read from (default: the configured one);
            not for the model.
        namespace: the caller's namespace in that workspace (a user's, see
            :func:`memdir.namespace_for`; default: the workspace's own); not for the model.

    Returns:
        A header line and the numbered lines, or ``Error: ...``.
    """
    ws = workspace_of(workspace, namespace)
    rel, start, count = get_arguments(path, start_line, num_lines)
    excerpt = read_memory(ws, rel, start, count)
    text = format_excerpt(excerpt)
    if sources:
        text += format_sources(ws, excerpt)
    return text


def format_sources(ws: Workspace, excerpt: MemoryExcerpt) -> str:
    """The ``Sources:`` lines of a read: each bullet's line and where it came from."""
    from memdir.memory._entries import parse_bullets
    from memdir.provenance._why import SourceFinder

    finder = SourceFinder(ws)
    lines = []
    offset = excerpt.start_line
    for bullet in parse_bullets("\n".join(excerpt.lines)):
        line = offset + bullet.first_line
        found = finder.sources(excerpt.path, line, line)
        if found:
            lines.append(f"L{line} <- {'; '.join(found)}")
    return "\n\nSources:\n" + "\n".join(lines) if lines else ""


@tool
def memory_add(text: str, *, workspace: WorkspaceArg = None, namespace: str | None = None) -> str:
    """Save a durable fact to today's memory notes (memory/YYYY-MM-DD.md).

    Use it for facts worth remembering in later conversations: decisions, preferences,
    names, dates, outcomes. Write each fact as one self-contained sentence; several lines
    become several bullets. Do not save secrets or passing chatter.

    Args:
        text: the fact(s) to remember, one per line.
        workspace: the workspace (or its path) to write to (default: the configured one);
            not for the model.
        namespace: the caller's namespace in that workspace (a user's, see
            :func:`memdir.namespace_for`; default: the workspace's own); not for the model.

    Returns:
        Where the fact was saved (``path#Lstart-Lend``), or ``Error: ...``.
    """
    ws = workspace_of(workspace, namespace)
    body = check_text("text", text, max_chars=MAX_ADD_CHARS, hint="give the fact to remember")
    return format_added(add_memory(ws, body, origin="model"))


@tool
def memory_why(path: str, *, workspace: WorkspaceArg = None, namespace: str | None = None) -> str:
    """Show where a remembered fact came from: the notes and conversation lines behind it.

    Pass the citation of one bullet, e.g. "MEMORY.md#L12" or "memory/2026-10-14.md#L3".
    Each line of the answer is one step down the chain (citation, text, origin and how it
    came to be): the daily notes a MEMORY.md bullet was made from, then the messages of
    the conversation a note was taken from, or who added it by hand.

    Args:
        path: a memory file and line, ``MEMORY.md#L12`` or ``memory/2026-10-14.md:3``.
        workspace: the workspace (or its path) to read (default: the configured one); not
            for the model.
        namespace: the caller's namespace in that workspace (default: the workspace's own);
            not for the model.

    Returns:
        The chain, one step per line, or ``Error: ...``.
    """
    from memdir.provenance._why import render, why

    ws = workspace_of(workspace, namespace)
    raw = check_text("path", path, max_chars=MAX_PATH_CHARS, hint="give MEMORY.md#L<line>")
    return render(why(ws, raw))


@tool
def memory_forget(
    text: str,
    confirm: bool = False,
    *,
    workspace: WorkspaceArg = None,
    namespace: str | None = None,
    by: str = "model",
) -> str:
    """Erase a remembered fact everywhere it lives (notes, MEMORY.md, its history, past
    conversations, the index). Call it first without confirm to see every place that holds
    it; erase only when the user asked for it, then call again with confirm=true.

    Args:
        text: the fact's text (at least 4 characters), or one line's citation such as
            ``memory/2026-10-14.md#L3``.
        confirm: ``False`` (default): only the preview, nothing changes; ``True``: erase.
        workspace: the workspace (or its path) (default: the configured one); not for the
            model.
        namespace: the caller's namespace in that workspace; not for the model.
        by: who asked, for the erasure record (default ``model``); not for the model.

    Returns:
        The preview, what was erased, that nothing holds it, or ``Error: ...``.
    """
    from memdir.forget import Target, apply_forget, plan_forget

    ws = workspace_of(workspace, namespace)
    what = check_text("text", text, max_chars=MAX_ADD_CHARS, hint="give the fact to forget")
    given: object = confirm  # a model may send "yes": only a JSON boolean erases
    if not isinstance(given, bool):
        return "Error: confirm must be true or false"
    plan = plan_forget(ws, Target.of(what))
    if plan.empty or not confirm:
        return plan.describe() + ("" if plan.empty else "\nCall again with confirm=true.")
    return apply_forget(ws, plan, by=by).describe()


def format_added(result: AddResult) -> str:
    """``memory_add``'s text for what an add wrote."""
    noun = "bullet" if result.bullets == 1 else "bullets"
    message = f"Saved {result.bullets} {noun} to {result.citation}."
    if result.masked:
        message += f" {masked_note(result.masked)}"
    if result.index_error:
        message += f" (Search will find it after the index catches up: {result.index_error})"
    return message


_LIMITS = {"minimum": 1}

TOOL_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "memory_search": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": 'Keywords to look for, e.g. "database migration" or "数据库迁移".',
            },
            "max_results": {
                "type": "integer",
                "description": "How many hits to return, 1 to 50.",
                "default": 10,
                **_LIMITS,
                "maximum": MAX_RESULTS_CAP,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "memory_get": {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": (
                    'Memory file path from memory_search, e.g. "memory/2026-10-14.md" or '
                    '"MEMORY.md"; may carry a line range such as "#L3-L5".'
                ),
            },
            "start_line": {
                "type": "integer",
                "description": "First line to read, counting from 1.",
                "default": 1,
                **_LIMITS,
            },
            "num_lines": {
                "type": "integer",
                "description": "How many lines to read, 1 to 200.",
                "default": DEFAULT_NUM_LINES,
                **_LIMITS,
                "maximum": GET_MAX_LINES,
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "memory_why": {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": 'One bullet\'s citation, e.g. "MEMORY.md#L12".',
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "memory_forget": {
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": 'The fact\'s text, or a line such as "memory/2026-10-14.md#L3".',
            },
            "confirm": {
                "type": "boolean",
                "description": "false: only show where it lives; true: erase it.",
                "default": False,
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    "memory_add": {
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": "The fact(s) to remember, one self-contained sentence per line.",
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    },
}
TOOL_SCHEMAS.update(SESSION_TOOL_SCHEMAS)
"""JSON schema of each tool's arguments (the ``parameters`` of OpenAI function calling)."""

TOOL_FUNCTIONS: Final[dict[str, Callable[..., str]]] = {
    "memory_search": memory_search,
    "memory_get": memory_get,
    "memory_add": memory_add,
}
"""The memory tools by name (what every adapter offers)."""

ALL_TOOL_FUNCTIONS: Final[dict[str, Callable[..., str]]] = {
    **TOOL_FUNCTIONS,
    **SESSION_TOOL_FUNCTIONS,
}
"""The memory tools and the past-session tools (:data:`SESSION_TOOL_FUNCTIONS`) by name:
what the agent and the MCP server offer."""


def _model_description(fn: Callable[..., str]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\nArgs:", 1)[0].replace("``", "`").strip()


PROVENANCE_TOOL_FUNCTIONS: Final[dict[str, Callable[..., str]]] = {"memory_why": memory_why}
"""``memory_why``: offered by the MCP server; an application may add it to an agent's tools."""

FORGET_TOOL_FUNCTIONS: Final[dict[str, Callable[..., str]]] = {"memory_forget": memory_forget}
"""``memory_forget``: offered by no agent or server by default, and not dispatched by
:func:`call_tool` (it erases); an application may add it to an agent's tools, and
``create_server(allow_forget=True)`` serves it."""

TOOL_DESCRIPTIONS: Final[dict[str, str]] = {
    name: _model_description(fn)
    for name, fn in {
        **ALL_TOOL_FUNCTIONS,
        **PROVENANCE_TOOL_FUNCTIONS,
        **FORGET_TOOL_FUNCTIONS,
    }.items()
}
"""What each tool does, for the model (the docstring without its Args/Returns sections)."""


def call_tool(
    name: str,
    arguments: object,
    *,
    workspace: WorkspaceArg = None,
    namespace: str | None = None,
) -> str:
    """Run a tool by name with the model's arguments; unknown or missing arguments give ``Error``.

    Args:
        name: ``memory_search``, ``memory_get``, ``memory_add``, ``session_search``,
            ``session_list`` or ``session_history``.
        arguments: the decoded JSON arguments from the model, a mapping (``None`` counts as
            ``{}``).
        workspace: the workspace the tool works on (default: the configured one).
        namespace: the caller's namespace in it (default: the workspace's own).

    Returns:
        The tool's text, or ``Error: ...``.
    """
    # memory_forget is never dispatched here: a model must not reach it by naming it.
    fn = ALL_TOOL_FUNCTIONS.get(name) or PROVENANCE_TOOL_FUNCTIONS.get(name)
    if fn is None:
        known_tools = ", ".join(ALL_TOOL_FUNCTIONS)
        return f"Error: unknown tool {name!r}; the memory tools are {known_tools}"
    args = {} if arguments is None else arguments
    if not isinstance(args, Mapping):
        return f"Error: {name} takes a JSON object of arguments"
    schema = TOOL_SCHEMAS[name]
    known = ", ".join(schema["properties"])
    unknown = sorted(str(key) for key in set(args) - set(schema["properties"]))
    if unknown:
        return f"Error: {name} got unexpected argument(s) {', '.join(unknown)}; it takes {known}"
    missing = [key for key in schema["required"] if key not in args]
    if missing:
        return f"Error: {name} needs argument(s) {', '.join(missing)}; it takes {known}"
    return fn(**args, workspace=workspace, namespace=namespace)
