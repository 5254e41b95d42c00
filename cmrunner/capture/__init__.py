"""Capture: from a host event to a sealed batch of observations, durably and fast.

Holds: admission of one hook or capture event (``admission``, byte limits in ``capacity``), the
observations table (``observations``), what each imported source held section by section
(``importsections``), Codex rollout parsing (``rollout``), the per-session cache
and sealing (``sessions``), the Codex inbox tables (``codex_inbox``), isolated sessions
(``failures``), the drain's inbox consumers for Codex and Pi (``codex_consumer``, ``pi_inbox``), and
the count of one scope's user turns not yet in memory, across all of them (``waiting``).

May import: the standard library and ``cmrunner.core``. Never the Writer, click, pydantic,
httpx2, mcp or textual: hooks and captures run this under a host timeout.
"""
