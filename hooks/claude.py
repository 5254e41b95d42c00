"""``cm hook claude --home <abs>``: one Claude Code hook event (see ``cmrunner.hooks.agenthook``).

Claude Code (hosts-more.md §1): the event is the payload's ``hook_event_name``; the typed prompt
is UserPromptSubmit's ``prompt``; Stop carries ``last_assistant_message``; SessionEnd has about
1.5 s, so it only queues. ``EVENTS`` is what ``cm agents install claude-code`` wires; the other
events Claude Code documents are accepted and ignored without touching the store.
"""

from __future__ import annotations

from cmrunner.capture import hostevents
from cmrunner.hooks import agenthook

EVENTS = hostevents.CLAUDE_EVENTS
IGNORED = hostevents.CLAUDE_IGNORED
# Claude Code keeps about 10,000 characters of additionalContext whole and cuts more to a preview.
CONTEXT_LIMIT = 9 * 1024
SPEC = agenthook.HostSpec("claude-code", "Claude Code", EVENTS, "prompt", "last_assistant_message", IGNORED,
                          CONTEXT_LIMIT, "cm hook claude --home <absolute path>")


def main(argv: list[str]) -> int:
    return agenthook.main(SPEC, argv)
