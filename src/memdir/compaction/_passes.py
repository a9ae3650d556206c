"""The cheap, model-free passes: argument truncation and old tool-result clearing.

Both are pure functions from a message list to a new list of the same length and order. A
changed message keeps its id, role, name, timestamp and metadata (only its blocks change), so the
session log, which is idempotent by id, keeps the original version and never a shortened one.
Both recognise their own markers, so running them twice changes nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from memdir.compaction.config import ClearToolResultsConfig, TruncateArgsConfig
from memdir.messages import Block, ImageBlock, Msg, TextBlock, ToolResultBlock, ToolUseBlock

__all__ = ["clear_candidates", "clear_tool_results", "truncate_args", "truncate_candidates"]

_CLEARED = re.compile(r"\[[\d,]+ of [\d,]+ characters cleared")
_TRUNCATED_NOTE = re.compile(r" \[[\d,]+ characters in all")
# Tool arguments nest rarely and shallowly; a bound keeps a pathological input cheap.
_MAX_DEPTH = 16

Locator = Callable[[str], str]
"""Maps a message id to where its original is kept, e.g. ``"sessions/s1.log.jsonl line 12"``."""


# -- argument truncation -------------------------------------------------------------------------


def _long_string(value: Any, cfg: TruncateArgsConfig, depth: int = 0) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, str):
        return len(value) > cfg.max_arg_length and not _is_truncated(value, cfg)
    if isinstance(value, dict):
        return any(_long_string(v, cfg, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_long_string(v, cfg, depth + 1) for v in value)
    return False


def _is_truncated(text: str, cfg: TruncateArgsConfig) -> bool:
    tail = text[cfg.head_chars :]
    return tail.startswith(cfg.truncation_text) and bool(_TRUNCATED_NOTE.search(tail))


def _shorten(value: Any, cfg: TruncateArgsConfig, where: str, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        return value
    if isinstance(value, str):
        if len(value) <= cfg.max_arg_length or _is_truncated(value, cfg):
            return value
        return (
            f"{value[: cfg.head_chars]}{cfg.truncation_text} "
            f"[{len(value):,} characters in all; the full call is in {where}]"
        )
    if isinstance(value, dict):
        return {k: _shorten(v, cfg, where, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v, cfg, where, depth + 1) for v in value]
    return value


def truncate_candidates(msgs: Sequence[Msg], end: int, cfg: TruncateArgsConfig) -> list[int]:
    """Indexes before ``end`` of assistant messages with an argument the pass would shorten."""
    return [
        i
        for i in range(min(end, len(msgs)))
        if msgs[i].role == "assistant"
        and any(_long_string(c.input, cfg) for c in msgs[i].tool_uses)
    ]


def truncate_args(
    msgs: Sequence[Msg], indexes: Sequence[int], cfg: TruncateArgsConfig, locate: Locator
) -> list[Msg]:
    """Shorten long string arguments of the tool calls in ``msgs[i]`` for each ``i`` in indexes.

    Every string longer than ``cfg.max_arg_length``, at any depth of the arguments, becomes its
    first ``cfg.head_chars`` characters, ``cfg.truncation_text``, the original length and
    where the full call is kept.
    """
    out = list(msgs)
    for i in indexes:
        msg = out[i]
        where = locate(msg.id)
        blocks: list[Block] = []
        for block in msg.content:
            if isinstance(block, ToolUseBlock) and _long_string(block.input, cfg):
                block = ToolUseBlock(
                    id=block.id, name=block.name, input=_shorten(block.input, cfg, where)
                )
            blocks.append(block)
        out[i] = msg.with_content(blocks)
    return out


# -- old tool-result clearing --------------------------------------------------------------------


def _result_chars(block: ToolResultBlock) -> int:
    if isinstance(block.output, str):
        return len(block.output)
    # An image is worth far more than its URI's length suggests; count it as large.
    return sum(len(p.text) if isinstance(p, TextBlock) else 10_000 for p in block.output)


def _clearable(block: ToolResultBlock, cfg: ClearToolResultsConfig) -> bool:
    if block.name is not None and block.name in cfg.excluded_tools:
        return False
    if _CLEARED.search(block.text):
        return False
    return _result_chars(block) > cfg.min_chars


def clear_candidates(msgs: Sequence[Msg], cfg: ClearToolResultsConfig) -> list[tuple[int, int]]:
    """``(message index, block index)`` of results to clear, oldest first.

    The newest ``cfg.keep_results`` results (of tools not excluded) are never candidates.
    """
    seen = 0
    found: list[tuple[int, int]] = []
    for i in range(len(msgs) - 1, -1, -1):
        msg = msgs[i]
        if msg.role != "tool":
            continue
        for j in range(len(msg.content) - 1, -1, -1):
            block = msg.content[j]
            if not isinstance(block, ToolResultBlock):
                continue
            if block.name is not None and block.name in cfg.excluded_tools:
                continue
            seen += 1
            if seen > cfg.keep_results and _clearable(block, cfg):
                found.append((i, j))
    found.reverse()
    return found


def _preview(block: ToolResultBlock, cfg: ClearToolResultsConfig, where: str) -> str:
    text = block.text
    images = (
        0 if isinstance(block.output, str) else sum(isinstance(p, ImageBlock) for p in block.output)
    )
    head_n = cfg.preview_chars // 2
    tail_n = cfg.preview_chars - head_n
    if len(text) <= cfg.preview_chars:
        head, tail = text, ""
    else:
        head, tail = text[:head_n], text[len(text) - tail_n :] if tail_n else ""
    cleared = len(text) - len(head) - len(tail)
    note = f"[{cleared:,} of {len(text):,} characters cleared"
    if images:
        note += f", {images} image{'s' if images > 1 else ''} removed"
    note += f"; the full result is in {where}]"
    return f"{head}\n…\n{note}\n…\n{tail}" if tail else f"{head}\n{note}"


def clear_tool_results(
    msgs: Sequence[Msg],
    candidates: Sequence[tuple[int, int]],
    cfg: ClearToolResultsConfig,
    locate: Locator,
) -> list[Msg]:
    """Replace each candidate result by a head-and-tail preview and a pointer to its original.

    The result keeps its ``tool_use_id``, ``name`` and ``is_error``.
    """
    out = list(msgs)
    by_msg: dict[int, set[int]] = {}
    for i, j in candidates:
        by_msg.setdefault(i, set()).add(j)
    for i, block_indexes in by_msg.items():
        msg = out[i]
        where = locate(msg.id)
        blocks: list[Block] = []
        for j, block in enumerate(msg.content):
            if j in block_indexes and isinstance(block, ToolResultBlock):
                block = ToolResultBlock(
                    tool_use_id=block.tool_use_id,
                    name=block.name,
                    output=_preview(block, cfg, where),
                    is_error=block.is_error,
                )
            blocks.append(block)
        out[i] = msg.with_content(blocks)
    return out
