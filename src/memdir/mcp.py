"""MCP server exposing the memory tools to any MCP client (Claude Desktop, Claude Code, Cursor).

A thin wrapper over :mod:`memdir.tools`: the same functions, the model-facing descriptions of
:data:`~memdir.tools.TOOL_DESCRIPTIONS`, and parameter descriptions, defaults and bounds from
:data:`~memdir.tools.TOOL_SCHEMAS`. Run it with ``memdir mcp`` (stdio by default). Logs go to
stderr: on stdio, stdout carries the protocol.

Every request gets an answer: a JSON string holding a lone UTF-16 surrogate (``"\\ud800"``),
which the SDK's parser refuses, reaches the tools with U+FFFD in its place
(:mod:`memdir._mcp_wire`), and text a tool returns is made valid Unicode the same way (a
session log keeps a lone surrogate as it was written; the SDK cannot serialise one).

The ``mcp`` SDK is an optional dependency (``pip install 'memdir[mcp]'``). Its high-level server
class is ``FastMCP`` in v1 and ``MCPServer`` in v2; :func:`_sdk` is the only place that knows.
"""

# No `from __future__ import annotations` here: the SDK reads the wrappers' annotations
# (Annotated[..., WithJsonSchema(...)]) at runtime, and closures cannot be resolved from strings.

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from memdir._mcp_wire import run_http, run_stdio
from memdir._net import is_loopback_host
from memdir.errors import ConfigError, MemdirError
from memdir.memory._answer import valid_unicode
from memdir.store.workspace import Workspace
from memdir.tools import (
    TOOL_DESCRIPTIONS,
    TOOL_SCHEMAS,
    memory_add,
    memory_forget,
    memory_get,
    memory_search,
    memory_why,
    session_history,
    session_list,
    session_search,
)

__all__ = ["INSTALL_HINT", "SERVER_NAME", "check_transport", "create_server", "serve"]

SERVER_NAME = "memdir"
INSTALL_HINT = "the MCP server needs the 'mcp' package: pip install 'memdir[mcp]'"
_LOG_LEVEL = "WARNING"
INSTRUCTIONS = (
    "Long-term memory kept as Markdown files: MEMORY.md (curated) and daily notes under "
    "memory/. Search it with memory_search before answering questions about earlier work, "
    "decisions, people, dates or preferences; read around a hit with memory_get; save durable "
    "facts with memory_add. Cite what you use as path#Lstart-Lend. Earlier conversations are "
    "kept word for word: session_search finds what was said there, session_list lists them "
    "and session_history reads one."
)
_DEFAULT_MAX_RESULTS = TOOL_SCHEMAS["memory_search"]["properties"]["max_results"]["default"]
_DEFAULT_START_LINE = TOOL_SCHEMAS["memory_get"]["properties"]["start_line"]["default"]
_DEFAULT_NUM_LINES = TOOL_SCHEMAS["memory_get"]["properties"]["num_lines"]["default"]
_DEFAULT_SESSION_RESULTS = TOOL_SCHEMAS["session_search"]["properties"]["max_results"]["default"]
_DEFAULT_LAST_N = TOOL_SCHEMAS["session_history"]["properties"]["last_n"]["default"]
_READ_ONLY = {
    "memory_search": True,
    "memory_get": True,
    "memory_add": False,
    "session_search": True,
    "session_list": True,
    "session_history": True,
    "memory_why": True,
    "memory_forget": False,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Sdk:
    server_class: Any
    major: int
    tool_error: type[Exception]  # raising it makes a tool result with isError set
    tool_annotations: Any  # the SDK's ToolAnnotations model, or None


def _sdk() -> _Sdk:
    """Find the installed SDK's server class (v2 ``MCPServer``, else v1 ``FastMCP``).

    Imported by name so that one code path type-checks against either major version.
    """
    for major, module, attr, types_module in (
        (2, "mcp.server.mcpserver", "MCPServer", "mcp_types"),
        (1, "mcp.server.fastmcp", "FastMCP", "mcp.types"),
    ):
        try:
            server_class = getattr(importlib.import_module(module), attr)
            tool_error = importlib.import_module(f"{module}.exceptions").ToolError
        except (ImportError, AttributeError):
            continue
        try:
            annotations = getattr(importlib.import_module(types_module), "ToolAnnotations", None)
        except ImportError:
            annotations = None
        return _Sdk(
            server_class=server_class,
            major=major,
            tool_error=tool_error,
            tool_annotations=annotations,
        )
    raise ConfigError(INSTALL_HINT)


def create_server(
    workspace: Workspace | str | None = None,
    *,
    read_only: bool = False,
    namespace: str | None = None,
    resolve: Callable[[bool], Workspace] | None = None,
    sdk_options: Mapping[str, Any] | None = None,
    allow_forget: bool = False,
) -> Any:
    """Build (but do not run) an MCP server over one workspace.

    Args:
        workspace: the workspace the tools read and write (default: the configured one).
        namespace: serve this namespace of the workspace (one user's memory); default: the
            workspace's own.
        read_only: expose the tools that only read (all but ``memory_add``).
        resolve: instead of ``workspace``, the workspace of each call, asked for at the
            call (its argument says whether the tool writes): a server for many tenants binds
            every call to the caller's namespace this way. Raising the SDK's ``ToolError`` (or
            a :class:`~memdir.errors.MemdirError`) refuses the call with that message.
        sdk_options: more keyword arguments for the SDK's server class (for example its
            ``token_verifier`` and ``auth``).
        allow_forget: also serve ``memory_forget`` (erases a fact everywhere; off by
            default, never with ``read_only``).

    Returns:
        The SDK's server object (``MCPServer`` or ``FastMCP``); call ``run()`` on it, or hand
        it to the SDK's in-memory client in tests.

    Raises:
        ConfigError: the ``mcp`` package is not installed.
    """
    sdk = _sdk()
    from pydantic import WithJsonSchema  # a dependency of the mcp SDK

    from memdir import __version__

    if resolve is None:
        fixed = Workspace.coerce(workspace, namespace)

        def resolve(write: bool) -> Workspace:
            return fixed

    def ws(write: bool = False) -> Workspace:
        try:
            return resolve(write)
        except MemdirError as exc:
            raise sdk.tool_error(str(exc)) from None

    def checked(result: str) -> str:
        # Tool failures are results with isError set (MCP spec), not protocol errors. A lone
        # surrogate (from a session log) would fail the SDK's serialisation of the answer.
        result = valid_unicode(result)
        if result.startswith("Error: "):
            raise sdk.tool_error(result.removeprefix("Error: "))
        return result

    def arg(tool: str, name: str) -> Any:
        # Clients see the plain tools' schema, but the SDK checks nothing: memdir.tools does,
        # so a bad value gets the same one-line error (and 500 results the same clamp to 50)
        # as from the functions, not pydantic's multi-line report.
        spec = {k: v for k, v in TOOL_SCHEMAS[tool]["properties"][name].items() if k != "default"}
        return WithJsonSchema(spec)

    def given(name: str, value: Any) -> Any:
        # A required argument has a None default for the SDK, so that leaving it out gets
        # this one-line error rather than pydantic's report; the schema still requires it.
        if value is None:
            raise sdk.tool_error(f"{name} is required (a string)")
        return value

    def search(
        query: Annotated[Any, arg("memory_search", "query")] = None,
        max_results: Annotated[Any, arg("memory_search", "max_results")] = _DEFAULT_MAX_RESULTS,
    ) -> str:
        return checked(memory_search(given("query", query), max_results, workspace=ws()))

    def get(
        path: Annotated[Any, arg("memory_get", "path")] = None,
        start_line: Annotated[Any, arg("memory_get", "start_line")] = _DEFAULT_START_LINE,
        num_lines: Annotated[Any, arg("memory_get", "num_lines")] = _DEFAULT_NUM_LINES,
    ) -> str:
        return checked(memory_get(given("path", path), start_line, num_lines, workspace=ws()))

    def why(path: Annotated[Any, arg("memory_why", "path")] = None) -> str:
        return checked(memory_why(given("path", path), workspace=ws()))

    def forget(
        text: Annotated[Any, arg("memory_forget", "text")] = None,
        confirm: Annotated[Any, arg("memory_forget", "confirm")] = False,
    ) -> str:
        return checked(memory_forget(given("text", text), confirm, workspace=ws(True)))

    def add(text: Annotated[Any, arg("memory_add", "text")] = None) -> str:
        return checked(memory_add(given("text", text), workspace=ws(True)))

    def search_sessions(
        query: Annotated[Any, arg("session_search", "query")] = None,
        max_results: Annotated[
            Any, arg("session_search", "max_results")
        ] = _DEFAULT_SESSION_RESULTS,
        session_id: Annotated[Any, arg("session_search", "session_id")] = None,
    ) -> str:
        return checked(
            session_search(given("query", query), max_results, session_id, workspace=ws())
        )

    def list_sessions() -> str:
        return checked(session_list(workspace=ws()))

    def history(
        session_id: Annotated[Any, arg("session_history", "session_id")] = None,
        last_n: Annotated[Any, arg("session_history", "last_n")] = _DEFAULT_LAST_N,
        start: Annotated[Any, arg("session_history", "start")] = None,
    ) -> str:
        return checked(
            session_history(given("session_id", session_id), last_n, start, workspace=ws())
        )

    options: dict[str, Any] = {}
    if "version" in inspect.signature(sdk.server_class).parameters:  # v1 takes no version
        options["version"] = __version__
    options.update(sdk_options or {})
    server = sdk.server_class(
        name=SERVER_NAME, instructions=INSTRUCTIONS, log_level=_LOG_LEVEL, **options
    )
    wrappers = {
        "memory_search": search,
        "memory_get": get,
        "memory_add": add,
        "session_search": search_sessions,
        "session_list": list_sessions,
        "session_history": history,
        "memory_why": why,
    }
    if allow_forget:
        wrappers["memory_forget"] = forget
    for name, fn in wrappers.items():
        if read_only and not _READ_ONLY[name]:
            continue
        annotations = None
        if sdk.tool_annotations is not None:
            annotations = sdk.tool_annotations(
                readOnlyHint=_READ_ONLY[name],
                destructiveHint=name == "memory_forget",
                idempotentHint=_READ_ONLY[name],
                openWorldHint=False,
            )
        server.add_tool(
            fn,
            name=name,
            description=TOOL_DESCRIPTIONS[name],
            annotations=annotations,
            structured_output=False,
        )
        _restore_required(server, name)
    return server


def _restore_required(server: Any, name: str) -> None:
    """Mark the tool's required arguments as required again in the listed schema.

    Both SDK majors keep registered tools in the private ``_tool_manager``; if a later SDK
    moves it, the schema merely shows those arguments as optional (the tools still answer a
    missing one with a one-line error), so the server keeps working.
    """
    try:
        schema = server._tool_manager.get_tool(name).parameters
    except AttributeError:
        return
    schema["required"] = list(TOOL_SCHEMAS[name]["required"])
    for required in schema["required"]:
        schema["properties"].get(required, {}).pop("default", None)


def serve(
    workspace: Workspace | str | None = None,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    read_only: bool = False,
    allow_forget: bool = False,
) -> None:
    """Run the MCP server until the client disconnects (stdio) or the process is stopped.

    Args:
        workspace: the workspace to serve (default: the configured one).
        transport: ``"stdio"`` (what desktop clients launch) or ``"http"`` (streamable HTTP
            at ``http://HOST:PORT/mcp``, without authentication: loopback only; ``memdir
            serve`` serves MCP to other hosts, with a key per tenant).
        host: interface to listen on for ``http``: a loopback address or ``localhost``.
        port: port to listen on for ``http``.
        read_only: expose the tools that only read (all but ``memory_add``).
        allow_forget: also expose ``memory_forget`` (see :func:`create_server`).

    Raises:
        ConfigError: the ``mcp`` package is not installed, or the transport, host or port is
            not usable (``http`` on a host other than loopback).
        WorkspaceError: the workspace cannot be opened.
    """
    check_transport(transport, host, port)
    server = create_server(workspace, read_only=read_only, allow_forget=allow_forget)
    if transport == "stdio":
        run_stdio(server)
        return
    run_http(server, host=host, port=port, major=_sdk().major, log_level=_LOG_LEVEL)


def check_transport(transport: str, host: str, port: int) -> None:
    """Check the arguments of :func:`serve` before anything starts.

    Raises:
        ConfigError: an unknown transport, a port out of range, or ``http`` on a host other
            than loopback (it has no authentication: ``memdir serve`` serves MCP with keys).
    """
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown MCP transport {transport!r}: use 'stdio' or 'http'")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"port must be an int from 1 to 65535, not {port!r}")
    if not isinstance(host, str) or not host.strip():
        raise ConfigError(f"host must be an interface name or address, not {host!r}")
    if transport == "http" and not is_loopback_host(host):
        raise ConfigError(
            "MCP over HTTP without keys (memdir mcp --transport http) listens on loopback "
            f"only (127.0.0.1, ::1, localhost), not {host}: to serve MCP to other hosts, run "
            "memdir serve (a key per tenant; MCP at /mcp)"
        )
