"""A Claude Code ``~/.claude.json`` of a chosen size, shaped like one used for months.

Claude Code keeps per-project state in that file (``projects``: each project's prompt ``history``,
allowed tools, MCP settings, costs), so on a busy machine it grows to many MB. ``state_text``
builds one deterministically (seeded), laid out as Claude Code writes it (``JSON.stringify`` with
two-space indent), with a few user-level MCP servers and a long cached changelog. Used by the
host-settings tests and ``bench/agents_settings.py``.
"""

from __future__ import annotations

import json
import random
import string

WORDS = ("fix", "the", "flaky", "test", "in", "src/app.ts", "refactor", "deploy", "why", "does", "ci", "fail",
         "add", "a", "migration", "for", "users", "table", "explain", "this", "error", "ünïcode", "naïve", "😀")


def _prompt(rng: random.Random) -> dict:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60)))
    entry: dict = {"display": words, "pastedContents": {}}
    if rng.random() < 0.1:
        entry["pastedContents"] = {"1": {"id": 1, "type": "text", "content": "\n".join(
            "".join(rng.choice(string.printable[:94]) for _ in range(70)) for _ in range(rng.randint(2, 30)))}}
    return entry


def _project(rng: random.Random) -> dict:
    return {"allowedTools": [f"Bash(npm run {w}:*)" for w in rng.sample(WORDS[:12], 3)],
            "history": [_prompt(rng) for _ in range(rng.randint(20, 100))],
            "mcpContextUris": [], "mcpServers": {}, "enabledMcpjsonServers": [], "disabledMcpjsonServers": [],
            "hasTrustDialogAccepted": True, "projectOnboardingSeenCount": rng.randint(0, 9),
            "hasClaudeMdExternalIncludesApproved": False, "lastCost": round(rng.random() * 4, 6),
            "lastAPIDuration": rng.randint(1000, 900000), "lastDuration": rng.randint(1000, 9000000),
            "lastSessionId": "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}".format(
                *(rng.getrandbits(b) for b in (32, 16, 12, 12, 48))),
            "exampleFiles": [f"src/{w}.ts" for w in rng.sample(WORDS[:12], 4)]}


def state_text(size: int, seed: int = 32) -> str:
    """A ``.claude.json`` text of at least ``size`` bytes (UTF-8), ending in a newline."""
    rng = random.Random(seed)
    state: dict = {"numStartups": 412, "installMethod": "npm-global", "autoUpdates": True,
                   "tipsHistory": {"new-user-warmup": 7, "memory-command": 88},
                   "userID": f"{rng.getrandbits(256):064x}", "hasCompletedOnboarding": True,
                   "mcpServers": {"github": {"type": "stdio", "command": "npx", "args": ["-y", "gh-mcp"], "env": {}}},
                   "projects": {}, "cachedChangelog": "# Changelog\n" + "- fixed a thing\n" * 2000}
    projects = state["projects"]
    # A few dozen distinct projects, repeated under new names: the shape of a big file without the
    # cost of generating every byte.
    pool = [(p, len(json.dumps(p, indent=2, ensure_ascii=False).encode("utf-8"))) for p in
            (_project(rng) for _ in range(40))]
    total = len(json.dumps(state, indent=2, ensure_ascii=False).encode("utf-8"))
    while total < size:
        project, length = pool[len(projects) % len(pool)]
        name = f"/home/dev/src/{WORDS[len(projects) % 12]}-{len(projects)}"
        projects[name] = project
        total += length + len(name) + 12
    return json.dumps(state, indent=2, ensure_ascii=False) + "\n"
