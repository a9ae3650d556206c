"""``memdir mcp``: serve the memory tools over the Model Context Protocol."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import click

from memdir.cli._common import EXIT_HELP, CliState, info, pass_state
from memdir.cli._options import shown


@click.command("mcp", epilog=EXIT_HELP)
@shown(
    "--transport",
    click.Choice(["stdio", "http"]),
    "stdio",
    "stdio for desktop clients; http serves streamable HTTP at http://HOST:PORT/mcp.",
)
@shown(
    "--host",
    None,
    "127.0.0.1",
    "Interface for --transport http: loopback only (memdir serve serves other hosts).",
)
@shown("--port", click.IntRange(1, 65535), 8000, "Port for http.")
@click.option(
    "--read-only", is_flag=True, help="Expose only the tools that read (all but memory_add)."
)
@click.option(
    "--allow-forget",
    is_flag=True,
    help="Also expose memory_forget, which erases a fact everywhere (off by default).",
)
@pass_state
def mcp_cmd(
    state: CliState,
    transport: Literal["stdio", "http"],
    host: str,
    port: int,
    read_only: bool,
    allow_forget: bool,
) -> None:
    """Run an MCP server exposing memory_search, memory_get and memory_add, and
    session_search, session_list and session_history over the past sessions.

    Needs the optional 'mcp' package (pip install 'memdir[mcp]'). Logs go to stderr; on
    stdio, stdout carries the protocol. See docs/mcp.md for client setup.
    """
    from memdir.mcp import _sdk, check_transport, serve

    if not state.verbose:
        # The SDK logs every request at INFO; keep stderr for warnings unless -v was given.
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    check_transport(transport, host, port)
    ws = state.workspace(create=False)
    _sdk()  # without the mcp package, the error is all that is printed
    where = "stdio" if transport == "stdio" else f"http://{host}:{port}/mcp"
    info(f"memdir MCP server on {where}; workspace {ws.describe()}")
    serve(
        ws,
        transport=transport,
        host=host,
        port=port,
        read_only=read_only,
        allow_forget=allow_forget,
    )
