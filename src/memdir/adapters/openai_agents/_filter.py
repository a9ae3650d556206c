"""The ``call_model_input_filter`` that puts memory in the instructions and evicts big outputs."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from agents.run_config import CallModelData, ModelInputData

from memdir.adapters.openai_agents._convert import items_to_msgs, msg_to_items
from memdir.adapters.openai_agents._session import MemdirSession
from memdir.agent import WorkspaceContextHook
from memdir.errors import ConfigError
from memdir.eviction import ToolResultEvictionConfig, ToolResultEvictor
from memdir.store.workspace import Workspace

__all__ = ["MemdirInputFilter", "memdir_input_filter"]

_OUTPUT_TYPES = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)
_DEFAULT_EVICTION = ToolResultEvictionConfig()


class MemdirInputFilter:
    """A ``RunConfig.call_model_input_filter``: memory in, huge tool outputs out, every call.

    Before each model call it

    1. with a :class:`MemdirSession`, sends the session's window in place of the items the SDK
       holds (so a compaction in the middle of a long run takes effect at the next call);
    2. moves tool outputs over ``tool_result_eviction.max_result_chars`` (or the turn's
       outputs over ``max_turn_chars``, largest first) to ``large_tool_results/`` and sends a
       preview that says how to read the file with ``read_file``;
    3. appends the date, memory guidance, ``AGENTS.md`` and a budgeted ``MEMORY.md`` to the
       instructions, as memdir's agent does (``WorkspaceContextHook``).

    Args:
        workspace: the workspace (default: the session's).
        session: the run's :class:`MemdirSession`, if it uses one.
        tool_result_eviction: eviction settings; ``None`` sends outputs as they are.
        inject_memory: put ``MEMORY.md`` in the instructions.
        inject_agents_md: put ``AGENTS.md`` in the instructions.
        memory_tools: the agent has memdir's memory tools (changes the guidance).
        max_context_tokens: the budget of ``AGENTS.md`` and ``MEMORY.md`` together.
        namespace: the caller's namespace in the workspace.

    Raises:
        ConfigError: neither a workspace nor a session, or bad settings.
    """

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        session: MemdirSession | None = None,
        tool_result_eviction: ToolResultEvictionConfig | None = _DEFAULT_EVICTION,
        inject_memory: bool = True,
        inject_agents_md: bool = True,
        memory_tools: bool = True,
        max_context_tokens: int = 8_000,
        namespace: str | None = None,
    ) -> None:
        if session is not None and not isinstance(session, MemdirSession):
            raise ConfigError("session must be a MemdirSession")
        if workspace is None:
            if session is None:
                raise ConfigError("memdir_input_filter needs a workspace or a MemdirSession")
            self.workspace = session.workspace
        else:
            self.workspace = Workspace.coerce(workspace, namespace)
        self.session = session
        self.session_id = session.session_id if session is not None else None
        self.context = WorkspaceContextHook(
            self.workspace,
            max_context_tokens=max_context_tokens,
            memory_tools=memory_tools,
            auto_memory=session is not None and session.flush_manager is not None,
            agents_md=inject_agents_md,
            memory_md=inject_memory,
        )
        self.evictor: ToolResultEvictor | None = None
        if tool_result_eviction is not None:
            if session is not None and session.evictor is not None:
                self.evictor = session.evictor
            else:
                self.evictor = ToolResultEvictor(
                    self.workspace, tool_result_eviction, session_id=self.session_id or "default"
                )

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The model input with the window, evicted outputs and memory in the instructions."""
        items: list[Any] = list(data.model_data.input)
        if self.session is not None:
            view = self.session.model_input(items)
            if view is not None:
                items = view
        if self.evictor is not None and self._over_budget(items):
            items = self._evict(items)
        base = data.model_data.instructions or ""
        sep = "" if not base else ("\n" if base.endswith("\n") else "\n\n")
        instructions = f"{base}{sep}{self.context.render(self.session_id)}"
        if self.session is not None:
            self.session.system_hint = instructions
        return ModelInputData(input=items, instructions=instructions)

    def _over_budget(self, items: Sequence[Mapping[str, Any]]) -> bool:
        assert self.evictor is not None
        config = self.evictor.config
        total = 0
        for item in reversed(items):
            if item.get("role") == "user":
                break
            if item.get("type") in _OUTPUT_TYPES:
                output = item.get("output")
                size = len(output) if isinstance(output, str) else len(str(output))
                if size > config.max_result_chars:
                    return True
                total += size
        return config.max_turn_chars is not None and total > config.max_turn_chars

    def _evict(self, items: list[Any]) -> list[Any]:
        assert self.evictor is not None
        msgs = items_to_msgs(items)
        outcome = self.evictor.evict(msgs)
        if not outcome.evicted:
            return items
        out: list[Any] = []
        for item, before, after in zip(items, msgs, outcome.messages, strict=True):
            out.extend([item] if after is before else msg_to_items(after))
        return out


def memdir_input_filter(
    workspace: Workspace | str | os.PathLike[str] | None = None,
    **options: Any,
) -> MemdirInputFilter:
    """``RunConfig(call_model_input_filter=memdir_input_filter(ws, session=session))``.

    See :class:`MemdirInputFilter` for the options.
    """
    return MemdirInputFilter(workspace, **options)
