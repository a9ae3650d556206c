"""Tool-result eviction: files, placeholders, budgets, idempotency, failure handling."""

from __future__ import annotations

import json
import logging

import pytest

from memdir.errors import ConfigError
from memdir.eviction import (
    EVICTED_KEY,
    ToolResultEvictionConfig,
    ToolResultEvictor,
    render_placeholder,
)
from memdir.messages import ImageBlock, Msg, TextBlock, ToolResultBlock, ToolUseBlock
from memdir.workspace import Workspace


def _turn(*results: tuple[str, str, str]) -> list[Msg]:
    """A user message, one assistant message calling each tool, then one result message each."""
    calls = [ToolUseBlock(id=cid, name=name, input={}) for cid, name, _ in results]
    msgs = [Msg.user("go"), Msg.assistant(tool_calls=calls)]
    msgs += [Msg.tool_result(cid, out, name=name) for cid, name, out in results]
    return msgs


def _log_text(n: int) -> str:
    lines = [f"step {i}: ok" for i in range(n)]
    lines[n // 2] = "step X: ERROR disk quota exceeded"
    lines[-1] = "Traceback: the job failed at the very end"
    return "\n".join(lines)


def test_large_result_goes_to_a_file_and_a_placeholder_keeps_head_and_tail(ws: Workspace) -> None:
    big = _log_text(20_000)
    msgs = _turn(("call_1", "shell", big))
    out = ToolResultEvictor(ws, session_id="s1").evict(msgs)

    assert len(out.evicted) == 1
    record = out.evicted[0]
    assert record.path.startswith("large_tool_results/s1/call_1-")
    assert ws.path(record.path).read_text(encoding="utf-8") == big
    placeholder = out.messages[-1].tool_results[0].text
    assert big not in placeholder
    assert len(placeholder) < 6_000
    assert f"{len(big):,} characters" in placeholder
    assert record.path in placeholder
    assert big[:2_000] in placeholder
    assert "the job failed at the very end" in placeholder  # the tail survives
    assert "ERROR disk quota exceeded" in placeholder  # error lines from the middle
    assert out.messages[-1].metadata[EVICTED_KEY]["call_1"]["chars"] == len(big)
    # Everything else is the same object; the input list is not modified.
    assert out.messages[:2] == msgs[:2] and out.messages[0] is msgs[0]
    assert msgs[-1].tool_results[0].text == big


def test_small_and_excluded_results_are_left_alone(ws: Workspace) -> None:
    big = "x" * 100_000
    msgs = _turn(("a", "shell", "short"), ("b", "read_file", big), ("c", "memory_get", big))
    out = ToolResultEvictor(ws).evict(msgs)
    assert out.evicted == ()
    assert all(o is m for o, m in zip(out.messages, msgs, strict=True))
    # The name may come only from the assistant's call (results without a name).
    anonymous = [
        *msgs[:2],
        Msg(role="tool", content=(ToolResultBlock(tool_use_id="b", output=big),)),
    ]
    assert ToolResultEvictor(ws).evict(anonymous).evicted == ()


def test_eviction_is_idempotent_but_a_look_alike_output_is_still_evicted(ws: Workspace) -> None:
    evictor = ToolResultEvictor(ws)
    first = evictor.evict(_turn(("c1", "shell", "y" * 90_000))).messages
    again = evictor.evict(first)
    assert again.evicted == ()
    assert all(o is m for o, m in zip(again.messages, first, strict=True))

    fake = render_placeholder("z" * 90_000, "large_tool_results/default/x.txt", 2_000)
    looks_like = fake + "\n" + "real data " * 9_000
    out = evictor.evict(_turn(("c2", "shell", looks_like)))
    assert [r.tool_use_id for r in out.evicted] == ["c2"]
    assert ws.path(out.evicted[0].path).read_text(encoding="utf-8") == looks_like


def test_identical_outputs_are_stored_once(ws: Workspace) -> None:
    same = "same output\n" * 10_000
    out = ToolResultEvictor(ws).evict(_turn(("c1", "shell", same), ("c2", "shell", same)))
    assert [r.reused for r in out.evicted] == [False, True]
    assert out.evicted[0].path == out.evicted[1].path
    assert len(list((ws.root / "large_tool_results" / "default").iterdir())) == 1


def test_same_call_id_with_different_content_keeps_both_files(ws: Workspace) -> None:
    evictor = ToolResultEvictor(ws)
    a = evictor.evict(_turn(("dup", "shell", "a" * 90_000))).evicted[0]
    b = evictor.evict(_turn(("dup", "shell", "b" * 90_000))).evicted[0]
    assert a.path != b.path
    assert ws.path(a.path).read_text(encoding="utf-8") == "a" * 90_000
    assert ws.path(b.path).read_text(encoding="utf-8") == "b" * 90_000


def test_json_output_gets_a_shape_preview(ws: Workspace) -> None:
    doc = {
        "items": [{"id": i, "name": f"item {i}", "tags": ["t"]} for i in range(3_000)],
        "total": 3_000,
        "next": None,
    }
    text = json.dumps(doc)
    out = ToolResultEvictor(ws).evict(_turn(("j", "http_get", text)))
    placeholder = out.messages[-1].tool_results[0].text
    assert "JSON shape:" in placeholder
    assert '"items": array[3,000] of {"id": number, "name": string, "tags": array[1]' in placeholder
    assert '"total": number' in placeholder


def test_turn_budget_evicts_the_largest_results_first(ws: Workspace) -> None:
    config = ToolResultEvictionConfig(max_result_chars=80_000, max_turn_chars=200_000)
    sizes = {"r1": 30_000, "r2": 70_000, "r3": 50_000, "r4": 60_000, "r5": 40_000}
    previous_turn = _turn(("old", "shell", "o" * 70_000))
    msgs = previous_turn + _turn(*[(cid, "shell", "m" * n) for cid, n in sizes.items()])
    out = ToolResultEvictor(ws, config).evict(msgs)
    evicted = [r.tool_use_id for r in out.evicted]
    assert evicted == ["r2"]  # 250k -> 180k + placeholder: under budget after the largest one
    remaining = sum(len(b.text) for m in out.messages[len(previous_turn) :] for b in m.tool_results)
    assert remaining <= 200_000
    assert out.messages[2] is msgs[2]  # the earlier turn is not part of this budget


def test_images_survive_eviction(ws: Workspace) -> None:
    output: list[TextBlock | ImageBlock] = [
        TextBlock(text="p" * 90_000),
        ImageBlock(source="data:image/png;base64,AAAA"),
    ]
    msgs = [
        Msg.assistant(tool_calls=[ToolUseBlock(id="i", name="screenshot", input={})]),
        Msg(role="tool", content=(ToolResultBlock(tool_use_id="i", output=output),)),
    ]
    out = ToolResultEvictor(ws).evict(msgs)
    parts = out.messages[-1].tool_results[0].output
    assert isinstance(parts, list)
    assert isinstance(parts[-1], ImageBlock)
    assert "Saved in full" in out.messages[-1].tool_results[0].text


def test_write_failure_leaves_the_result_and_logs(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    (ws.root / "large_tool_results" / "s").write_text("not a directory")
    big = "secret " * 20_000
    msgs = _turn(("c", "shell", big))
    with caplog.at_level(logging.WARNING, logger="memdir.eviction"):
        out = ToolResultEvictor(ws, session_id="s").evict(msgs)
    assert out.evicted == ()
    assert out.messages[-1] is msgs[-1]
    assert "could not be evicted" in caplog.text
    assert "secret" not in caplog.text  # tool output is never logged


def test_names_are_sanitised_and_confined(ws: Workspace) -> None:
    out = ToolResultEvictor(ws, session_id="../../etc").evict(
        _turn(("../x/y z", "shell", "q" * 90_000))
    )
    path = out.evicted[0].path
    assert path.startswith("large_tool_results/______etc/___x_y_z-")
    assert ws.path(path).is_file()


def test_config_is_validated(ws: Workspace) -> None:
    assert ToolResultEvictionConfig.defaults().max_result_chars == 80_000
    assert "read_file" in ToolResultEvictionConfig.defaults().excluded_tool_names
    with pytest.raises(ConfigError):
        ToolResultEvictionConfig(max_result_chars=0)
    with pytest.raises(ConfigError):
        ToolResultEvictionConfig(excluded_tool_names="read_file")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ToolResultEvictor(ws, ToolResultEvictionConfig(eviction_path="../outside"))
    assert ToolResultEvictionConfig(excluded_tool_names=["a"]).excluded_tool_names == {"a"}


def test_placeholder_formatting_is_deterministic() -> None:
    text = "line\n" * 30_000
    a = render_placeholder(text, "p.txt", 100)
    assert a == render_placeholder(text, "p.txt", 100)
    assert "150,000 characters, 30,001 lines" in a
    assert "\r" not in a
