"""The Memory Agent's runtimes (installed as ``cmrunner.agentrt``): what turns one job's task into
one submitted decision by way of a model, beside the Writer's jobs and commit path.

Holds the HTTP runtime (``agent``: the tool loop; ``wire``: Responses and Chat Completions;
``netclient`` with ``noproxy`` and ``sse``: the outbound client; ``errors_map``, ``limits`` and
``boundedjson``: failure classes and what a provider may send), the agent-CLI runtime
(``agentcli``: Claude Code, Codex or Gemini CLI run confined, with the stdio MCP relay), what both
share (``interface``: ``MemoryAgentPort``, ``JobTools``, ``AgentError``; ``meter`` and
``tokencount``: every request checked against the spend caps and written to the ledger;
``budget``: the request budget the runtimes enforce and the Writer sizes jobs by; the system
prompt ``memory_agent.md``), and ``nettest``: ``cm network-test``'s one probe of the configured
runtime.

May import: secrets and core (httpx2 and pydantic are the runtimes' own). Never the Writer
(``writer_proc``): the dependency is one-way. The Writer builds a ``tools.Toolbox`` per attempt
and passes it in as ``interface.JobTools``; the tool handlers stay with the Writer because they are
the decision contract's front door (coverage, fencing, validation against the snapshot), and a
runtime only relays calls to them. Nor capture, reading or the hooks: a runtime sees a job only
through its tools.
"""
