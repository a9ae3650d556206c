"""memdir inside the agent frameworks people already use.

One module per framework, each needing that framework as an optional extra (it is imported
only when you import the module):

* :mod:`memdir.adapters.openai_agents`: OpenAI Agents SDK (``pip install 'memdir[openai-agents]'``)
* :mod:`memdir.adapters.pydantic_ai`: Pydantic AI (``pip install 'memdir[pydantic-ai]'``)
* :mod:`memdir.adapters.agentscope`: AgentScope 2.x (``pip install 'memdir[agentscope]'``)
* :mod:`memdir.adapters.anthropic`: Claude's memory tool (the ``anthropic`` SDK is optional)
* :mod:`memdir.adapters.claude_code`: Claude Code hooks (``memdir hook claude-code``; no extra)

Every adapter takes a :class:`~memdir.Workspace` (or its path) and memdir's own configuration
objects (:class:`~memdir.compaction.CompactionConfig`,
:class:`~memdir.eviction.ToolResultEvictionConfig`, ...) with memdir's defaults. See
``docs/adapters/``.
"""
