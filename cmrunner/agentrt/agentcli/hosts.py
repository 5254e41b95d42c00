"""Each agent CLI as the Memory Agent's runtime: its confined command line, environment and output.

Contract:
- ``spec(agent)`` is the ``CliSpec`` of ``claude-code``, ``codex`` or ``gemini``: the executable's
  name on PATH, ``argv(...)`` (headless, only cm's MCP server ``cm`` with its tools allowed by
  name, no built-in tool, no other MCP server, no saved session, the user's settings and hooks not
  loaded where the CLI allows it, cm's system prompt where the CLI can replace its own, JSON
  output), ``prepare(...)`` (files the CLI reads, written into the attempt's private directory,
  outside its empty working directory) and ``usage(stdout)``.
- ``usage(stdout)`` is ``(counts, cost_usd)`` from the CLI's JSON output, in cm's names
  (``input_tokens``, ``output_tokens``, ``cached_input_tokens``), or ``(None, None)`` when the
  output carries none; never text from the output.
- ``classify(text)`` maps what a failed CLI printed to ``AGENT_CLI_AUTH`` (no or expired login,
  a refused key), ``AGENT_CLI_QUOTA`` (usage limit, quota, rate limit), ``UNAVAILABLE`` (the
  CLI could not reach its model) or ``None``; the text is
  matched, never kept, logged or returned.
Stdlib only.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

SUBMIT = "submit_memory_decision"
SERVER = "cm"  # the MCP server's name the CLI sees; tool names reach the model as mcp__cm__<tool>

_AUTH = re.compile(r"invalid api key|/login|not logged in|please log ?in|log in again|authenticat|unauthori[sz]ed|"
                   r"\b401\b|\b403\b|oauth|credentials? (?:are |is )?(?:missing|invalid|expired)|api key (?:is )?missing|"
                   r"no api key", re.I)
_QUOTA = re.compile(r"usage limit|quota|rate.?limit|\b429\b|too many requests|credit balance|limit reached|"
                    r"resource.?exhausted|billing", re.I)


_UNREACHABLE = re.compile(r"econnrefused|connection refused|enotfound|getaddrinfo|fetch failed|network error|"
                          r"unable to connect|socket hang up|etimedout", re.I)


def classify(text: str) -> str | None:
    if _QUOTA.search(text):
        return "AGENT_CLI_QUOTA"
    if _AUTH.search(text):
        return "AGENT_CLI_AUTH"
    if _UNREACHABLE.search(text):
        return "UNAVAILABLE"
    return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _json_lines(stdout: bytes) -> list[dict]:
    found = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith(b"{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


@dataclass(frozen=True)
class Attempt:
    """What a CLI's command line needs of one attempt."""

    binary: str
    private: str          # the attempt's private directory (0700): config files, the socket
    workdir: str          # the CLI's empty working directory inside it
    relay: list[str]      # the command that starts ``cm memory-agent-mcp``
    relay_env: dict[str, str]
    system_prompt: str
    prompt: str           # the task (without its decision schema), for a CLI that takes it as an argument
    model: str | None
    max_turns: int
    tools: tuple[str, ...]
    # Created by the attempt once cm accepted the submission (before the CLI hears so): a CLI that
    # can be told to stop after a tool call (Claude Code's PostToolUse hook) checks it, so it ends
    # without the closing model turn, which would re-send the whole conversation for a reply nobody reads.
    accepted: str = ""


class CliSpec:
    agent = ""
    executable = ""
    prompt_on_stdin = True  # else ``argv`` carries the task and stdin is /dev/null
    # Extra environment the CLI gets (host switches); the user's own environment passes through.
    env: dict[str, str] = {}

    def environment(self, attempt: Attempt) -> dict[str, str]:
        """Per-attempt host switches in the environment (paths of files ``prepare`` wrote)."""
        return {}

    def prepare(self, attempt: Attempt) -> None:
        """Write the files ``argv`` refers to."""

    def argv(self, attempt: Attempt) -> list[str]:  # pragma: no cover - interface
        raise NotImplementedError

    def usage(self, stdout: bytes) -> tuple[dict[str, int | None] | None, float | None]:  # pragma: no cover
        raise NotImplementedError

    def turns(self, stdout: bytes) -> int:
        """Model turns the CLI reports (``num_turns`` of its result object), 0 when it says none."""
        found = [d["num_turns"] for d in _json_lines(stdout) if isinstance(d.get("num_turns"), int)]
        return int(found[-1]) if found else 0


class ClaudeCode(CliSpec):
    """``claude -p`` (hosts-more.md §6): ``--tools ""`` removes every built-in tool (and puts the MCP
    tools straight into the request), ``--strict-mcp-config`` loads only cm's server,
    ``--setting-sources ""`` loads no user, project or local settings (so none of their hooks,
    plugins or MCP servers), the session is not saved. ``--settings`` holds one hook, cm's: after a
    submit call it ends the run (``continue: false``) once cm accepted the submission (the
    ``Attempt.accepted`` file exists), so there is no closing model turn re-sending the whole
    conversation, and the CLI still prints its result with the usage. Not ``--bare``: it would read
    no subscription login (only ANTHROPIC_API_KEY)."""

    agent = "claude-code"
    executable = "claude"
    # MCP results are counted against the host's own output cap; cm's largest page must fit whole.
    env = {"MAX_MCP_OUTPUT_TOKENS": "100000"}

    def prepare(self, attempt: Attempt) -> None:
        config = {"mcpServers": {SERVER: {"type": "stdio", "command": attempt.relay[0], "args": attempt.relay[1:],
                                          "env": attempt.relay_env}}}
        _write_private(os.path.join(attempt.private, "mcp.json"), json.dumps(config))
        settings: dict = {"permissions": {"allow": [f"mcp__{SERVER}__{t}" for t in attempt.tools]},
                          "hooks": {"PostToolUse": [{"matcher": f"mcp__{SERVER}__{SUBMIT}", "hooks": [
                              {"type": "command", "command": _stop_when(attempt.accepted)}]}]}}
        _write_private(os.path.join(attempt.private, "settings.json"), json.dumps(settings))

    def argv(self, attempt: Attempt) -> list[str]:
        argv = [attempt.binary, "-p", "--output-format", "json", "--tools", "",
                "--allowedTools", ",".join(f"mcp__{SERVER}__{t}" for t in attempt.tools),
                "--strict-mcp-config", "--mcp-config", os.path.join(attempt.private, "mcp.json"),
                "--setting-sources", "", "--settings", os.path.join(attempt.private, "settings.json"),
                "--no-session-persistence", "--disable-slash-commands",
                "--system-prompt", attempt.system_prompt, "--max-turns", str(attempt.max_turns)]
        if attempt.model:
            argv += ["--model", attempt.model]
        return argv

    def usage(self, stdout: bytes) -> tuple[dict[str, int | None] | None, float | None]:
        result = next((d for d in reversed(_json_lines(stdout)) if d.get("type") == "result"), None)
        if result is None or not isinstance(result.get("usage"), dict):
            return None, None
        usage = result["usage"]
        fresh = _count(usage.get("input_tokens"))
        cached = sum(_count(usage.get(k)) or 0 for k in ("cache_read_input_tokens", "cache_creation_input_tokens"))
        cost = result.get("total_cost_usd")
        return ({"input_tokens": None if fresh is None else fresh + cached, "output_tokens": _count(usage.get("output_tokens")),
                 "cached_input_tokens": _count(usage.get("cache_read_input_tokens")), "reasoning_tokens": None},
                float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None)


def _stop_when(marker: str) -> str:
    """The one hook cm's Claude Code run has: after a submit call, end the run (``continue: false``:
    no further model turn; the CLI still prints its result and usage) once cm accepted it."""
    stop = json.dumps({"continue": False, "stopReason": "cm accepted the decision"})
    return f"test -e {shlex.quote(marker)} && printf '%s' {shlex.quote(stop)} || true"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


class Codex(CliSpec):
    """``codex exec`` (hosts-more.md §6, hosts.md §1.9): the whole ``mcp_servers`` table is replaced
    by cm's server alone (so no server from the user's config.toml starts), its tools approved; the
    shell, unified exec, multi-agent, goals, image, browser, computer-use, plugin, app, skill and
    web-search tools are switched off, and so are Codex's hooks; read-only sandbox, approvals never
    asked, no session files (``--ephemeral``); cm's system prompt replaces Codex's
    (``model_instructions_file``). What Codex adds to every request and cm has no use for is left
    out (0.169's switches): its permissions instructions, its environment context, the
    ``view_image`` and ``request_user_input`` tools. The user's own provider and login stay in
    force. Codex still makes a closing turn after the submission: its usage comes only with the
    finished turn, so ending it earlier would leave the ledger an estimate."""

    agent = "codex"
    executable = "codex"
    FEATURES_OFF = ("shell_tool", "unified_exec", "multi_agent", "goals", "image_generation", "hooks", "plugins",
                    "apps", "sleep_tool", "tool_suggest", "skill_search", "browser_use", "computer_use", "memories", "view_image")

    def prepare(self, attempt: Attempt) -> None:
        _write_private(os.path.join(attempt.private, "instructions.md"), attempt.system_prompt)

    def argv(self, attempt: Attempt) -> list[str]:
        env = ", ".join(f"{k} = {_toml_string(v)}" for k, v in attempt.relay_env.items())
        server = (f"{{ command = {_toml_string(attempt.relay[0])}, "
                  f"args = [{', '.join(_toml_string(a) for a in attempt.relay[1:])}], env = {{ {env} }}, "
                  f"enabled_tools = [{', '.join(_toml_string(t) for t in attempt.tools)}], "
                  f'default_tools_approval_mode = "approve", startup_timeout_sec = 30 }}')
        argv = [attempt.binary, "exec", "--json", "--skip-git-repo-check", "--ephemeral", "-s", "read-only",
                "-C", attempt.workdir, "-c", f"mcp_servers = {{ {SERVER} = {server} }}",
                "-c", 'approval_policy = "never"', "-c", 'web_search = "disabled"',
                "-c", "skills.include_instructions = false",
                "-c", "include_permissions_instructions = false", "-c", "include_environment_context = false",
                "-c", "include_apps_instructions = false", "-c", "include_collaboration_mode_instructions = false",
                "-c", "tools.experimental_request_user_input.enabled = false",
                "-c", f"model_instructions_file = {_toml_string(os.path.join(attempt.private, 'instructions.md'))}"]
        for feature in self.FEATURES_OFF:
            argv += ["--disable", feature]
        if attempt.model:
            argv += ["-m", attempt.model]
        return argv + ["-"]

    def usage(self, stdout: bytes) -> tuple[dict[str, int | None] | None, float | None]:
        turns = [d["usage"] for d in _json_lines(stdout) if d.get("type") == "turn.completed"
                 and isinstance(d.get("usage"), dict)]
        if not turns:
            return None, None
        total = {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0}
        for usage in turns:
            for key, name in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                              ("cached_input_tokens", "cached_input_tokens")):
                total[key] += _count(usage.get(name)) or 0
        return {**total, "reasoning_tokens": None}, None

    def turns(self, stdout: bytes) -> int:
        return sum(1 for d in _json_lines(stdout) if d.get("type") == "turn.completed")


class Gemini(CliSpec):
    """``gemini -p`` (hosts-more.md §3, its bundled docs): the run's workspace settings
    (``<workdir>/.gemini/settings.json``, the only file in the working directory; they override
    the user's, and load because this run alone trusts that folder) add cm's server (trusted,
    only its tools), allow no other MCP server, exclude every built-in tool by name, and turn hooks
    and skills off; extensions are not loaded (``-e none``); cm's
    system prompt replaces Gemini's (``GEMINI_SYSTEM_MD``). The user's own auth settings stay in
    force. Not the system settings layer: Gemini skips that file when any parent directory is
    world-writable (``/tmp``). Gemini 0.61 still records the run's chat file: no switch found. It
    still makes a closing turn after the submission: a hook might end the run, but hooks stay off
    here (confinement; not tried), and its usage comes only at the end."""

    agent = "gemini"
    executable = "gemini"
    prompt_on_stdin = False
    # Gemini 0.61's own tools by name (its docs' tool list and what it offered against the fake):
    # excluded from discovery. ``tools.core`` would do it in one entry, but it filters MCP tools too.
    BUILTIN_TOOLS = ("run_shell_command", "write_file", "replace", "edit", "read_file", "read_many_files", "glob",
                     "grep_search", "search_file_content", "list_directory", "web_fetch", "google_web_search",
                     "save_memory", "write_todos", "update_topic", "enter_plan_mode", "exit_plan_mode", "invoke_agent",
                     "activate_skill", "ask_user", "codebase_investigator", "cli_help", "read_mcp_resource",
                     "list_mcp_resources", "complete_task", "get_internal_docs")

    def prepare(self, attempt: Attempt) -> None:
        settings = {
            "mcpServers": {SERVER: {"command": attempt.relay[0], "args": attempt.relay[1:], "env": attempt.relay_env,
                                    "trust": True, "includeTools": list(attempt.tools), "timeout": 60000}},
            "mcp": {"allowed": [SERVER]},
            "tools": {"exclude": list(self.BUILTIN_TOOLS)},
            "hooksConfig": {"enabled": False},
            "skills": {"enabled": False},
            "context": {"includeDirectoryTree": False},
        }
        os.mkdir(os.path.join(attempt.workdir, ".gemini"), 0o700)
        _write_private(os.path.join(attempt.workdir, ".gemini", "settings.json"), json.dumps(settings))
        _write_private(os.path.join(attempt.private, "system.md"), attempt.system_prompt)

    def environment(self, attempt: Attempt) -> dict[str, str]:
        return {"GEMINI_CLI_TRUST_WORKSPACE": "true", "GEMINI_SYSTEM_MD": os.path.join(attempt.private, "system.md")}

    def argv(self, attempt: Attempt) -> list[str]:
        argv = [attempt.binary, "-p", attempt.prompt, "-o", "json", "--allowed-mcp-server-names", SERVER, "-e", "none"]
        if attempt.model:
            argv += ["-m", attempt.model]
        return argv

    def usage(self, stdout: bytes) -> tuple[dict[str, int | None] | None, float | None]:
        result = next((d for d in reversed(_json_lines(_whole_json(stdout))) if isinstance(d.get("stats"), dict)),
                      None)
        models = result["stats"].get("models") if result else None
        if not isinstance(models, dict) or not models:
            return None, None
        total = {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0}
        for entry in models.values():
            tokens = entry.get("tokens") if isinstance(entry, dict) else None
            if not isinstance(tokens, dict):
                continue
            total["input_tokens"] += _count(tokens.get("prompt")) or 0
            total["output_tokens"] += (_count(tokens.get("candidates")) or 0) + (_count(tokens.get("thoughts")) or 0)
            total["cached_input_tokens"] += _count(tokens.get("cached")) or 0
        return {**total, "reasoning_tokens": None}, None

    def turns(self, stdout: bytes) -> int:
        result = next((d for d in _json_lines(_whole_json(stdout)) if isinstance(d.get("stats"), dict)), None)
        models = (result or {}).get("stats", {}).get("models")
        if not isinstance(models, dict):
            return 0
        return sum(_count((m.get("api") or {}).get("totalRequests")) or 0 for m in models.values() if isinstance(m, dict))


def _whole_json(stdout: bytes) -> bytes:
    """Gemini prints its JSON result pretty-printed over many lines: fold it to one line."""
    try:
        return json.dumps(json.loads(stdout)).encode()
    except ValueError:
        return stdout


def _write_private(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


SPECS: dict[str, Callable[[], CliSpec]] = {"claude-code": ClaudeCode, "codex": Codex, "gemini": Gemini}


def spec(agent: str) -> CliSpec:
    return SPECS[agent]()
