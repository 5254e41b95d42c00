"""The constants of ``config.json`` shared by its model and its light reader: version, enums, defaults.

Contract: plain data, no behaviour. ``cmrunner.core.configmodel`` (the validator) and
``cmrunner.core.config`` (the reader the hooks use) both import it, so neither imports the other
at module level. Stdlib only.
"""

from __future__ import annotations

SCHEMA_VERSION = 2
PROVENANCE = ("user_explicit", "agent_observation", "document_import", "conversation_context")
PRESETS = ("deepseek", "qwen", "openai", "zhipu", "opencode-go", "kimi", "custom", "anthropic", "gemini", "openrouter",
           "ollama", "lmstudio", "llamacpp", "vllm")
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
APIS = ("responses", "chat_completions")
# remote.provider: a model behind an OpenAI-compatible URL and key, or an agent CLI the user already
# runs (remote.agent), which uses its own login (issue 33).
PROVIDERS = ("openai-compatible", "agent-cli")
AGENT_CLIS = ("claude-code", "codex", "gemini")
# Set in the environment of an agent CLI that runs the Memory Agent: every cm hook entry checks it
# first and does nothing, so the Memory Agent's own session is never captured nor given memory.
MEMORY_AGENT_MARKER = "COMMON_MEMORY_AGENT_SESSION"
MAX_SAFE_INT = 2**53 - 1

DEFAULT_SCHEDULER = {
    "turnThreshold": 6,
    "byteThreshold": 16384,
    "idleMs": 120_000,
    "maxWaitMs": 600_000,
    "leaseMs": 120_000,
    "maxAttempts": 5,
}
DEFAULT_SESSION_CACHE = {"maxSessionBytes": 8_388_608, "maxTotalBytes": 67_108_864, "contextTailTurns": 2}
DEFAULT_TRASH_RETENTION_DAYS = 30  # history.trashRetentionDays: how long a removed section stays restorable
# spend: the Memory Agent's caps (``null`` = none, 0 = off), from a measured heavy day
# (docs/benchmarks.md, "Default spend caps"): 1,227 tokens per user turn (bench/agent_cost.py, the
# costlier one-call-per-response model) x 1,000 user turns = 1.23 M tokens; the daily cap leaves
# 60 % above that, the monthly one 22 such days and a margin. A runaway stops within hours, then waits.
# remote.maxRequestBytes: the largest serialized request the Memory Agent may send. Derived from
# measurement (docs/benchmarks.md, "Import cost"): a request's fixed text (instructions, tools, task)
# is about 10 KB, a job's sources at most one bulk page (64 KiB, escaped about 1.2x), the memory
# documents at most 3 x 16 KiB read and up to as much written back: about 190 KiB; 256 KiB leaves
# margin and stays near 65 k tokens, well inside the 128 k-token windows of current models.
DEFAULT_MAX_REQUEST_BYTES = 262_144
DEFAULT_SPEND = {"requestsPerHour": 600, "tokensPerDay": 2_000_000, "tokensPerMonth": 30_000_000}
# sync.autoDeadlineSeconds: the most one automatic sync (started by the drain, or by `cm flush`) may
# take in all, every git step and wait inside it; past it git's process group is killed and the
# sync is SYNC_TIMEOUT, retried later. One git step alone already stops at 60 s (sync/git.py), and a
# sync of a few memory files takes well under a second locally (docs/benchmarks.md, "Memory sync").
DEFAULT_SYNC_AUTO_DEADLINE_SECONDS = 120
# deviceName: what this machine is called in `cm status` and in what sync records (commit messages,
# history attribution). One short token: it is pushed to the user's sync remote and shown on one line.
DEVICE_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
