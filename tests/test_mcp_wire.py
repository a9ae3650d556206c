"""Every MCP request gets an answer, also one whose JSON holds a lone surrogate (``\\ud800``).

The requests are written to a real ``memdir mcp`` subprocess as raw JSON-RPC (the SDK's
client refuses to send such text), on stdio and over HTTP; the answers that carry a lone
surrogate out of a session log are read with the SDK's own client.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from memdir._mcp_wire import MAX_BODY_BYTES, ValidUnicodeBodies, valid_json_text
from memdir.messages import Msg
from memdir.sessions import SessionLog
from memdir.tools import (
    memory_add,
    memory_get,
    memory_search,
    session_history,
    session_search,
)
from memdir.workspace import Workspace

mcp = pytest.importorskip("mcp")
Client = getattr(mcp, "Client", None)
if Client is None:  # pragma: no cover - v1 SDKs have no high-level Client
    pytest.skip("these tests use the mcp v2 Client", allow_module_level=True)
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from test_mcp import SAMPLE, TIMEOUT, _close_indexes  # noqa: E402, F401 - a fixture

LONE = "\ud800"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "MEMDIR_EMBEDDER": "off"}


@pytest.fixture
def logged(ws: Workspace) -> Workspace:
    """The example workspace, and a session log that kept a lone surrogate as it was said."""
    shutil.copytree(SAMPLE, ws.root, dirs_exist_ok=True)
    SessionLog(ws, "broken").append([Msg.user(f"zebra {LONE} crossing"), Msg.assistant("ok")])
    return ws


def call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


# json.dumps writes the lone surrogates of these as "\ud800" escapes.
REQUESTS = [
    call(1, "memory_search", {"query": f"Moganshan {LONE} offsite"}),
    call(2, "memory_add", {"text": f"Mila likes {LONE} jasmine tea"}),
    call(3, f"memory_{LONE}", {}),
    call(4, "session_history", {"session_id": "broken"}),
    call(5, "session_search", {"query": f"zebra{LONE}"}),
    call(6, "memory_get", {"path": f"MEMORY{LONE}.md"}),
    call(7, "memory_search", {"query": "Moganshan offsite"}),
]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def text_of(answer: dict[str, Any]) -> str:
    return "\n".join(part["text"] for part in answer["result"]["content"])


def check_answers(answers: dict[int, dict[str, Any]], ws: Workspace) -> None:
    assert set(answers) == {1, 2, 3, 4, 5, 6, 7}
    found = answers[1]
    assert not found["result"]["isError"]
    assert "memory/2026-11-24.md#L2-L2" in text_of(found)
    assert text_of(answers[2]).startswith("Saved 1 bullet to memory/")
    assert "error" in answers[3] or answers[3]["result"]["isError"]
    assert "zebra \ufffd crossing" in text_of(answers[4])
    assert "zebra \ufffd crossing" in text_of(answers[5])
    assert answers[6]["result"]["isError"]
    assert text_of(answers[7]) == memory_search("Moganshan offsite", workspace=ws)
    ledgers = [p.read_bytes() for p in (ws.root / "memory").glob("*.md")]
    added = [raw for raw in ledgers if b"Mila" in raw]
    assert len(added) == 1 and "- Mila likes \ufffd jasmine tea" in added[0].decode("utf-8")


@asynccontextmanager
async def stdio_server(ws: Workspace) -> AsyncIterator[Process]:
    command = [sys.executable, "-m", "memdir", "-w", str(ws.root), "mcp"]
    async with await anyio.open_process(command, env=ENV) as process:
        try:
            yield process
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()


async def test_stdio_answers_each_request_holding_a_lone_surrogate(logged: Workspace) -> None:
    answers: dict[int, dict[str, Any]] = {}
    with anyio.fail_after(TIMEOUT):
        async with stdio_server(logged) as process:
            assert process.stdin is not None and process.stdout is not None
            stdout = BufferedByteReceiveStream(process.stdout)

            async def send(message: dict[str, Any]) -> None:
                assert process.stdin is not None
                await process.stdin.send((json.dumps(message) + "\n").encode("ascii"))

            async def answer(request_id: int) -> dict[str, Any]:
                while True:  # the answer to this id, whatever comes before it
                    line = await stdout.receive_until(b"\n", 1 << 24)
                    message: dict[str, Any] = json.loads(line)
                    if message.get("id") == request_id:
                        return message

            await send(INITIALIZE)
            await answer(0)
            await send(INITIALIZED)
            for request in REQUESTS:
                await send(request)
                answers[request["id"]] = await answer(request["id"])
    check_answers(answers, logged)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@asynccontextmanager
async def http_server(ws: Workspace) -> AsyncIterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [sys.executable, "-m", "memdir", "-w", str(ws.root), "mcp"]
    command += ["--transport", "http", "--port", str(port)]
    async with await anyio.open_process(command, env=ENV) as process:
        try:
            async with httpx.AsyncClient() as probe:
                while True:  # until the server listens
                    try:
                        await probe.get(url)
                        break
                    except httpx.TransportError:
                        assert process.returncode is None, "the server exited"
                        await anyio.sleep(0.05)
            yield url
        finally:
            process.terminate()
            await process.wait()


def sse_message(response: httpx.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("application/json"):
        return dict(response.json())
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    messages = [json.loads(d) for d in data if d]
    assert len(messages) == 1, response.text
    return dict(messages[0])


async def test_http_answers_each_request_holding_a_lone_surrogate(logged: Workspace) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    answers: dict[int, dict[str, Any]] = {}
    with anyio.fail_after(TIMEOUT):
        async with http_server(logged) as url, httpx.AsyncClient(timeout=TIMEOUT) as http:
            opened = await http.post(url, content=json.dumps(INITIALIZE), headers=headers)
            assert opened.status_code == 200
            headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            headers["mcp-protocol-version"] = "2025-06-18"
            sent = await http.post(url, content=json.dumps(INITIALIZED), headers=headers)
            assert sent.status_code == 202
            for request in REQUESTS:
                response = await http.post(url, content=json.dumps(request), headers=headers)
                answers[request["id"]] = sse_message(response)
    assert all(answer["id"] == request_id for request_id, answer in answers.items())
    check_answers(answers, logged)


async def test_the_sdk_client_reads_an_answer_that_held_a_lone_surrogate(
    logged: Workspace,
) -> None:
    # Over stdio and over HTTP: the session log's lone surrogate reaches the client as U+FFFD.
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memdir", "-w", str(logged.root), "mcp"], env=ENV
    )
    texts: list[str] = []
    with anyio.fail_after(TIMEOUT):
        async with Client(params, read_timeout_seconds=TIMEOUT) as client:
            texts.append(await client.call_tool("session_history", {"session_id": "broken"}))
        async with http_server(logged) as url, Client(url) as client:
            texts.append(await client.call_tool("session_list", {}))
    for result in texts:
        assert not result.is_error
        assert "zebra \ufffd crossing" in result.content[0].text


# -- the repair itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"q":"a\\ud800b"}', {"q": "a\ufffdb"}),
        ('{"q":"\\udc00"}', {"q": "\ufffd"}),
        ('{"a\\ud800":["\\uDBFF x"]}', {"a\ufffd": ["\ufffd x"]}),
        ('{"q":"\\ud83d\\ude00 \\ud83d"}', {"q": "\U0001f600 \ufffd"}),
    ],
)
def test_lone_surrogates_in_json_become_replacement_characters(
    text: str, expected: dict[str, Any]
) -> None:
    fixed = valid_json_text(text)
    assert json.loads(fixed) == expected
    fixed.encode("utf-8")  # valid Unicode now


@pytest.mark.parametrize(
    "text",
    [
        '{"q":"plain \\u00e9 text"}',
        '{"q":"\\\\ud800 is how JSON spells it"}',  # an escaped backslash: no surrogate
    ],
)
def test_json_without_a_lone_surrogate_means_the_same_after(text: str) -> None:
    assert json.loads(valid_json_text(text)) == json.loads(text)


@pytest.mark.parametrize("text", ['{"q":"\\ud800"', "", "\\ud800"])
def test_text_that_is_not_json_is_left_to_the_sdk(text: str) -> None:
    assert valid_json_text(text) is text


async def asgi_call(body: bytes, chunks: int = 1) -> tuple[bytes, dict[bytes, bytes]]:
    """What an ASGI app behind :class:`ValidUnicodeBodies` receives for a POST of ``body``."""
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        seen["body"], seen["headers"] = b"".join(parts), dict(scope["headers"])

    step = max(1, -(-len(body) // chunks))
    pieces = [body[i : i + step] for i in range(0, len(body), step)] or [b""]
    queue = [
        {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1}
        for i, p in enumerate(pieces)
    ]

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    scope = {"type": "http", "method": "POST", "headers": [(b"content-length", b"%d" % len(body))]}
    await ValidUnicodeBodies(app)(scope, receive, None)
    return seen["body"], seen["headers"]


async def test_an_http_body_is_repaired_whole_and_its_length_follows() -> None:
    body = json.dumps(call(9, "memory_add", {"text": f"x {LONE} y"})).encode()
    got, headers = await asgi_call(body, chunks=3)
    assert json.loads(got)["params"]["arguments"]["text"] == "x \ufffd y"
    assert headers[b"content-length"] == str(len(got)).encode()


async def test_a_body_over_the_limit_is_passed_on_unread() -> None:
    body = b'{"q":"\\ud800' + b" " * MAX_BODY_BYTES + b'"}'
    got, headers = await asgi_call(body, chunks=4)
    assert got == body and headers[b"content-length"] == str(len(body)).encode()


# -- the plain functions -------------------------------------------------------------------


def test_the_plain_tools_answer_lone_surrogates_with_one_line_and_write_nothing(
    logged: Workspace,
) -> None:
    before = {p: p.read_bytes() for p in logged.root.rglob("*") if p.is_file()}
    answers = [
        memory_add(f"fact {LONE}", workspace=logged),
        memory_search(f"tea {LONE}", workspace=logged),
        memory_get(f"MEMORY.md{LONE}", workspace=logged),
        session_search(f"zebra {LONE}", workspace=logged),
        session_history(f"broken{LONE}", workspace=logged),
        session_search("zebra", session_id=LONE, workspace=logged),
    ]
    for answer in answers:
        assert answer.startswith("Error: ") and "not valid Unicode text" in answer, answer
        assert "\n" not in answer
    after = {p: p.read_bytes() for p in logged.root.rglob("*") if p.is_file()}
    assert {p: after[p] for p in before} == before
