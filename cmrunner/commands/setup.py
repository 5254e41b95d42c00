"""Setting up: `cm status`, `cm config init|show`, `cm project register|list|remove`."""

from __future__ import annotations

import json
import sys

import click

from cmrunner.commands.base import _home, cli, echo, is_terminal
from cmrunner.core import config as config_mod, projects
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.manage import configinit
from cmrunner.views import status as status_mod


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Configuration, storage paths, queue counts and the drain (creates nothing).

    Exits 1 when the configuration is invalid or the data root is unsafe."""
    report = status_mod.gather(_home(ctx))
    if as_json:
        echo(json.dumps(report, indent=2))
    else:
        _print_status(report)
    if not status_mod.healthy(report):
        ctx.exit(1)


def _projects_line(found: dict) -> str:
    if "error" in found:
        return f"{found['error']['code']}: {found['error']['message']}"
    known = found["knownNotRegistered"]
    line = f"{found['registered']} project(s)"
    if known:
        line += (f", {len(known)} known but not registered here ({', '.join(known[:5])}{', …' if len(known) > 5 else ''}"
                 "; `cm project register PATH NAME` on its clone)")
    return line


def _print_status(report: dict) -> None:
    cfg = report["config"]
    echo(f"config:      {cfg['path']} ({'present' if cfg['exists'] else 'absent: defaults in use'})")
    if "error" in cfg:
        echo(f"             invalid: {cfg['error']['code']}: {cfg['error']['message']}")
        return
    named = report["device"]
    how = "from the hostname; `cm config set deviceName NAME` renames it" if named["source"] == "hostname" else "set in config.json"
    echo(f"device:      {named['name']} ({how})")
    model = report["model"]
    if model is None:
        echo("model:       not configured (capture still works; run `cm config init`)")
    elif model.get("runtime") == "agent-cli":
        echo(f"model:       {model['label']}")
    else:
        key = "key configured" if model["apiKeyConfigured"] else "KEY MISSING"
        echo(f"model:       {model['model']} at {model['baseUrl']} ({model['api']}, {key}, proxy {model['proxy']})")
    for name, path in report["paths"].items():
        echo(f"{name + ':':<13}{path}")
    if report["dataRootProblem"]:
        problem = report["dataRootProblem"]
        echo(f"             problem: {problem['code']}: {problem['message']}")
    st = report["store"]
    schema = f"schema v{st['schemaVersion']}" if st["exists"] else "not created yet"
    echo(f"store:       {schema}")
    echo(f"registered:  {_projects_line(report['projects'])}")
    inbox = report["inbox"]
    echo(f"inbox:       codex {inbox['codex']}, pi {inbox['pi']}, claude/gemini hooks {inbox.get('hooks', 0)}, "
         f"prompt candidates {inbox['candidates']}")
    obs = ", ".join(f"{k} {v}" for k, v in report["observations"].items()) or "none"
    jobs = ", ".join(f"{k} {v}" for k, v in report["jobs"].items()) or "none"
    echo(f"observations: {obs}")
    echo(f"jobs:        {jobs}")
    cancelled = report.get("cancelled") or {}
    if cancelled.get("cancels"):
        echo(f"cancelled:   {cancelled['observations']} item(s) by {cancelled['cancels']} `cm cancel`(s); never sent")
    if "spend" in report:
        from cmrunner.views import usage

        echo(f"spend:       {usage.status_line(report['spend'])}")
    for line in status_mod.problem_lines(report):
        echo(line)
    if report.get("history"):
        echo(f"history:     {status_mod.history_line(report['history'])}")
    if report.get("sync"):
        echo(f"sync:        {status_mod.sync_line(report['sync'])}")
    drain = report["drain"]
    running = f"running (pid {drain['pid']})" if drain["alive"] else "not running"
    echo(f"drain:       {running}")
    if report.get("lastDrainFailure"):
        echo(f"last drain failure: {status_mod.failure_line(report['lastDrainFailure'])}")
    _print_secrets(report.get("secrets"))


def _print_secrets(secrets: dict | None) -> None:
    if not secrets or "error" in secrets:
        return
    from cmrunner.views import secretreport

    held = secrets["withheld"]
    detail = "; ".join(secretreport.describe(item) for item in held[:5]) + ("; ..." if len(held) > 5 else "")
    echo(f"secrets:     {len(held)} section(s) withheld from agents" + (f": {detail}" if held else "")
               + (" (see `cm secrets list`)" if held else ""))
    if secrets["quarantinedSecrets"]:
        echo(f"             {secrets['quarantinedSecrets']} quarantined observation(s) keep text that looked "
                   "like a secret (`cm secrets purge-quarantine`)")
    if secrets["allowListProblem"]:
        echo(f"             allow-list ignored: {secrets['allowListProblem']}")


@cli.group(invoke_without_command=True)
@click.option("--network", is_flag=True, help="Open the model's network settings instead of the model wizard.")
@click.pass_context
def config(ctx: click.Context, network: bool) -> None:
    """Model setup wizard (alone, in a terminal); `config init|show|get|set` for scripts."""
    if ctx.invoked_subcommand is None:
        from cmrunner.commands import manage

        manage.config_screen(ctx, network)


@config.command("init")
@click.option("--data-root", default=None, help="Absolute data root (default <home>/data).")
@click.option("--base-url", default=None, help="OpenAI-compatible base URL, e.g. https://api.openai.com/v1.")
@click.option("--model", default=None, help="Model name for the Memory Agent.")
@click.option("--api", type=click.Choice(config_mod.APIS), default=None, help="Wire protocol (default responses).")
@click.option("--preset", type=click.Choice(config_mod.PRESETS), default=None)
@click.option("--api-key-env", default="COMMON_MEMORY_API_KEY", show_default=True, help="Name of the key in the private .env.")
@click.option("--api-key-stdin", is_flag=True, help="Read the API key from stdin into the private .env (never echoed).")
@click.option("--proxy", "proxy_mode", type=click.Choice(["direct", "env"]), default="direct", show_default=True)
@click.option("--allow-scope", multiple=True, help="Scope disclosed to the model and injected (repeatable; default global).")
@click.option("--allow-provenance", multiple=True, help="Provenance class the model may see (repeatable; default user_explicit).")
@click.option("--writable-scope", multiple=True, help="Scope the Writer may change (repeatable; default global).")
@click.option("--agent", type=click.Choice(config_mod.AGENT_CLIS), default=None,
              help="Run the Memory Agent through this agent CLI and its own login (no API key).")
@click.option("--agent-path", default=None, help="Absolute path of the agent CLI (default: found on PATH).")
@click.option("--skip-check", is_flag=True,
              help="Save without checking the endpoint (its model list and one tool-call test request) or, with "
                   "--agent, the CLI (one confined test run).")
@click.option("--force", is_flag=True, help="Replace an existing config.json.")
@click.pass_context
def config_init(ctx: click.Context, data_root: str | None, base_url: str | None, model: str | None, api: str | None,
                preset: str | None, api_key_env: str, api_key_stdin: bool, proxy_mode: str,
                allow_scope: tuple[str, ...], allow_provenance: tuple[str, ...], writable_scope: tuple[str, ...],
                agent: str | None, agent_path: str | None, skip_check: bool, force: bool) -> None:
    """Write a valid config.json (and optionally the private key) non-interactively.

    With --base-url (or a --preset that has one) and --model, the endpoint is checked first: its
    model list must hold the model, and the model must answer one small test request with a tool
    call. With --agent, the CLI is run once, confined, on a small test task (as `cm network-test`
    does). Nothing is written when the check fails."""
    home = _home(ctx, may_be_new=True)
    unreadable = configinit.replaceable(home, force)
    if preset is not None and agent is None:
        from cmrunner.manage import providers

        chosen = providers.preset(preset)
        base_url = base_url or chosen.base_url or None
        api = api or chosen.api
    data = configinit.fresh(home, data_root=data_root, base_url=base_url, model=model, api=api, preset=preset,
                            api_key_env=api_key_env, proxy_mode=proxy_mode, allowed_scopes=allow_scope,
                            allowed_provenance=allow_provenance, writable_scopes=writable_scope, agent=agent,
                            agent_path=agent_path)
    keys: dict[str, str] = {}
    if api_key_stdin and agent is not None:
        raise CmError("CONFIG_INVALID", "--agent needs no API key: the CLI uses its own login; drop --api-key-stdin")
    if api_key_stdin:
        if base_url is None:
            raise CmError("CONFIG_INVALID", "--api-key-stdin needs --base-url and --model")
        key = sys.stdin.readline().strip()
        if not key:
            raise CmError("API_KEY_EMPTY", "no API key arrived on stdin; pipe it in, e.g. `cm config init … --api-key-stdin < keyfile`")
        keys[api_key_env] = key
    if preset is not None and agent is None:
        from cmrunner.manage import providers

        keys = providers.with_local_key(home, data, keys)  # a local server's placeholder, checked or not
    if not skip_check and agent is not None:
        from cmrunner.manage import agentsetup

        agentsetup.for_init(home, data)
    elif not skip_check:
        from cmrunner.manage import endpoint

        endpoint.for_init(home, data, keys)
    configinit.publish(home, data, keys, keep_unreadable=unreadable, on_kept=lambda kept: echo(
        f"kept the unreadable config.json as {kept} (its settings were not carried over)"))
    echo(f"wrote {home}/config.json")


@config.command("show")
@click.pass_context
def config_show(ctx: click.Context) -> None:
    """Print the configuration in use (it holds no secrets)."""
    cfg = config_mod.load(_home(ctx))
    echo(json.dumps(cfg.data, indent=2, ensure_ascii=False))
    if not cfg.exists:
        echo("(config.json does not exist; these are the defaults)", err=True)


@config.command("get")
@click.argument("key")
@click.pass_context
def config_get(ctx: click.Context, key: str) -> None:
    """Print one setting: KEY is its dotted path in config.json, e.g. disclosure.allowedProvenance."""
    from cmrunner.manage import configedit

    value = configedit.get_value(_home(ctx), key)
    if value is configedit.ABSENT:
        echo(f"{key} is not set in config.json", err=True)
        return
    echo(configedit.shown(value))


@config.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str) -> None:
    """Change one setting, validated like the whole file (nothing is written if it is invalid).

    VALUE is JSON (5, true, null, ["global"]) or plain text; for a list, +ITEM adds and -ITEM
    removes one item, e.g. `cm config set disclosure.allowedProvenance +document_import`."""
    from cmrunner.manage import configedit

    change = configedit.set_value(_home(ctx), key, value)
    before = "(not set)" if change.before is configedit.ABSENT else configedit.shown(change.before)
    after = "(not set)" if change.after is configedit.ABSENT else configedit.shown(change.after)
    echo(f"{key}: {before} -> {after}" if change.changed else f"{key} is already {after}; nothing changed")


@cli.group()
def project() -> None:
    """Register projects so captures get a project scope."""


def _paths(ctx: click.Context) -> DataPaths:
    return DataPaths(config_mod.load(_home(ctx)).data_root)


_HOW = {
    "known": "the same repository as the known project {id} (its memory is already here, e.g. synced from "
             "another machine): registered with that id, so both machines share one memory",
    "shared": "the same repository as another registered path: they share the project {id} and one memory",
    "joined": "joined to the existing project {id} as you asked",
    "new": "the id comes from the repository's remote, so registering a clone on another machine gives {id} too",
    "generated": "{why}: the id is generated, so another machine will not match it (register there with "
                 "`--id {id}`)",
}


@project.command("register")
@click.argument("path")
@click.argument("name")
@click.option("--id", "project_id", default=None, metavar="ID",
              help="Join a project that is registered or known here (see `cm project list`) instead of "
                   "deriving the id from the repository.")
@click.option("--allow", "allow_access", is_flag=True,
              help="Also let cm read and write its memory (its scope in disclosure.allowedScopes and "
                   "writableScopes) without asking.")
@click.pass_context
def project_register(ctx: click.Context, path: str, name: str, project_id: str | None, allow_access: bool) -> None:
    """Register PATH (absolute) as a project called NAME; in a terminal, offer to allow its memory in the same step.

    The id comes from the git remote of PATH's repository, so the same repository gets the same id,
    and shares one memory, on every machine; without a remote it is generated."""
    from cmrunner.manage import projectaccess

    home = _home(ctx)
    done = projectaccess.register(home, path, name, allow_access, project_id)
    found = done.project
    if done.new:
        echo(f"registered {found.id} -> {found.path}")
        echo(_HOW[done.how].format(id=found.id, why=done.why))
    else:
        echo(f"{found.path} is registered already as {found.id}")
    if done.missing and sys.stdin is not None and sys.stdin.isatty() and is_terminal(err=True) and \
            click.confirm(f"Allow cm to read and write this project's memory ({' and '.join(done.missing)} "
                          f"+{found.scope})?", default=True, err=True):
        done = projectaccess.Registered(found, done.new, projectaccess.allow(home, found), [])
    if done.granted:
        echo(f"allowed: {' and '.join(done.granted)} +{found.scope} (saved in config.json)")
    if done.missing:
        echo(f"it grants nothing yet: to use it, `{projectaccess.remedy(found.path, found.name)}`")


@project.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def project_list(ctx: click.Context, as_json: bool) -> None:
    """List registered projects, and projects known here (a memory file, e.g. synced) but not registered."""
    paths = _paths(ctx)
    found = projects.upgrade(paths) or projects.load(paths)
    known = projects.known_unregistered(paths, found)
    if as_json:
        rows = [dict(p.as_json(), remoteId=p.remote_id, registered=True) for p in found]
        rows += [{"id": pid, "name": None, "path": None, "registered": False} for pid in known]
        echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not found:
        echo("no projects registered")
    for p in found:
        hint = ""
        if p.remote_id is not None and p.remote_id != p.id:
            hint = f"\t(its repository gives {p.remote_id}: `cm project adopt-remote-id {p.id}` shares it across machines)"
        echo(f"{p.id}\t{p.name}\t{p.path}{hint}")
    for pid in known:
        echo(f"{pid}\t(known, not registered here)\tregister this repository's local path with "
             f"`cm project register PATH NAME` (or `--id {pid}`)")


@project.command("remove")
@click.argument("project_id")
@click.pass_context
def project_remove(ctx: click.Context, project_id: str) -> None:
    """Unregister a project, every path of it (its Markdown is kept)."""
    found = projects.remove(_paths(ctx), project_id)
    echo(f"removed {project_id} ({', '.join(p.path for p in found)}); its memory file is kept")


@project.command("adopt-remote-id")
@click.argument("project_id")
@click.pass_context
def project_adopt_remote_id(ctx: click.Context, project_id: str) -> None:
    """Move a project registered before ids came from git remotes to the id its repository gives,
    so its memory is shared with your other machines (its file and your scopes move with it)."""
    from cmrunner.manage import adoptid

    done = adoptid.adopt(_home(ctx), project_id)
    if done.file == "already":
        echo(f"{done.old} is already its repository's id; nothing changed")
        return
    echo(f"{done.old} is now {done.new} ({', '.join(done.paths)}); project:{done.old} became "
         f"project:{done.new} in your scopes")
    if done.file == "moved":
        echo(f"its memory is now projects/{done.new}.md")
    elif done.file == "kept_both":
        echo(f"projects/{done.new}.md was already here (from another machine) and is used from now on; your earlier "
             f"projects/{done.old}.md is kept: bring its sections in with "
             f"`cm import <memory folder>/projects/{done.old}.md --workspace {done.paths[0]}`")
