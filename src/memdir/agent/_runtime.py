"""What the agent needs around its loop: session locks, background tasks, a loop for sync code.

* :func:`session_lock` serialises calls on one session: an asyncio lock in the process and the
  workspace lock ``agent-session-<id>`` across processes (polled, so the event loop never
  blocks; :class:`SessionBusyError` after the timeout).
* :class:`BackgroundTasks` tracks post-call work (memory flush) so it can be drained on close.
* :class:`SyncRunner` runs coroutines for synchronous callers on a private event-loop thread,
  where background work can go on after a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any, TypeAlias, TypeVar

from memdir.errors import ConfigError, MemdirError
from memdir.messages import Msg
from memdir.store.workspace import Workspace

__all__ = [
    "AgentInput",
    "BackgroundTasks",
    "SessionBusyError",
    "SyncRunner",
    "coerce_input",
    "session_lock",
]

logger = logging.getLogger("memdir.agent")

_T = TypeVar("_T")

AgentInput: TypeAlias = str | Msg | Sequence[Msg] | None
"""What a call takes: text, a message, several messages, or ``None`` (resume)."""


class SessionBusyError(MemdirError):
    """Another process is running a call on the same session."""


@contextlib.asynccontextmanager
async def session_lock(
    local: asyncio.Lock, workspace: Workspace, session_id: str, *, timeout: float
) -> AsyncIterator[None]:
    """Hold ``local`` and the workspace lock of the session (waiting up to ``timeout`` s)."""
    name = f"agent-session-{session_id}"
    if len(name) > 100:
        name = "agent-session-" + hashlib.sha256(session_id.encode()).hexdigest()[:40]
    async with local, contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(workspace.async_lock(name, timeout=timeout))
        except MemdirError as exc:
            raise SessionBusyError(
                f"session {session_id!r} is in use by another process; wait for its call "
                "to finish or use another session_id"
            ) from exc
        yield


class BackgroundTasks:
    """Tasks started after a reply, tracked until they finish."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Start ``coro`` on the running loop; failures are logged, never raised."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            logger.warning(
                "background task %s failed: %s: %s", task.get_name(), type(exc).__name__, exc
            )

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for every task (at most ``timeout`` s); whether all finished."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._tasks:  # a finishing task may start another
            left = None if deadline is None else max(0.0, deadline - loop.time())
            _, pending = await asyncio.wait(set(self._tasks), timeout=left)
            if pending and deadline is not None and loop.time() >= deadline:
                return False
        return True

    async def cancel_all(self) -> None:
        """Cancel what is still running and wait for it to stop."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class SyncRunner:
    """A private event loop on a daemon thread, for synchronous callers."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """Whether the thread is running."""
        return self._loop is not None

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the private loop and wait for its result.

        Raises:
            ConfigError: called from inside a running event loop (use ``await`` there).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise ConfigError("the sync API cannot run inside an event loop; use the async one")
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        """Stop the loop and its thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
        self._loop = self._thread = None


def coerce_input(value: AgentInput) -> list[Msg]:
    """The messages of a call's input (``None``: none, i.e. resume)."""
    if value is None:
        return []
    if isinstance(value, str):
        if not value.strip():
            raise ConfigError("the input is blank")
        return [Msg.user(value)]
    if isinstance(value, Msg):
        value = [value]
    msgs = list(value)
    for msg in msgs:
        if not isinstance(msg, Msg):
            raise ConfigError(f"input must be text or Msg objects, not {type(msg).__name__}")
        if msg.role == "system":
            raise ConfigError("pass the system prompt as HarnessAgent(system_prompt=...)")
    return msgs
