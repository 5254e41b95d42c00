"""The agent-CLI runtime of the Memory Agent: Claude Code, Codex or Gemini CLI, run headless with
cm's Memory Agent tools and nothing else (issue 33).

Modules: ``hosts`` (each CLI's confined command line, environment and output: usage and failure
classes), ``runtime`` (``AgentCliRuntime``, the ``MemoryAgentPort`` that runs one attempt: private
working directory, the job-scoped tool service, deadline, process-group kill, the verdict from the
submission alone) and ``relay`` (``cm memory-agent-mcp``: the stdio MCP server the CLI starts,
which forwards each tool call to the attempt that owns it and holds nothing itself).

May import: what ``writer_proc`` may (capture, reading, secrets, core) and ``writer_proc``'s tool
handlers, port, meter and error map. ``relay`` is stdlib plus ``cmrunner.core`` only: it runs in
a process the CLI starts, beside nothing of the Writer.
"""
