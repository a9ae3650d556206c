"""Tool schemas from plain functions, and the workspace file tools."""

from __future__ import annotations

import enum
from typing import Any, Literal

import pytest

from memdir.agent import edit_file, list_files, read_file, tool_from_function, write_file
from memdir.errors import ConfigError, ToolInputError, WorkspaceError
from memdir.messages import ToolUseBlock
from memdir.workspace import Workspace


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def search_web(
    query: str,
    limit: int = 5,
    tags: list[str] | None = None,
    mode: Literal["fast", "deep"] = "fast",
    color: Color = Color.RED,
    *,
    workspace: Workspace | None = None,
) -> str:
    """Search the web for pages.

    Use it for fresh facts.

    Args:
        query: what to look for; a few keywords
            work best.
        limit: how many pages.
        tags: optional filters.
        mode: search depth.
        color: a colour.
        workspace: injected by the agent.

    Returns:
        Matching pages.
    """
    return f"{query}|{limit}|{tags}|{mode}|{workspace is not None}"


def test_schema_comes_from_signature_and_docstring() -> None:
    tool = tool_from_function(search_web)
    assert tool.name == "search_web"
    assert tool.description == "Search the web for pages.\n\nUse it for fresh facts."
    params = tool.parameters
    assert params["required"] == ["query"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert set(props) == {"query", "limit", "tags", "mode", "color"}  # workspace is hidden
    assert props["query"] == {
        "type": "string",
        "description": "what to look for; a few keywords work best.",
    }
    assert props["limit"] == {"type": "integer", "description": "how many pages.", "default": 5}
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert props["mode"]["enum"] == ["fast", "deep"]
    assert props["color"]["enum"] == ["red", "blue"]
    assert tool.inject == {"workspace"}


async def test_arguments_are_coerced_and_the_workspace_injected(ws: Workspace) -> None:
    tool = tool_from_function(search_web)
    call = ToolUseBlock(id="1", name="search_web", input={"query": "x", "limit": "7", "tags": None})
    result = await tool.run(call, workspace=ws)
    assert result.text == "x|7|None|fast|True"
    assert not result.is_error


async def test_timeouts_and_odd_return_values(ws: Workspace) -> None:
    import asyncio

    async def slow() -> str:
        """Sleeps."""
        await asyncio.sleep(30)
        return "late"

    def as_dict() -> dict[str, Any]:
        """Returns data."""
        return {"a": [1, 2], "b": "ü"}

    timed = await tool_from_function(slow).run(
        ToolUseBlock(id="s", name="slow", input={}), workspace=ws, timeout=0.05
    )
    assert timed.is_error and "did not finish" in timed.text
    data = await tool_from_function(as_dict).run(
        ToolUseBlock(id="d", name="as_dict", input={}), workspace=ws
    )
    assert data.text == '{"a": [1, 2], "b": "ü"}'


def test_functions_that_cannot_be_tools_are_rejected() -> None:
    def star(*args: int) -> None:
        """Varargs."""

    def weird(x: complex) -> None:
        """No JSON form."""

    with pytest.raises(ConfigError, match="cannot be given by a model"):
        tool_from_function(star)
    with pytest.raises(ConfigError, match="no JSON form"):
        tool_from_function(weird)
    with pytest.raises(ConfigError, match="invalid tool name"):
        tool_from_function(lambda: None)
    with pytest.raises(ConfigError):
        tool_from_function(42)  # type: ignore[arg-type]


# -- file tools ---------------------------------------------------------------------------


def test_read_file_by_lines_and_by_character_window(ws: Workspace) -> None:
    ws.write_text("notes/a.txt", "".join(f"line {i}\n" for i in range(1, 501)))
    first = read_file("notes/a.txt", workspace=ws)
    assert first.startswith("notes/a.txt: lines 1-200 of 500\n1|line 1\n")
    assert first.endswith('[more lines: read_file(path="notes/a.txt", start_line=201)]')
    last = read_file("notes/a.txt", start_line=490, workspace=ws)
    assert "500|line 500" in last and last.endswith("[end of file]")

    one_line = "x" * 45_000 + "END"
    ws.write_text("big.json", one_line)
    by_line = read_file("big.json", workspace=ws)
    assert len(by_line) < 21_000
    assert "start_char=" in by_line  # points at the character window for the rest
    window = read_file("big.json", start_char=40_000, max_chars=10_000, workspace=ws)
    assert window.endswith("END\n[end of file]")
    assert "characters 40,000-45,003 of 45,003" in window


def test_read_file_errors(ws: Workspace) -> None:
    (ws.root / "bin.dat").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolInputError, match="binary"):
        read_file("bin.dat", workspace=ws)
    with pytest.raises(ToolInputError, match="no file"):
        read_file("missing.txt", workspace=ws)
    with pytest.raises(ToolInputError, match="directory"):
        read_file("memory", workspace=ws)
    with pytest.raises(WorkspaceError):
        read_file("/etc/passwd", workspace=ws)
    ws.write_text("s.txt", "abc")
    with pytest.raises(ToolInputError, match="past the end"):
        read_file("s.txt", start_char=10, workspace=ws)


def test_write_and_edit_refuse_memory_files(ws: Workspace) -> None:
    for path in ("MEMORY.md", "memory/2026-11-30.md", "./memory/x.md", "sessions/x", ".index/db"):
        with pytest.raises(ToolInputError, match="cannot write"):
            write_file(path, "overwrite", workspace=ws)
    ws.write_text("MEMORY.md", "- keep me\n")
    with pytest.raises(ToolInputError, match="memory_add"):
        edit_file("MEMORY.md", "keep", "drop", workspace=ws)
    assert ws.read_text("MEMORY.md") == "- keep me\n"


def test_write_edit_and_list(ws: Workspace) -> None:
    assert write_file("work/plan.md", "a\nb\na\n", workspace=ws).startswith("Created work/plan.md")
    assert write_file("work/plan.md", "a\nb\na\n", workspace=ws).startswith("Replaced")
    with pytest.raises(ToolInputError, match="occurs 2 times"):
        edit_file("work/plan.md", "a", "z", workspace=ws)
    with pytest.raises(ToolInputError, match="not found"):
        edit_file("work/plan.md", "q", "z", workspace=ws)
    assert edit_file("work/plan.md", "a", "z", replace_all=True, workspace=ws) == (
        "Replaced 2 occurrences in work/plan.md."
    )
    assert ws.read_text("work/plan.md") == "z\nb\nz\n"
    listing = list_files(workspace=ws)
    assert "work/" in listing and ".index" not in listing
    assert "work/plan.md (6 bytes)" in list_files("work", workspace=ws)
    assert "work/plan.md" in list_files(recursive=True, workspace=ws)
