"""Capture: from a host event to a sealed batch of observations, durably and fast.

Holds: admission of one hook or capture event (``admission``), the observations table
(``observations``), Codex rollout parsing (``rollout``), the per-session cache and sealing
(``sessions``), and the drain's inbox consumers for Codex and Pi (``codex_inbox``, ``pi_inbox``).

May import: the standard library and ``cmrunner.core``. Never the Writer, click, pydantic,
httpx2, mcp or textual: hooks and captures run this under a host timeout.
"""
