"""Claude's memory tool (``memory_20250818``) on a memdir workspace.

The Claude API's memory tool is client-side: Claude sends ``view`` / ``create`` /
``str_replace`` / ``insert`` / ``delete`` / ``rename`` commands on paths under ``/memories``
and your code carries them out. :class:`MemdirMemoryTool` (and :class:`AsyncMemdirMemoryTool`)
carries them out on a memdir workspace, with the answers and error texts of the ``anthropic``
SDK's reference implementation, and memdir's rules on top:

==========================  ========================  =================================
``/memories/...``           workspace file            what the tool may do
==========================  ========================  =================================
``MEMORY.md``               ``MEMORY.md``             edit (atomic rewrite, old version kept)
``<name>.md``               ``memory/<name>.md``      create, edit, rename, delete (kept)
``YYYY-MM-DD.md``           ``memory/YYYY-MM-DD.md``  today's: append at its end; others: read
``archive/...``             ``memory/archive/...``    read
==========================  ========================  =================================

Every write masks secrets (:mod:`memdir.redact`) and re-indexes the file, so ``memory_search``
(and ``memdir search``) find it at once. The ``anthropic`` package is needed only to run the tool
with its tool runner (``pip install 'memdir[anthropic]'``); dicts work without it::

    from memdir.adapters.anthropic import MemdirMemoryTool

    tool = MemdirMemoryTool("~/agent-ws")
    tools = [tool.to_dict()]                  # {"type": "memory_20250818", "name": "memory"}
    result = tool.tool_result(tool_use_block) # {"type": "tool_result", "tool_use_id": ..., ...}
"""

from __future__ import annotations

from memdir.adapters.anthropic._paths import MemoryToolError
from memdir.adapters.anthropic._tool import (
    TOOL_NAME,
    TOOL_TYPE,
    AsyncMemdirMemoryTool,
    MemdirMemoryTool,
)

__all__ = ["TOOL_NAME", "TOOL_TYPE", "AsyncMemdirMemoryTool", "MemdirMemoryTool", "MemoryToolError"]
