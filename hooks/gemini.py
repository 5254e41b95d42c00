"""``cm hook gemini --home <abs>``: one Gemini CLI hook event (see ``cmrunner.hooks.agenthook``).

Gemini CLI (hosts-more.md §3): stdout must be JSON only; BeforeAgent carries the typed ``prompt``,
AfterAgent the final ``prompt_response``; SessionEnd is best effort (the CLI does not wait), so a
session whose end never arrives is sealed by the drain's exit detection. ``EVENTS`` is what
``cm agents install gemini`` wires; the other events Gemini CLI documents are ignored.
"""

from __future__ import annotations

from cmrunner.capture import hostevents
from cmrunner.hooks import agenthook

EVENTS = hostevents.GEMINI_EVENTS
IGNORED = hostevents.GEMINI_IGNORED
# Gemini CLI takes the reader's whole block: ``reader.INJECTION_LIMIT`` (a test holds them equal), not
# imported, so per-turn events do not load the reader (issue 35).
CONTEXT_LIMIT = 64 * 1024
SPEC = agenthook.HostSpec("gemini", "Gemini CLI", EVENTS, "prompt", "prompt_response", IGNORED,
                          CONTEXT_LIMIT, "cm hook gemini --home <absolute path>", chat_record=True)


def main(argv: list[str]) -> int:
    return agenthook.main(SPEC, argv)
