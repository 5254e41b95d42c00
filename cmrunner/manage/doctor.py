"""``cm doctor``: the checks of an installation that change nothing, and the Codex profile's.

Contract: every check reports ``ok``, ``warn``, ``fail`` or ``skip`` (a host that is not here:
nothing to check) with a one-line detail, and an optional ``group`` (the host it belongs to), and
never writes a file (``--probe-model`` excepted: its one request is recorded in the usage ledger,
as ``cm network-test``'s is); a ``fail`` detail starts with a stable ``CODE:`` and says the fix, and any
``fail`` makes ``cm doctor`` exit 1. The per-host groups are put together by
``integrations/checks.py:host_groups``; this module has the general checks (``run``) and the Codex
profile's (``codex_profile``). ``run`` checks the configuration; the model (``remote`` with base
URL and model, and its key present in the private ``.env`` — the key itself is never read into a
message; without ``probe_model`` the endpoint is not contacted and the detail says so; an agent
CLI is checked found, and with ``probe_model`` run once as ``cm network-test`` runs it); the data root (a real directory — no symlinked component — of mode 0700 that this user
can write, or one that can be created: its nearest existing ancestor is a writable real
directory); the memory files (each one cm cannot read is named with its line and rule, and the
fix: ``cm fix <document>``). ``codex_profile`` checks the profile file that ``cm codex-config`` generates
(``$CODEX_HOME/<profile>.config.toml``): the six hooks with ``timeout = 3`` pinned to an existing
interpreter and to this home; their trust; and that the profile's read MCP server starts and lists
exactly ``memory_read`` and ``memory_status`` (the SDK client, the real command line).

Trust: ``codex app-server hooks/list`` does not see profile layers, so trust is computed the way
Codex 0.169 does (hosts.md §1.6, route 3; checked against ``hooks/list`` ``currentHash`` by the
tests): sha256 of the compact, key-sorted JSON ``{event_name, matcher?, hooks: [{type, command,
timeout, async, statusMessage?, additionalContextLimit?}]}``, compared with
``hooks.state."<profile path>:<event_snake>:0:0".trusted_hash`` in the base ``config.toml`` or the
profile file. It proves what the files say, not that a running Codex loaded them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import tomllib

from cmrunner.core import config as config_mod, envfile, fsutil
from cmrunner.core.errors import CmError
from cmrunner.manage import hostconfig


class Check:
    __slots__ = ("name", "state", "detail", "group")

    def __init__(self, name: str, state: str, detail: str, group: str = "") -> None:
        self.name = name
        self.state = state
        self.detail = detail
        self.group = group

    def as_json(self) -> dict:
        raw = {"name": self.name, "state": self.state, "detail": self.detail}
        if self.group:
            raw["group"] = self.group
        return raw


def event_snake(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def trust_hash(event: str, group: dict, handler: dict) -> str:
    """The hash Codex 0.169 trusts a command hook by (see module contract)."""
    normal: dict = {"type": "command", "command": handler.get("command"), "timeout": handler.get("timeout", 600),
                    "async": bool(handler.get("async", False))}
    for key in ("statusMessage", "additionalContextLimit"):
        if handler.get(key) is not None:
            normal[key] = handler[key]
    body: dict = {"event_name": event_snake(event), "hooks": [normal]}
    if group.get("matcher") is not None:
        body["matcher"] = group["matcher"]
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _load_toml(path: str) -> dict | None:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, tomllib.TOMLDecodeError):
        raise CmError("CONFIG_INVALID", f"{path} is not valid TOML; fix it or regenerate it") from None


def pinned_problem(home: str, argv: list[str]) -> str | None:
    """What is wrong with a hook entry's pinned argv (``None``: it runs this installation's hook in
    ``home``): a missing interpreter or cm entry file, or another home."""
    if not argv or not os.path.isabs(argv[0]) or not os.access(argv[0], os.X_OK):
        return "interpreter missing"
    if hostconfig.hook_form(argv) == "current" and not os.path.isfile(argv[3]):
        return "cm entry file missing"
    if "--home" not in argv or argv[argv.index("--home") + 1:][:1] != [home]:
        return "pinned to another home"
    return None


def legacy_hooks(commands: list[tuple[str, str]]) -> list[str]:
    """The events whose hook ``commands`` (``(event, command)``) are in an older cm's pinned form."""
    events = []
    for event, command in commands:
        try:
            argv = shlex.split(command)
        except ValueError:
            continue
        if hostconfig.hook_form(argv) == "legacy":
            events.append(event)
    return events


def legacy_check(events: list[str], refresh: str) -> Check:
    """The warning for hook entries an older cm wrote: still cm's and working, slower per turn."""
    return Check("hook form", "warn", f"{', '.join(events)}: an older cm's entry (`python -I -m cmrunner`), cm's own "
                                      f"and working but slower each turn; refresh it with `{refresh}`")


def _check_hooks(home: str, profile: dict) -> tuple[Check, list[tuple[str, dict, dict]]]:
    hooks = profile.get("hooks", {})
    found, problems = [], []
    for event in hostconfig.HOOK_EVENTS:
        groups = hooks.get(event)
        if not isinstance(groups, list) or len(groups) != 1 or len(groups[0].get("hooks", [])) != 1:
            problems.append(f"{event} missing")
            continue
        group, handler = groups[0], groups[0]["hooks"][0]
        found.append((event, group, handler))
        try:
            argv = shlex.split(handler.get("command", ""))
        except ValueError:
            argv = []
        if handler.get("timeout") != hostconfig.HOOK_TIMEOUT:
            problems.append(f"{event} timeout is not 3")
        problem = pinned_problem(home, argv)
        if problem:
            problems.append(f"{event} {problem}")
    if problems:
        return Check("hooks", "fail", "; ".join(problems) + "; regenerate with `cm codex-config`"), found
    return Check("hooks", "ok", "six hooks, timeout 3, pinned to an existing interpreter and this home"), found


def _check_trust(path: str, found: list[tuple[str, dict, dict]], layers: list[dict]) -> Check:
    states: dict[str, str] = {}
    for event, group, handler in found:
        key = f"{path}:{event_snake(event)}:0:0"
        entry: dict = {}
        for layer in layers:
            entry.update(layer.get("hooks", {}).get("state", {}).get(key, {}))
        if entry.get("enabled") is False:
            states[event] = "disabled"
        elif "trusted_hash" not in entry:
            states[event] = "untrusted"
        else:
            states[event] = "trusted" if entry["trusted_hash"] == trust_hash(event, group, handler) else "modified"
    if found and all(s == "trusted" for s in states.values()):
        return Check("hook trust", "ok", "all six hooks trusted (computed as Codex 0.169 does)")
    pending = ", ".join(f"{e} {s}" for e, s in states.items() if s != "trusted") or "no hooks"
    return Check("hook trust", "warn", f"{pending}: review and trust them with /hooks in `codex --profile`")


def _check_mcp(profile: dict) -> Check:
    server = profile.get("mcp_servers", {}).get("common_memory")
    if not isinstance(server, dict) or "command" not in server:
        return Check("read MCP", "fail", "mcp_servers.common_memory is missing; regenerate with `cm codex-config`")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env.update(server.get("env", {}))
    params = StdioServerParameters(command=server["command"], args=list(server.get("args", [])), env=env)

    async def listed() -> set[str]:
        with anyio.fail_after(20):
            async with Client(params, mode="legacy") as client:
                return {t.name for t in (await client.list_tools()).tools}

    try:
        names = anyio.run(listed)
    except Exception as exc:  # any start-up failure of the configured command is the finding
        return Check("read MCP", "fail", f"the configured server did not start or answer ({type(exc).__name__})")
    if names != {"memory_read", "memory_status"}:
        return Check("read MCP", "fail", "the server lists " + ", ".join(sorted(names)) + " instead of the read tools")
    return Check("read MCP", "ok", "started and listed memory_read, memory_status")


def _failed(name: str, code: str, message: str) -> Check:
    return Check(name, "fail", f"{code}: {message}")


def _check_agent_cli(remote: dict) -> Check:
    """The agent CLI that runs the Memory Agent: found and executable (its login is its own: cm
    never reads the CLI's credentials, so a refused login shows as AGENT_CLI_AUTH on a job)."""
    import shutil

    from cmrunner.agentrt.agentcli import hosts

    path = remote.get("agentPath") or shutil.which(hosts.spec(remote["agent"]).executable)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return _failed("model", "AGENT_CLI_NOT_FOUND", f"the {remote['agent']} CLI was not found "
                       f"({'remote.agentPath' if remote.get('agentPath') else 'on PATH'}); install it or set "
                       "remote.agentPath (`cm config init --force --agent … --agent-path PATH`)")
    return Check("model", "ok", f"{config_mod.runtime_label(remote)}: {path}")


def _probe_agent_cli(cfg: config_mod.Config) -> Check:
    """One confined run of the CLI (``cm network-test``'s), its outcome code only."""
    from cmrunner.agentrt import nettest

    report = nettest.run(cfg)
    outcome = report["outcome"]
    where = f"{config_mod.runtime_label(cfg.remote or {})}: {report['binary']} {report['version'] or ''}".rstrip()
    if outcome["ok"]:
        return Check("model", "ok", f"{where}; it answered one small task in {outcome['elapsedMs']} ms")
    return _failed("model", outcome["code"], f"{where}; one small task failed at {outcome['stage']} "
                                             f"({outcome['reason']}); `cm network-test` shows the outcome")


def _check_model(cfg: config_mod.Config, probe: bool = False) -> Check:
    remote = cfg.remote
    if remote is None:
        return _failed("model", "UNCONFIGURED", "no model is configured, so captured turns are never written to "
                       "memory; run `cm config` (or `cm config init --force --base-url URL --model NAME "
                       "--api-key-stdin`)")
    if config_mod.is_agent_cli(remote):
        found = _check_agent_cli(remote)
        return _probe_agent_cli(cfg) if probe and found.state == "ok" else found
    try:
        present = envfile.get_secret(cfg.home, remote["apiKeyEnv"]) is not None
    except CmError as exc:
        return _failed("model", exc.code, exc.message)
    if not present:
        return _failed("model", "API_KEY_MISSING", f"{remote['apiKeyEnv']} is not set in the private "
                       f"{cfg.home}/.env; run `cm config` or pipe the key into `cm config init … --api-key-stdin`")
    where = f"{remote['model']} at {remote['baseUrl']}; key {remote['apiKeyEnv']} present in .env"
    if not probe:
        # by default doctor sends nothing (it changes nothing, costs nothing): say so, so "ok" is not read as "answers"
        return Check("model", "ok", f"{where}; the endpoint was not contacted (`cm doctor --probe-model` or "
                                    "`cm network-test` sends one small request)")
    from cmrunner.agentrt import nettest

    outcome = nettest.run(cfg)["outcome"]
    if outcome["ok"]:
        return Check("model", "ok", f"{where}; it answered one small request in {outcome['elapsedMs']} ms")
    status = "".join(f", {k} {outcome[k]}" for k in ("httpStatus", "proxyStatus") if k in outcome)
    return _failed("model", outcome["code"], f"{where}; one small request failed at {outcome['stage']} "
                                             f"({outcome['reason']}{status}); `cm network-test` shows the route")


def _check_data_root(root: str) -> Check:
    code, detail = fsutil.data_root_problem(root)
    return Check("data root", "ok", detail) if code is None else _failed("data root", code, detail)


def _check_secrets(home: str) -> list[Check]:
    """The deep scanner is installed, the allow-list is usable, and which sections are withheld."""
    from cmrunner.views import secretreport

    info = secretreport.summary(home)
    checks = [Check("secret scanner", "ok", f"detect-secrets {info['deepScanner']} for deep scans")
              if info["deepScanner"] else
              Check("secret scanner", "warn", "detect-secrets is not installed: only the built-in rules scan; "
                                              "reinstall cm")]
    if info["allowListProblem"]:
        checks.append(Check("secrets allow-list", "warn", info["allowListProblem"]))
    held = info["withheld"]
    if held:
        checks.append(Check("secrets in memory", "warn", f"{len(held)} section(s) withheld from agents: "
                            + "; ".join(secretreport.describe(item) for item in held[:5])
                            + "; fix with `cm secrets list`"))
    else:
        checks.append(Check("secrets in memory", "ok", "no memory section looks like a secret"))
    return checks


def _check_documents(cfg: config_mod.Config) -> Check:
    """Every memory file cm finds: a problem that keeps cm from reading one names the file, its
    line and the rule, and says to run ``cm fix`` (nothing is read into the detail but the rule)."""
    from cmrunner.core import sections
    from cmrunner.core.home import DataPaths

    paths = DataPaths(cfg.data_root)
    targets = ["profile", "preferences"]
    projects_dir = os.path.join(paths.memory, "projects")
    if os.path.isdir(projects_dir):
        targets += sorted("project:" + name[:-3] for name in os.listdir(projects_dir) if name.endswith(".md"))
    problems, present = [], 0
    for target in targets:
        try:
            path = paths.document(target)
            raw = fsutil.read_regular_file(path, sections.MAX_HARD_BUDGET, f"memory document {target}")
            if raw is None:
                continue
            present += 1
            found = sections.problem(target, raw)
        except CmError as exc:
            problems.append(f"{exc.code}: {exc.message}")
            continue
        if found is None:
            continue
        line = getattr(found, "lineno", 0)
        where = f"{path} line {line}" if line else path
        rule = getattr(found, "rule", None) or found.message
        todo = f"run `cm fix {target}`" if found.code == "INVALID_DOCUMENT" and line else "shorten or fix it by hand"
        problems.append(f"{found.code}: {where}: {rule}; {todo}")
    if problems:
        return Check("memory files", "fail", "; ".join(problems))
    return Check("memory files", "ok", f"{present} document(s), each in a shape cm reads")


def run(home: str, probe_model: bool = False) -> list[Check]:
    """The checks every installation gets: configuration, model, data root, secrets. With
    ``probe_model`` the model gets one small request, as ``cm network-test`` sends (and records)."""
    checks: list[Check] = []
    try:
        cfg = config_mod.load(home)
        state = "valid" if cfg.exists else "absent (defaults)"
        checks.append(Check("configuration", "ok", f"{home}/config.json {state}"))
        checks.append(_check_model(cfg, probe_model))
        checks.append(_check_data_root(cfg.data_root))
        checks.append(_check_documents(cfg))
        checks += _check_secrets(home)
    except CmError as exc:
        checks.append(_failed("configuration", exc.code, exc.message))
    return checks


def codex_profile(home: str, codex_home: str, profile_name: str = "common-memory") -> list[Check]:
    """The Codex profile ``cm codex-config`` generates: the file, its hooks, their trust, its read server."""
    path = os.path.join(codex_home, f"{profile_name}.config.toml")
    try:
        profile = _load_toml(path)
        base = _load_toml(os.path.join(codex_home, "config.toml")) or {}
    except CmError as exc:
        return [Check("codex profile", "fail", exc.message)]
    if profile is None:
        return [Check("codex profile", "fail", f"{path} does not exist; save `cm codex-config` output there, or run "
                                               "`cm agents install codex`")]
    checks = [Check("codex profile", "ok", path)]
    hooks, found = _check_hooks(home, profile)
    checks.append(hooks)
    checks.append(_check_trust(path, found, [base, profile]))
    legacy = legacy_hooks([(event, handler.get("command", "")) for event, _group, handler in found])
    if legacy:
        checks.append(legacy_check(legacy, "cm codex-config"))
    checks.append(_check_mcp(profile))
    return checks
