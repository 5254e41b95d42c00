"""Is a typed prompt a command the host ran? Decided the way Claude Code and Gemini CLI decide.

What the real hosts do (observed offline against the project's fake model: Claude Code 2.1.328,
Gemini CLI 0.61.0, in ``-p`` and interactively through a pseudo-terminal):
- A prompt whose first word is ``/`` + a name the host knows (a built-in, or a custom command or
  skill found on disk) is run as that command. A built-in that runs locally (``/model``,
  ``/about``) never reaches UserPromptSubmit / BeforeAgent; one that expands into a prompt
  (Claude ``/init``, ``/review``, a custom ``/note x``) reaches it with the raw typed text (Claude)
  or its expansion (Gemini, checked against the chat record in ``cmrunner.capture.gemini_chat``).
- A ``/word`` the host does not know (``/home is full, clean it``, ``/etc/hosts …``) is sent to the
  model as ordinary text, and the hook reports exactly that text: it is the user's words.
- A ``!`` shell escape typed interactively runs in the host's shell mode and fires no prompt hook
  at all; under ``-p`` the ``!…`` text is sent to the model as a prompt. So a ``!…`` prompt that
  reaches a prompt hook is always words the model received, never a command.

Contract:
- ``is_command(host, prompt, cwd, env)`` is True only when the prompt's first token is ``/name``
  (no second ``/`` before a blank, so a path is never a command) and ``name`` is one of: the host's
  built-in command names and aliases (``CLAUDE_BUILTINS`` / ``GEMINI_BUILTINS``, the names the
  pinned releases ship); a namespaced name (``plugin:cmd``, ``dir:cmd``) or a Claude MCP prompt
  (``mcp__…``), whose namespace only an installed command can have; or a custom command that
  exists for that host: Claude Code ``commands/<name>.md`` (also one folder down) or
  ``skills/<name>/SKILL.md`` under its config folder (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``), its
  plugins, or ``.claude/`` of the prompt's ``cwd`` or any folder above it; Gemini CLI
  ``commands/<name>.toml`` under ``~/.gemini``, its extensions, or ``.gemini/`` of ``cwd`` or above.
- Names match case-sensitively, as the hosts match them (observed: Claude Code sent ``/Model opus``,
  ``/INIT`` and ``/Note x`` to the model as text while ``/model``, ``/init`` and ``/note`` ran).
- Deterministic: the same prompt, folders and environment give the same answer; every look-up is
  a bounded number of ``stat`` calls (the plugin walk stops after ``PLUGIN_WALK_LIMIT`` entries).
- A command is stored without its text; anything else is a turn. A newer host release's new
  built-in that is not listed here is therefore kept as words until it is added.
Stdlib only (the hook path).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# From the Claude Code 2.1.328 binary: every command object's ``name`` and ``aliases`` (type
# local, local-jsx or prompt) and the bundled skills it registers.
CLAUDE_BUILTINS = frozenset({
    "add-dir", "advisor", "agents", "allowed-tools", "android", "app", "artifacts", "auto-mode-setup",
    "autocompact", "autofix-pr", "background", "bashes", "batch", "bg", "branch", "break-reminder", "breaks",
    "brief", "btw", "bug", "cd", "checkpoint", "claude-api", "clear", "cloud-plugins", "code-review", "color",
    "commit", "compact", "config", "context", "copy", "cost", "daemon", "debug", "design-consent",
    "design-login", "design-revoke", "desktop", "diff", "doctor", "downtime", "effort", "exit", "export",
    "extra-usage", "fast", "feedback", "focus", "fork", "go", "goal", "heapdump", "help", "hooks", "ide",
    "import", "init", "insights", "install", "install-github-app", "install-slack-app", "ios", "keybindings",
    "list-agents", "login", "logout", "loops", "marketplace", "mcp", "memory", "memory-pause", "mobile",
    "model", "name", "output-style", "passes", "pause-memory", "peers", "permissions", "plan", "plugin",
    "plugins", "powerup", "pr", "privacy-settings", "pro-trial-expired", "project", "quit", "radio",
    "rate-limit-options", "rc", "recap", "reload-plugins", "reload-skills", "remote", "remote-control",
    "remote-env", "rename", "restart", "resume", "review", "rewind", "routines", "schedule", "scroll-speed",
    "security-review", "session", "settings", "setup-bedrock", "setup-vertex", "simplify", "skill-doctor",
    "skills", "stats", "status", "statusline", "stickers", "stop", "subtask", "tasks", "team-onboarding",
    "teleport", "terminal-setup", "theme", "toggle-memory", "tp", "tui", "ultraplan", "ultrareview", "undo",
    "update", "upgrade", "usage", "usage-credits", "use-case", "verify", "version", "voice", "web-setup",
    "wellbeing", "workflow-launch-exec", "workflows",
})

# From the Gemini CLI 0.61.0 bundle: the top-level commands of its built-in command loader, with
# their alternative names.
GEMINI_BUILTINS = frozenset({
    "?", "about", "agents", "auth", "background", "bg", "bug", "bug-memory", "chat", "clear", "commands",
    "compact", "compress", "copy", "corgi", "debug", "dir", "directory", "docs", "editor", "exit",
    "export-session", "extensions", "footer", "gemma", "help", "hooks", "ide", "init", "mcp", "memory",
    "model", "oncall", "permissions", "plan", "policies", "privacy", "profile", "quit", "restore", "resume",
    "rewind", "settings", "setup-github", "shortcuts", "skills", "stats", "summarize", "tasks",
    "terminal-setup", "theme", "tools", "upgrade", "usage", "vim", "voice",
})

PLUGIN_WALK_LIMIT = 4000
# The characters a command name may have; anything else cannot name a command or a file. Names are
# parsed with string methods, not ``re``: this runs on every typed prompt, and loading ``re`` (with
# ``enum``) would be most of what the hook imports beyond a bare interpreter.
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:?-")


def command_name(prompt: str) -> str | None:
    """The ``name`` of a prompt that starts ``/name`` (after blanks), up to a blank or the end;
    ``None`` for anything else, including ``/a/b`` (a path: a second ``/`` before any blank)."""
    text = prompt.lstrip()  # blanks as str.isspace defines them, the same set as a pattern's \s
    if not text.startswith("/"):
        return None
    end = 1
    while end < len(text) and not text[end].isspace() and text[end] != "/":
        end += 1
    if end == 1 or (end < len(text) and text[end] == "/"):
        return None
    return text[1:end]


def _ancestors(cwd: str) -> list[str]:
    found, here = [], os.path.normpath(cwd)
    while True:
        found.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            return found
        here = parent


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def _has(folder: str, filename: str) -> bool:
    """``folder/filename`` exists with exactly that case (the hosts match names case-sensitively,
    also on a file system that does not: Claude Code sent ``/Note x`` to the model as text)."""
    try:
        return filename in os.listdir(folder) and os.path.exists(os.path.join(folder, filename))
    except OSError:
        return False


def _one_down(folder: str, filename: str) -> bool:
    """``folder/filename`` or ``folder/<sub>/filename`` exists."""
    if _has(folder, filename):
        return True
    try:
        with os.scandir(folder) as entries:
            subs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return False
    return any(_has(sub, filename) for sub in subs[:256])


def _claude_config(root: str, name: str) -> bool:
    return (_one_down(os.path.join(root, "commands"), name + ".md")
            or (_has(os.path.join(root, "skills"), name) and _has(os.path.join(root, "skills", name), "SKILL.md")))


def _plugin_provides(plugins: str, name: str) -> bool:
    """A bounded walk of Claude Code's plugin folder for ``commands/<name>.md`` or ``skills/<name>/SKILL.md``."""
    seen, stack = 0, [(plugins, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as entries:
                items = list(entries)
        except OSError:
            continue
        for entry in items:
            seen += 1
            if seen > PLUGIN_WALK_LIMIT:
                return False
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name in ("commands", "skills"):
                if _claude_config(folder, name):
                    return True
            elif depth < 6 and not entry.name.startswith("."):
                stack.append((entry.path, depth + 1))
    return False


def _claude_custom(name: str, cwd: str, env: Mapping[str, str]) -> bool:
    config = env.get("CLAUDE_CONFIG_DIR") or os.path.join(_home(env), ".claude")
    if _claude_config(config, name):
        return True
    if any(_claude_config(os.path.join(folder, ".claude"), name) for folder in _ancestors(cwd)):
        return True
    return _plugin_provides(os.path.join(config, "plugins"), name)


def _gemini_custom(name: str, cwd: str, env: Mapping[str, str]) -> bool:
    filename = name + ".toml"
    gemini = os.path.join(_home(env), ".gemini")
    folders = [os.path.join(gemini, "commands")]
    folders += [os.path.join(folder, ".gemini", "commands") for folder in _ancestors(cwd)]
    try:
        with os.scandir(os.path.join(gemini, "extensions")) as entries:
            folders += [os.path.join(e.path, "commands") for e in list(entries)[:256]]
    except OSError:
        pass
    return any(_has(folder, filename) for folder in folders)


def is_command(host: str, prompt: str, cwd: str, env: Mapping[str, str] | None = None) -> bool:
    """True when ``host`` (``claude-code`` or ``gemini``) runs ``prompt`` as a command; see the contract."""
    name = command_name(prompt)
    if name is None or not _SAFE.issuperset(name):
        return False  # a "/word" with other characters cannot name a command or a file
    env = os.environ if env is None else env
    if host == "claude-code":
        if name in CLAUDE_BUILTINS or name.startswith("mcp__"):
            return True
    elif name in GEMINI_BUILTINS:
        return True
    head, colon, tail = name.partition(":")
    if colon and head and tail:
        return True
    if name.startswith(".") or ":" in name:
        return False
    return (_claude_custom if host == "claude-code" else _gemini_custom)(name, cwd, env)
