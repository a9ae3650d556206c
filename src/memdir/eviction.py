"""Tool-result eviction: huge tool outputs go to a file, the context keeps a preview.

A tool result longer than :attr:`ToolResultEvictionConfig.max_result_chars` is written to
``large_tool_results/<session>/<call_id>-<sha256>.txt`` (atomically; identical outputs are stored
once) and replaced in the conversation by a placeholder: the size, the path, how to read the file
in pieces (``read_file`` with ``start_char``), a preview of the head *and* the tail (errors are
usually at the end), the first error-looking lines in between, and for JSON the shape of the
document (keys, array lengths).

Several medium results of one turn that together exceed
:attr:`ToolResultEvictionConfig.max_turn_chars` are evicted largest first until the turn fits.

Evicted results are flagged in their message's metadata (:data:`EVICTED_KEY`), so a second pass
never re-evicts a placeholder, while a genuine output that merely looks like one still is.

Secrets are masked before the output is stored (:attr:`ToolResultEvictionConfig.redactor`, by
default :func:`memdir.redact.redact`), like everything else memdir writes: the file and the
placeholder's previews hold ``[REDACTED:<kind>]`` where the output held a key. The file is what
the model pages through with ``read_file``, so an unmasked key there would reach the context
again on every read, and from there summaries and memory; a task that needs the literal value
can print it with a command whose output is small enough to stay in the context.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memdir.errors import ConfigError, WorkspaceError
from memdir.messages import ImageBlock, Msg, TextBlock, ToolResultBlock
from memdir.redact import redact
from memdir.store.workspace import Workspace

__all__ = [
    "DEFAULT_EXCLUDED_TOOLS",
    "EVICTED_KEY",
    "EvictedResult",
    "EvictionOutcome",
    "ToolResultEvictionConfig",
    "ToolResultEvictor",
]

logger = logging.getLogger(__name__)

EVICTED_KEY = "memdir.evicted"
"""``Msg.metadata`` key: ``{tool_use_id: {"path", "chars", "sha256"}}`` for evicted results."""

DEFAULT_EXCLUDED_TOOLS: frozenset[str] = frozenset(
    {"read_file", "write_file", "edit_file", "list_files", "memory_search", "memory_get"}
)
"""Tools whose output is never evicted: they page their own output (or are tiny), and evicting
``read_file`` would turn reading an evicted file back into an endless loop."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_ERROR_LINE = re.compile(
    r"\b(error|errors|exception|traceback|fatal|failed|failure|panic)\b", re.IGNORECASE
)
_MAX_ERROR_LINES = 5
_MAX_SHAPE_CHARS = 1_500


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvictionConfig:
    """When and where tool results are evicted.

    Attributes:
        max_result_chars: a single result longer than this is evicted.
        preview_chars: characters kept from the head and from the tail (each; at most half
            the output).
        eviction_path: workspace-relative directory for evicted outputs.
        excluded_tool_names: tools whose results are never evicted.
        max_turn_chars: budget for all results of one turn (since the last user message);
            over it, the largest results are evicted first. ``None`` disables the budget.
        redactor: masks secrets in the output before it is stored and previewed; default
            :func:`memdir.redact.redact`, ``None`` stores it as it is.
    """

    max_result_chars: int = 80_000
    preview_chars: int = 2_000
    eviction_path: str = "large_tool_results"
    excluded_tool_names: frozenset[str] = field(default=DEFAULT_EXCLUDED_TOOLS)
    max_turn_chars: int | None = 200_000
    redactor: Callable[[str], str] | None = redact

    def __post_init__(self) -> None:
        names: object = self.excluded_tool_names  # callers pass any collection
        if isinstance(names, str):
            raise ConfigError("excluded_tool_names must be a collection of names, not a string")
        object.__setattr__(self, "excluded_tool_names", frozenset(self.excluded_tool_names))
        if self.max_result_chars < 1:
            raise ConfigError("max_result_chars must be at least 1")
        if self.preview_chars < 0:
            raise ConfigError("preview_chars must not be negative")
        if self.max_turn_chars is not None and self.max_turn_chars < 1:
            raise ConfigError("max_turn_chars must be at least 1, or None to disable the budget")
        if not self.eviction_path.strip():
            raise ConfigError("eviction_path must name a directory inside the workspace")
        if self.redactor is not None and not callable(self.redactor):
            raise ConfigError("redactor must be a function str -> str (or None)")

    @classmethod
    def defaults(cls) -> ToolResultEvictionConfig:
        """The default configuration (80,000 chars, 2,000-char previews, 200,000 per turn)."""
        return cls()


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictedResult:
    """One evicted tool result.

    Attributes:
        tool_use_id: the call whose result was evicted.
        tool_name: the tool's name, when known.
        path: workspace-relative path of the file holding the full output.
        chars: length of the stored output in characters (after masking).
        sha256: first 16 hex digits of the stored output's SHA-256.
        reused: an identical output was already stored; no new file was written.
    """

    tool_use_id: str
    tool_name: str | None
    path: str
    chars: int
    sha256: str
    reused: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictionOutcome:
    """The result of an eviction pass.

    Attributes:
        messages: the conversation; unchanged messages are the same objects as before.
        evicted: what was moved to files in this pass.
    """

    messages: list[Msg]
    evicted: tuple[EvictedResult, ...] = ()


def _sanitize(name: str, fallback: str) -> str:
    cleaned = _UNSAFE.sub("_", name)[:64]
    return cleaned or fallback


def is_evicted(msg: Msg, tool_use_id: str) -> bool:
    """Whether the result of ``tool_use_id`` in ``msg`` is already an eviction placeholder."""
    flags = msg.metadata.get(EVICTED_KEY)
    return isinstance(flags, Mapping) and tool_use_id in flags


class ToolResultEvictor:
    """Moves oversized tool results of one session to files.

    Args:
        workspace: the workspace the files go to.
        config: thresholds and paths (default :meth:`ToolResultEvictionConfig.defaults`).
        session_id: names the subdirectory (sanitised to ``[A-Za-z0-9_-]``).

    Raises:
        ConfigError: ``config.eviction_path`` leaves the workspace.
    """

    def __init__(
        self,
        workspace: Workspace,
        config: ToolResultEvictionConfig | None = None,
        *,
        session_id: str = "default",
    ) -> None:
        self.workspace = workspace
        self.config = config or ToolResultEvictionConfig.defaults()
        self.session_id = session_id
        try:
            root = workspace.relpath(self.config.eviction_path)
        except WorkspaceError as exc:
            raise ConfigError(f"eviction_path must be inside the workspace: {exc}") from exc
        self.directory = f"{root}/{_sanitize(session_id, 'default')}"
        self._checked: dict[str, Msg] = {}

    # -- passes -------------------------------------------------------------------------

    def evict(self, msgs: Sequence[Msg]) -> EvictionOutcome:
        """Evict every result over the single limit, then enforce the current turn's budget.

        Never raises for I/O: a result whose file cannot be written stays as it is (logged).
        Messages are immutable, so a message already checked by this evictor is not looked at
        again: a call on a long conversation costs one dictionary lookup per old message.
        """
        names = _LazyNames(msgs)
        out = list(msgs)
        evicted: list[EvictedResult] = []
        checked = self._checked
        for i, msg in enumerate(out):
            if msg.role != "tool" or checked.get(msg.id) is msg:
                continue
            out[i] = self._evict_in(msg, names, evicted, force=())
            checked[msg.id] = out[i]
        if len(checked) > 2 * len(out) + 64:  # forget messages that left the conversation
            self._checked = {m.id: m for m in out if checked.get(m.id) is m}
        budget = self.config.max_turn_chars
        if budget is not None:
            self._enforce_turn_budget(out, names, evicted, budget)
        return EvictionOutcome(messages=out, evicted=tuple(evicted))

    def evict_message(
        self, msg: Msg, *, tool_names: Mapping[str, str] | None = None, force: bool = False
    ) -> Msg:
        """Evict the results over the single limit in one ``tool`` message.

        Args:
            msg: the message (others than ``tool`` messages are returned as they are).
            tool_names: tool names by call id, for results that do not carry one.
            force: evict every result whose placeholder is shorter than it, whatever its
                size (context-overflow recovery).

        Returns ``msg`` itself when nothing changed.
        """
        if msg.role != "tool":
            return msg
        ids = [b.tool_use_id for b in msg.tool_results] if force else ()
        return self._evict_in(msg, tool_names or {}, [], force=ids)

    def _enforce_turn_budget(
        self,
        out: list[Msg],
        names: Mapping[str, str],
        evicted: list[EvictedResult],
        budget: int,
    ) -> None:
        start = 0
        for i in range(len(out) - 1, -1, -1):
            if out[i].role == "user":
                start = i + 1
                break
        candidates: list[tuple[int, int, str]] = []  # (size, message index, tool_use_id)
        total = 0
        for i in range(start, len(out)):
            msg = out[i]
            if msg.role != "tool":
                continue
            for block in msg.tool_results:
                if is_evicted(msg, block.tool_use_id) or self._excluded(block, names):
                    continue
                size = len(block.text)
                total += size
                candidates.append((size, i, block.tool_use_id))
        if total <= budget:
            return
        candidates.sort(key=lambda c: (-c[0], c[1]))
        for size, index, call_id in candidates:
            if total <= budget:
                break
            before = len(evicted)
            out[index] = self._evict_in(out[index], names, evicted, force=(call_id,))
            if len(evicted) > before:
                total -= size - len(_text_of(out[index], call_id))

    # -- one message --------------------------------------------------------------------

    def _excluded(self, block: ToolResultBlock, names: Mapping[str, str]) -> bool:
        name = block.name or names.get(block.tool_use_id)
        return name is not None and name in self.config.excluded_tool_names

    def _evict_in(
        self,
        msg: Msg,
        names: Mapping[str, str],
        evicted: list[EvictedResult],
        *,
        force: Collection[str],
    ) -> Msg:
        new_blocks: list[Any] = []
        flags: dict[str, Any] = {}
        for block in msg.content:
            if (
                not isinstance(block, ToolResultBlock)
                or is_evicted(msg, block.tool_use_id)
                or self._excluded(block, names)
            ):
                new_blocks.append(block)
                continue
            text = block.text
            forced = block.tool_use_id in force
            if len(text) <= self.config.max_result_chars and not forced:
                new_blocks.append(block)
                continue
            redactor = self.config.redactor
            stored = redactor(text) if redactor is not None else text
            data = stored.encode("utf-8", errors="surrogatepass")
            rel, digest, reused = self._locate(block.tool_use_id, data)
            placeholder = render_placeholder(stored, rel, self.config.preview_chars)
            if forced and len(placeholder) >= len(text):
                new_blocks.append(block)  # a preview would not save anything
                continue
            if not reused and not self._write(rel, data, block.tool_use_id):
                new_blocks.append(block)
                continue
            record = EvictedResult(
                tool_use_id=block.tool_use_id,
                tool_name=block.name or names.get(block.tool_use_id),
                path=rel,
                chars=len(stored),
                sha256=digest,
                reused=reused,
            )
            images = (
                [p for p in block.output if isinstance(p, ImageBlock)]
                if isinstance(block.output, list)
                else []
            )
            output: str | list[TextBlock | ImageBlock] = (
                [TextBlock(text=placeholder), *images] if images else placeholder
            )
            new_blocks.append(dataclasses.replace(block, output=output))
            flags[block.tool_use_id] = {
                "path": record.path,
                "chars": record.chars,
                "sha256": record.sha256,
            }
            evicted.append(record)
        if not flags:
            return msg
        previous = msg.metadata.get(EVICTED_KEY)
        merged = {**(dict(previous) if isinstance(previous, Mapping) else {}), **flags}
        return dataclasses.replace(
            msg, content=tuple(new_blocks), metadata={**msg.metadata, EVICTED_KEY: merged}
        )

    def _locate(self, call_id: str, data: bytes) -> tuple[str, str, bool]:
        """The file for ``data``: ``(rel path, digest, already stored)``."""
        digest = hashlib.sha256(data).hexdigest()[:16]
        # Identical output already stored (another call, or a re-run): point at that file.
        try:
            entries = self.workspace.listdir(self.directory)
        except (WorkspaceError, OSError):
            entries = []
        for existing in entries:
            if (
                existing.kind == "file"
                and existing.name.endswith(f"-{digest}.txt")
                and existing.stat is not None
                and existing.stat.size == len(data)
            ):
                return f"{self.directory}/{existing.name}", digest, True
        return f"{self.directory}/{_sanitize(call_id, 'call')}-{digest}.txt", digest, False

    def _write(self, rel: str, data: bytes, call_id: str) -> bool:
        try:
            self.workspace.write_bytes(rel, data)
        except (WorkspaceError, OSError) as exc:
            logger.warning(
                "tool result %s (%d bytes) could not be evicted to %s; kept in context: %s",
                call_id,
                len(data),
                rel,
                exc,
            )
            return False
        return True


class _LazyNames(Mapping[str, str]):
    """Tool names by call id, collected only if a result without a name needs one."""

    def __init__(self, msgs: Sequence[Msg]) -> None:
        self._msgs = msgs
        self._names: dict[str, str] | None = None

    def _all(self) -> dict[str, str]:
        if self._names is None:
            self._names = {
                call.id: call.name
                for m in self._msgs
                if m.role == "assistant"
                for call in m.tool_uses
            }
        return self._names

    def __getitem__(self, key: str) -> str:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def _text_of(msg: Msg, call_id: str) -> str:
    for block in msg.tool_results:
        if block.tool_use_id == call_id:
            return block.text
    return ""


# -- placeholder --------------------------------------------------------------------------


def render_placeholder(text: str, path: str, preview_chars: int) -> str:
    """The text that replaces an evicted output (deterministic; no locale-dependent formatting).

    Args:
        text: the full output.
        path: workspace-relative path of the stored copy.
        preview_chars: characters shown from the head and from the tail (each).
    """
    n_lines = text.count("\n") + 1 if text else 0
    window = 20_000
    lines = [
        f"[Tool output too large for the context: {len(text):,} characters, {n_lines:,} lines. "
        f"Saved in full to `{path}`.]",
        f'Read it in pieces with read_file(path="{path}", start_char=0, max_chars={window}) '
        f"and continue from the start_char it reports; or by lines with start_line/num_lines.",
    ]
    shape = _json_shape(text)
    if shape is not None:
        lines += ["", "JSON shape:", shape]
    keep = min(preview_chars, len(text) // 2)
    if keep > 0:
        head, tail = text[:keep], text[-keep:]
        lines += ["", f"--- first {keep:,} characters ---", head]
        errors = _error_lines(text, keep, len(text) - keep) if shape is None else []
        if errors:
            lines += ["", "--- lines in between that mention errors ---", *errors]
        lines += ["", f"--- last {keep:,} characters ---", tail]
    return "\n".join(lines)


def _error_lines(text: str, start: int, end: int) -> list[str]:
    found: list[str] = []
    middle = text[start:end]
    line_no = text.count("\n", 0, start) + 1
    for offset, line in enumerate(middle.split("\n")):
        if _ERROR_LINE.search(line):
            shown = line.strip()
            if len(shown) > 200:
                shown = shown[:200] + "…"
            found.append(f"line {line_no + offset:,}: {shown}")
            if len(found) >= _MAX_ERROR_LINES:
                break
    return found


def _json_shape(text: str) -> str | None:
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    shape = _shape(value, depth=0)
    return shape if len(shape) <= _MAX_SHAPE_CHARS else shape[:_MAX_SHAPE_CHARS] + "…"


def _shape(value: object, *, depth: int) -> str:
    if isinstance(value, dict):
        if depth >= 3:
            return f"object({len(value)} keys)"
        items = list(value.items())
        parts = [
            f"{json.dumps(k, ensure_ascii=False)}: {_shape(v, depth=depth + 1)}"
            for k, v in items[:20]
        ]
        if len(items) > 20:
            parts.append(f"… {len(items) - 20} more keys")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        if not value:
            return "array[0]"
        return f"array[{len(value):,}] of {_shape(value[0], depth=depth + 1)}"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"
