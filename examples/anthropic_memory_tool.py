"""Claude's memory tool on a memdir workspace, offline.

The commands below are what Claude sends when it uses the memory tool (memory_20250818); with
the anthropic SDK, pass the tool to ``client.beta.messages.tool_runner(tools=[tool], ...)``
instead and the runner sends them. Run: ``python examples/anthropic_memory_tool.py``.
"""

from __future__ import annotations

import tempfile

from memdir import Workspace
from memdir.adapters.anthropic import MemdirMemoryTool
from memdir.tools import memory_search

ws = Workspace(tempfile.mkdtemp(prefix="memdir-claude-"))
tool = MemdirMemoryTool(ws)
today = f"/memories/{ws.today().isoformat()}.md"

commands = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/preferences.md", "file_text": "- Prefers tea.\n"},
    {
        "command": "str_replace",
        "path": "/memories/preferences.md",
        "old_str": "tea",
        "new_str": "green tea, no sugar",
    },
    {
        "command": "create",
        "path": today,
        "file_text": "We decided to ship the coupon API on Friday.",
    },
    {"command": "str_replace", "path": today, "old_str": "Friday", "new_str": "Monday"},
    {"command": "view", "path": "/memories/../etc/passwd"},
    {"command": "view", "path": "/memories"},
]
for i, command in enumerate(commands, start=1):
    block = {"type": "tool_use", "id": f"toolu_{i}", "name": "memory", "input": command}
    result = tool.tool_result(block)
    flag = " (is_error)" if result.get("is_error") else ""
    print(f"> {command['command']} {command.get('path')}{flag}\n{result['content']}\n")

print("memory_search('coupon ship'):")
print(memory_search("coupon ship", workspace=ws))
