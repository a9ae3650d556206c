"""``MemdirOffloader``: AgentScope's ``Offloader`` protocol on a memdir workspace.

AgentScope calls it when its own compression drops messages (``offload_context``), when it cuts
an oversized tool result (``offload_tool_result``) and for input files its model cannot read
(``offload_data_block``). Everything lands where memdir keeps it, masked for secrets:

* the messages are appended to ``sessions/<session>.log.jsonl`` (one locked, fsync'd append;
  a message already there is not written twice), the log every other memdir reader uses;
* the cut tool result goes to ``large_tool_results/<session>/<call id>-<sha256>.txt`` (the same
  output is stored once), readable with ``read_file`` in pieces;
* inline data goes to ``large_tool_results/data/<sha256>.<ext>``, returned as a
  ``workspace:///`` URL like AgentScope's own workspaces do.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import mimetypes
import os
import re
from collections.abc import Callable
from typing import Any

from agentscope.message import Base64Source, DataBlock, Msg, ToolResultBlock, URLSource
from pydantic import AnyUrl

from memdir.adapters.agentscope._convert import to_memdir
from memdir.errors import WorkspaceError
from memdir.redact import redact as default_redact
from memdir.sessions import SessionLog
from memdir.store.workspace import LARGE_RESULTS_DIR, Workspace

__all__ = ["MemdirOffloader", "memdir_session_id"]

_SESSION_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def memdir_session_id(session_id: str) -> str:
    """The memdir session id for an AgentScope one: itself when valid, else a stable hash."""
    if isinstance(session_id, str) and _SESSION_ID.fullmatch(session_id):
        return session_id
    digest = hashlib.sha256(str(session_id).encode("utf-8", "surrogatepass")).hexdigest()
    return f"agentscope-{digest[:24]}"


class MemdirOffloader:
    """AgentScope's ``Offloader`` on a memdir workspace (see the module docstring).

    Args:
        workspace: the workspace (or its path).
        redactor: masks secrets in what is written (default :func:`memdir.redact.redact`;
            ``None`` writes as it is).
        namespace: the caller's namespace in the workspace.

    Example::

        agent = Agent(..., offloader=MemdirOffloader("~/agent-ws"))
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        redactor: Callable[[str], str] | None = default_redact,
        namespace: str | None = None,
    ) -> None:
        self.workspace = Workspace.coerce(workspace, namespace)
        self.redactor = redactor

    def session_log(self, session_id: str) -> SessionLog:
        """The session log an AgentScope session's messages go to."""
        return SessionLog(self.workspace, memdir_session_id(session_id), redact=self.redactor)

    async def offload_data_block(self, block: DataBlock) -> DataBlock:
        """Store an inline (base64) block's data; return it as a ``workspace:///`` URL block."""
        if not isinstance(block.source, Base64Source):
            return block
        rel = await asyncio.to_thread(self._store_data, block.source)
        source = URLSource(url=AnyUrl(f"workspace:///{rel}"), media_type=block.source.media_type)
        return DataBlock(id=block.id, name=block.name, source=source)

    def _store_data(self, source: Base64Source) -> str:
        digest = hashlib.sha256(source.data.encode("ascii", "replace")).hexdigest()
        ext = mimetypes.guess_extension(source.media_type) or ".bin"
        rel = f"{LARGE_RESULTS_DIR}/data/{digest}{ext}"
        if self.workspace.stat(rel) is None:
            try:
                data = base64.b64decode(source.data, validate=False)
            except (binascii.Error, ValueError) as exc:
                raise WorkspaceError(f"the data block is not valid base64: {exc}") from None
            self.workspace.create_text(rel, data)  # the same data from elsewhere: kept once
        return rel

    async def offload_context(self, session_id: str, msgs: list[Msg]) -> str:
        """Append ``msgs`` to the session log; return the log's path (see :meth:`shown_path`)."""
        copies = [await self._without_inline_data(msg) for msg in msgs]
        log = self.session_log(session_id)
        await asyncio.to_thread(log.append, to_memdir(copies))
        return self.shown_path(log.rel_path)

    def shown_path(self, rel: str) -> str:
        """The path the agent is given for a file it offloaded: absolute in a workspace on
        disk, workspace-relative in PostgreSQL (``read_file`` reads either)."""
        return str(self.workspace.root / rel) if self.workspace.is_local else rel

    async def _without_inline_data(self, msg: Msg) -> Msg:
        """A copy of ``msg`` whose inline data blocks are stored as files (the log stays small)."""
        if not any(_has_inline(b) for b in msg.content):
            return msg
        copy = msg.model_copy(deep=True)
        for i, block in enumerate(copy.content):
            if isinstance(block, DataBlock):
                copy.content[i] = await self.offload_data_block(block)
            elif isinstance(block, ToolResultBlock) and isinstance(block.output, list):
                block.output = [
                    await self.offload_data_block(p) if isinstance(p, DataBlock) else p
                    for p in block.output
                ]
        return copy

    async def offload_tool_result(self, session_id: str, tool_result: ToolResultBlock) -> str:
        """Store a tool result's text as a file; return its path (see :meth:`shown_path`)."""
        parts: list[str] = []
        outputs: list[Any] = (
            [tool_result.output] if isinstance(tool_result.output, str) else tool_result.output
        )
        for part in outputs:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, DataBlock):
                stored = await self.offload_data_block(part)
                url = stored.source.url if isinstance(stored.source, URLSource) else ""
                parts.append(f"<data url='{url}' media_type='{stored.source.media_type}'/>")
            else:
                parts.append(getattr(part, "text", ""))
        text = "".join(parts)
        if self.redactor is not None:
            text = self.redactor(text)
        sid = memdir_session_id(session_id)
        rel = await asyncio.to_thread(self._store_result, sid, tool_result.id, text)
        return self.shown_path(rel)

    def _store_result(self, session_id: str, call_id: str, text: str) -> str:
        data = text.encode("utf-8", "replace")
        digest = hashlib.sha256(data).hexdigest()[:16]
        name = f"{_UNSAFE.sub('_', call_id)[:64] or 'call'}-{digest}.txt"
        rel = f"{LARGE_RESULTS_DIR}/{session_id}/{name}"
        self.workspace.create_text(rel, data)  # named by its content: an existing file is it
        return rel


def _has_inline(block: Any) -> bool:
    if isinstance(block, DataBlock):
        return isinstance(block.source, Base64Source)
    if isinstance(block, ToolResultBlock) and isinstance(block.output, list):
        return any(
            isinstance(p, DataBlock) and isinstance(p.source, Base64Source) for p in block.output
        )
    return False
