"""The agent-CLI runtime of the Memory Agent: Claude Code, Codex or Gemini CLI, run headless with
cm's Memory Agent tools and nothing else (issue 33).

Modules: ``hosts`` (each CLI's confined command line, environment and output: usage and failure
classes), ``runtime`` (``AgentCliRuntime``, the ``MemoryAgentPort`` that runs one attempt: private
working directory, the job-scoped tool service, deadline, process-group kill, the verdict from the
submission alone) and ``relay`` (``cm memory-agent-mcp``: the stdio MCP server the CLI starts,
which forwards each tool call to the attempt that owns it and holds nothing itself).

May import: what ``cmrunner.agentrt`` may (secrets, core) and the HTTP runtime's interface, meter,
budget, limits and error map beside it; never the Writer (the job's tools arrive as
``interface.JobTools``). ``relay`` is stdlib plus ``cmrunner.core`` only: it runs in
a process the CLI starts, beside nothing of the Writer.
"""
