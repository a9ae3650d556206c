"""An agent on a scripted model that compacts, offloads and evicts within a few turns.

The model answers a fixed summary when asked to summarize, ``NO_REPLY`` to every other task,
a call of the ``dump`` tool when the user asks for the log, and an echo of the user otherwise.
Used by the store pipeline tests and by the forget tests' canaries.
"""

from __future__ import annotations

from memdir import HarnessAgent
from memdir.compaction import CompactionConfig
from memdir.eviction import ToolResultEvictionConfig
from memdir.messages import Msg, ToolUseBlock
from memdir.testing import FunctionModel, ModelCall
from memdir.workspace import Workspace


def scripted_model(summary: str, *, echo: int) -> FunctionModel:
    """The scripted model; ``summary`` is the body of its summary's SUMMARY section, ``echo``
    how many characters of the user's last message its plain answer repeats."""

    def model(call: ModelCall) -> Msg | str:
        if call.task == "summarize":
            return (
                "## SESSION INTENT\nMigrate the shop.\n"
                f"## SUMMARY\n{summary}\n"
                "## ARTIFACTS\nNone\n## NEXT STEPS\nRun the backfill."
            )
        if call.task is not None:
            return "NO_REPLY"
        last = call.messages[-1]
        if last.role == "user" and "log" in last.text:
            return Msg.assistant(tool_calls=[ToolUseBlock(id="c1", name="dump", input={})])
        return f"ok: {last.text[:echo]}"

    return FunctionModel(model)


def compacting_agent(ws: Workspace, *, summary: str, tool_output: str, echo: int) -> HarnessAgent:
    """An agent on :func:`scripted_model` over ``ws`` whose ``dump`` tool returns
    ``tool_output``: it compacts after six messages (keeping two) and evicts large tool
    results; no memory flush, no background maintenance."""

    def dump() -> str:
        """Dump the build log."""
        return tool_output

    return HarnessAgent(
        model=scripted_model(summary, echo=echo),
        workspace=ws,
        tools=[dump],
        compaction=CompactionConfig(trigger_messages=6, keep_messages=2),
        tool_result_eviction=ToolResultEvictionConfig.defaults(),
        memory_flush=False,
        maintenance=None,
    )
