"""The hook events of Claude Code and Gemini CLI that cm handles, and those it knows and ignores.

One list per host, read by the hooks (``cmrunner.hooks.claude``, ``cmrunner.hooks.gemini``, which
implement them) and by ``cm agents install`` (``cmrunner.manage.integrations.jsonhosts``, which wires
them into the host's settings), so the two never drift. It lives in capture because both rooms may
import it (manage may not import hooks). Each tuple of cm's events is in the order start, prompt,
stop, compaction, end. Stdlib only (a hook path).
"""

from __future__ import annotations

CLAUDE_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
# Every other event Claude Code 2.1.328 documents (hosts-more.md §1.2): accepted, nothing stored.
CLAUDE_IGNORED = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification",
                  "UserPromptExpansion", "StopFailure", "SubagentStart", "SubagentStop", "PostCompact",
                  "PreModelSwitch", "PostModelSwitch", "PermissionRequest", "PermissionDenied", "Setup",
                  "TeammateIdle", "TaskCreated", "TaskCompleted", "Elicitation", "ElicitationResult", "ConfigChange",
                  "WorktreeCreate", "WorktreeRemove", "InstructionsLoaded", "CwdChanged", "FileChanged",
                  "DirectoryAdded", "MessageDisplay")
GEMINI_EVENTS = ("SessionStart", "BeforeAgent", "AfterAgent", "PreCompress", "SessionEnd")
# Every other event Gemini CLI 0.61 documents (hosts-more.md §3).
GEMINI_IGNORED = ("BeforeModel", "AfterModel", "BeforeToolSelection", "BeforeTool", "AfterTool", "Notification")
