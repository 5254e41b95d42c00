"""Capture: from a host event to a sealed batch of observations, durably and fast.

Holds: admission of one hook or capture event (``admission``, byte limits in ``capacity``), the
observations table (``observations``), Codex rollout parsing (``rollout``), the per-session cache
and sealing (``sessions``), the Codex inbox tables (``codex_inbox``), isolated sessions
(``failures``), and the drain's inbox consumers for Codex and Pi (``codex_consumer``, ``pi_inbox``).

May import: the standard library and ``cmrunner.core``. Never the Writer, click, pydantic,
httpx2, mcp or textual: hooks and captures run this under a host timeout.
"""
