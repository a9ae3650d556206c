"""``memdir index``, ``memdir search`` and ``memdir get``."""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

import click

from memdir.cli._common import (
    EXIT_HELP,
    CliState,
    echo_json,
    info,
    pass_state,
    plural,
    progress_bar,
)

if TYPE_CHECKING:
    from memdir.index import MemoryIndex

JSON_HELP = "Print JSON on stdout instead of text."


@click.command("index", epilog=EXIT_HELP)
@click.option("--full", is_flag=True, help="Drop the index and rebuild it from the files.")
@click.option(
    "--embed",
    is_flag=True,
    help="Also compute the vectors that lines are missing (hybrid search; slow, resumable).",
)
@click.option(
    "--embedder",
    metavar="NAME|off|auto",
    help="Set the workspace's embedder for hybrid search (e5, ollama:MODEL, openai:MODEL, "
    "dashscope:MODEL) and embed; 'off': lexical only; 'auto': the bundled e5 when "
    "memdir[embeddings] is installed (the default).",
)
@click.option(
    "--status",
    is_flag=True,
    help="Only show what the index holds: files, lines, embedder, vectors, pending.",
)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_state
def index_cmd(
    state: CliState, full: bool, embed: bool, embedder: str | None, status: bool, as_json: bool
) -> None:
    """Bring the search index up to date with the memory files (changed files only).

    MEMORY.md, memory/*.md and memory/archive/*.md are indexed. Searches refresh the index
    by themselves; run this after large edits, or with --full to rebuild it. It also checks
    the index for damage (an integrity check, every stored line against its file) and
    rebuilds it from the files if it finds any.

    Hybrid search: with `pip install 'memdir[embeddings]'` every search also ranks lines by
    meaning (the bundled e5, on the CPU) once their vectors exist; `memdir maintain` (and the
    agent's background maintenance) computes them, short lines first, newest first, and
    `memdir index --embed` computes them all now. Interrupting it loses nothing: the next run
    goes on where it stopped. `--embedder NAME` picks another embedder, `--embedder off` keeps
    the workspace lexical, and `--status` shows where it stands.
    """
    from memdir.index import MemoryIndex

    if status and (full or embed or embedder is not None):
        raise click.UsageError("--status only reports: use it without --full, --embed, --embedder")
    ws = state.workspace(create=False)
    out: dict[str, object] = {"workspace": ws.describe()}
    with MemoryIndex(ws) as index:
        if status:
            _print_status(index, out, as_json)
            return
        if embedder is not None:
            index.set_default_embedder(embedder)
            embed = embedder.strip().lower() not in ("off", "auto")
        with progress_bar("indexing", enabled=sys.stderr.isatty() and not as_json) as progress:
            # Plain `memdir index` also looks for damage (and rebuilds): about 0.3 s per 100k lines.
            stats = index.index_all_from_workspace(full=full, check=not full, progress=progress)
        out.update(dataclasses.asdict(stats))
        if not as_json:
            info(
                f"{plural(stats.files_indexed, 'file')} indexed, {stats.files_unchanged} "
                f"unchanged, {stats.files_removed} removed; "
                f"{plural(stats.lines_indexed, 'line')} indexed in {stats.seconds:.2f} s"
            )
        # --embed reports why it cannot (no setting, package missing); otherwise a
        # workspace without a usable embedder is simply lexical.
        current = None if embed else index.embedder
        if embed or current is not None:
            with progress_bar(
                "embedding", enabled=sys.stderr.isatty() and not as_json and embed
            ) as progress:
                vectors = index.embed_pending(max_seconds=None if embed else 0, progress=progress)
            current = index.embedder
            assert current is not None
            out["embedder"] = current.name
            out["vectors"] = dataclasses.asdict(vectors)
            if not as_json:
                info(
                    f"vectors ({current.name}): {plural(vectors.embedded, 'line')} embedded "
                    f"in {vectors.seconds:.1f} s, {vectors.pending} pending"
                    + ("" if embed or not vectors.pending else " (run `memdir index --embed`)")
                )
    if as_json:
        echo_json(out)


_CHOICE = {
    "setting": "set for this workspace",
    "automatic": "automatic: memdir[embeddings] is installed",
    "environment": "from MEMDIR_EMBEDDER",
    "argument": "given to MemoryIndex",
    "off": "off for this workspace or by MEMDIR_EMBEDDER (`memdir index --embedder e5` sets one)",
    "unavailable": "lexical only: pip install 'memdir[embeddings]' for hybrid search",
}


def _print_status(index: MemoryIndex, out: dict[str, object], as_json: bool) -> None:
    status = index.status()
    out.update(dataclasses.asdict(status))
    if as_json:
        echo_json(out)
        return
    files = f"{status.files:,} file" + ("" if status.files == 1 else "s")
    lines = f"{status.lines:,} line" + ("" if status.lines == 1 else "s")
    click.echo(f"{files}, {lines} indexed")
    if status.embedder is None:
        click.echo(f"embedder: none ({_CHOICE.get(status.choice, status.choice)})")
        return
    click.echo(f"embedder: {status.embedder} ({_CHOICE.get(status.choice, status.choice)})")
    share = status.vectors / max(1, status.vectors + status.pending)
    click.echo(
        f"vectors: {status.vectors:,} of {status.vectors + status.pending:,} lines "
        f"({share:.0%}), {status.pending:,} pending"
        + (" (computed in the background by `memdir maintain`)" if status.pending else "")
    )


@click.command("search", epilog=EXIT_HELP)
@click.argument("query")
@click.option(
    "-n",
    "--max-results",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="How many hits to show (at most 50).",
)
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_state
def search_cmd(state: CliState, query: str, max_results: int, as_json: bool) -> None:
    """Search the memory for QUERY (keywords; English, Chinese or mixed), best hits first.

    Each hit prints as PATH#Lstart-Lend [section]: text; a line that a newer hit updates
    (a changed value) says [superseded by PATH#L…], the newer one [updates PATH#L…]. No
    hits is not an error (exit 0).
    """
    from memdir.tools import MAX_RESULTS_CAP, format_hits
    from memdir.tools._core import MAX_QUERY_CHARS, check_text, shared_index

    text = check_text("query", query, max_chars=MAX_QUERY_CHARS, hint="give a few keywords")
    ws = state.workspace(create=False)
    index = shared_index(ws)
    index.refresh()
    hits = index.search(text, limit=min(max_results, MAX_RESULTS_CAP))
    if as_json:
        echo_json(
            [
                {"citation": f"{hit.path}#L{hit.line_number}-L{hit.line_end}"}
                | dataclasses.asdict(hit)
                for hit in hits
            ]
        )
        return
    header, *lines = format_hits(text, hits, char_cap=sys.maxsize).split("\n")
    info(header)
    for line in lines:
        click.echo(line)


@click.command("get", epilog=EXIT_HELP)
@click.argument("path", metavar="PATH[:START-END]")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@pass_state
def get_cmd(state: CliState, path: str, as_json: bool) -> None:
    """Print a memory file, or lines START to END of it.

    PATH is MEMORY.md or a file under memory/; a range may follow as :START-END, :LINE or a
    search citation such as memory/2026-10-14.md#L3-L5. The text goes to stdout as it is in
    the file; the location goes to stderr.
    """
    from memdir.errors import ToolInputError
    from memdir.tools._core import (
        MAX_PATH_CHARS,
        check_text,
        is_memory_file,
        parse_citation,
        read_memory,
    )

    cited = parse_citation(check_text("PATH", path, max_chars=MAX_PATH_CHARS))
    ws = state.workspace(create=False)
    head, colon, tail = cited.path.rpartition(":")
    if colon and cited.start is None and is_memory_file(ws, head):
        raise ToolInputError(
            f"invalid line range {tail!r} in {path!r}: use PATH:START-END or PATH:LINE"
        )
    count = None if cited.start is None or cited.end is None else cited.end - cited.start + 1
    excerpt = read_memory(ws, cited.path, cited.start or 1, count)
    if as_json:
        echo_json(
            {
                "path": excerpt.path,
                "requested": excerpt.requested,
                "start_line": excerpt.start_line,
                "end_line": excerpt.end_line,
                "total_lines": excerpt.total_lines,
                "lines": list(excerpt.lines),
            }
        )
        return
    info(
        f"{excerpt.path}#L{excerpt.start_line}-L{excerpt.end_line} "
        f"({plural(excerpt.total_lines, 'line')} in the file)"
    )
    for line in excerpt.lines:
        click.echo(line)
