"""The management CLI (click). The only place that prints and chooses exit codes.

Domain code raises ``CmError``; ``CmGroup.invoke`` turns it into one ``cm: CODE: message`` line
on stderr and exit code 1 (2 stays click's usage error). ``cm hook``, ``cm capture`` and
``cm session-drain`` are dispatched in ``cmrunner.entry`` before this module is imported; they are
listed here only so that ``cm --help`` shows them.
"""

from __future__ import annotations

import json
import sys
import time

import click

from cmrunner import config as config_mod, envfile, projects, status as status_mod
from cmrunner.errors import CmError
from cmrunner.home import DataPaths, resolve_home


class CmGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except CmError as exc:
            click.echo(exc.line(), err=True)
            ctx.exit(1)


def _home(ctx: click.Context) -> str:
    return resolve_home(ctx.obj.get("home"))


@click.group(cls=CmGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", "home", default=None, help="Configuration home (default: $COMMON_MEMORY_HOME or ~/.common-memory).")
@click.version_option(package_name="common-memory-cm", prog_name="cm")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """cm: durable, user-owned memory for coding agents."""
    ctx.ensure_object(dict)
    ctx.obj["home"] = home


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Configuration, storage paths, queue counts and the drain (creates nothing)."""
    report = status_mod.gather(_home(ctx))
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    cfg = report["config"]
    click.echo(f"config:      {cfg['path']} ({'present' if cfg['exists'] else 'absent: defaults in use'})")
    if "error" in cfg:
        click.echo(f"             invalid: {cfg['error']['code']}: {cfg['error']['message']}")
        return
    model = report["model"]
    if model is None:
        click.echo("model:       not configured (capture still works; run `cm config init`)")
    else:
        key = "key configured" if model["apiKeyConfigured"] else "KEY MISSING"
        click.echo(f"model:       {model['model']} at {model['baseUrl']} ({model['api']}, {key}, proxy {model['proxy']})")
    for name, path in report["paths"].items():
        click.echo(f"{name + ':':<13}{path}")
    st = report["store"]
    click.echo(f"store:       {'schema v%s' % st['schemaVersion'] if st['exists'] else 'not created yet'}")
    inbox = report["inbox"]
    click.echo(f"inbox:       codex {inbox['codex']}, pi {inbox['pi']}, prompt candidates {inbox['candidates']}")
    obs = ", ".join(f"{k} {v}" for k, v in report["observations"].items()) or "none"
    jobs = ", ".join(f"{k} {v}" for k, v in report["jobs"].items()) or "none"
    click.echo(f"observations: {obs}")
    click.echo(f"jobs:        {jobs}")
    for failure in report["isolatedSessions"]:
        click.echo(f"isolated:    {failure['issue']} (recover with `cm session-drain --recover {failure['recoveryId']}`)")
    drain = report["drain"]
    click.echo(f"drain:       {'running (pid %s)' % drain['pid'] if drain['alive'] else 'not running'}")


@cli.group()
def config() -> None:
    """Write or show the configuration without the interactive wizard."""


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
@click.option("--force", is_flag=True, help="Replace an existing config.json.")
@click.pass_context
def config_init(ctx: click.Context, data_root: str | None, base_url: str | None, model: str | None, api: str | None,
                preset: str | None, api_key_env: str, api_key_stdin: bool, proxy_mode: str,
                allow_scope: tuple[str, ...], allow_provenance: tuple[str, ...], writable_scope: tuple[str, ...],
                force: bool) -> None:
    """Write a valid config.json (and optionally the private key) non-interactively."""
    home = _home(ctx)
    if config_mod.load(home).exists and not force:
        raise CmError("CONFIG_EXISTS", "config.json already exists; pass --force to replace it")
    data = config_mod.default_config(home)
    if data_root:
        data["dataRoot"] = data_root
    if allow_scope:
        data["disclosure"]["allowedScopes"] = list(allow_scope)
    if allow_provenance:
        data["disclosure"]["allowedProvenance"] = list(allow_provenance)
    if writable_scope:
        data["writableScopes"] = list(writable_scope)
    if (base_url is None) != (model is None):
        raise CmError("CONFIG_INVALID", "--base-url and --model go together; pass both or neither")
    if base_url is not None:
        remote: dict = {"provider": "openai-compatible", "baseUrl": base_url, "model": model,
                        "apiKeyEnv": api_key_env, "apiKeySource": "private-env", "proxy": {"mode": proxy_mode}}
        if api:
            remote["api"] = api
        if preset:
            remote["preset"] = preset
        data["remote"] = remote
    config_mod.validate(data)
    if api_key_stdin:
        if base_url is None:
            raise CmError("CONFIG_INVALID", "--api-key-stdin needs --base-url and --model")
        key = sys.stdin.readline().strip()
        if not key:
            raise CmError("API_KEY_EMPTY", "no API key arrived on stdin; pipe it in, e.g. `cm config init … --api-key-stdin < keyfile`")
        envfile.update(home, {api_key_env: key})
    config_mod.save(home, data)
    click.echo(f"wrote {home}/config.json")


@config.command("show")
@click.pass_context
def config_show(ctx: click.Context) -> None:
    """Print the configuration in use (it holds no secrets)."""
    cfg = config_mod.load(_home(ctx))
    click.echo(json.dumps(cfg.data, indent=2, ensure_ascii=False))
    if not cfg.exists:
        click.echo("(config.json does not exist; these are the defaults)", err=True)


@cli.group()
def project() -> None:
    """Register projects so captures get a project scope."""


def _paths(ctx: click.Context) -> DataPaths:
    return DataPaths(config_mod.load(_home(ctx)).data_root)


@project.command("register")
@click.argument("path")
@click.argument("name")
@click.pass_context
def project_register(ctx: click.Context, path: str, name: str) -> None:
    """Register PATH (absolute) as a project called NAME."""
    found = projects.register(_paths(ctx), path, name)
    click.echo(f"registered {found.id} -> {found.path}")
    click.echo(f"it grants nothing yet: add project:{found.id} to disclosure.allowedScopes and writableScopes to use it")


@project.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def project_list(ctx: click.Context, as_json: bool) -> None:
    """List registered projects."""
    found = projects.load(_paths(ctx))
    if as_json:
        click.echo(json.dumps([p.as_json() for p in found], indent=2, ensure_ascii=False))
        return
    if not found:
        click.echo("no projects registered")
    for p in found:
        click.echo(f"{p.id}\t{p.name}\t{p.path}")


@project.command("remove")
@click.argument("project_id")
@click.pass_context
def project_remove(ctx: click.Context, project_id: str) -> None:
    """Unregister a project (its Markdown is kept)."""
    found = projects.remove(_paths(ctx), project_id)
    click.echo(f"removed {found.id} ({found.path}); its memory file is kept")


@cli.command()
@click.pass_context
def flush(ctx: click.Context) -> None:
    """Process queued work now, in the foreground; exit 1 unless everything was processed."""
    from cmrunner.writer_proc import flush as flush_mod

    cfg = config_mod.load(_home(ctx))

    def progress(outcome: object) -> None:
        code = f" ({outcome.code})" if outcome.code else ""
        click.echo(f"job {outcome.job_id[:12]}: {outcome.state}{code}")

    report = flush_mod.flush(DataPaths(cfg.data_root), cfg, progress)
    if report.followed:
        click.echo("a running drain held the queue; followed it to the end")
    left = ", ".join(f"{k} {v}" for k, v in report.remaining.items() if v)
    click.echo(f"remaining: {left or 'nothing'}{'; a job is waiting for its backoff or lease' if report.waiting else ''}")
    if not report.complete:
        click.echo("flush incomplete: see `cm status`", err=True)
        ctx.exit(1)


@cli.command()
@click.argument("job_id")
@click.pass_context
def retry(ctx: click.Context, job_id: str) -> None:
    """Revive a dead or quarantined job (its history is kept) and start a drain."""
    from cmrunner import drainlease, store
    from cmrunner.writer_proc import jobs

    home = _home(ctx)
    paths = DataPaths(config_mod.load(home).data_root)
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            jobs.retry(conn, job_id, int(time.time() * 1000))
            drainlease.ensure_drain(conn, home)
    finally:
        conn.close()
    click.echo(f"job {job_id} queued for another attempt")


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the temporary home and print its path.")
def demo(keep: bool) -> None:
    """A capture round trip on a fresh temporary home: print what was captured."""
    from cmrunner import demo as demo_mod

    for line in demo_mod.run(keep=keep):
        click.echo(line)


@cli.command("network-test")
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts.")
@click.pass_context
def network_test(ctx: click.Context, as_json: bool) -> None:
    """Send one small synthetic model request; report the route and the outcome (opens no database)."""
    from cmrunner.writer_proc import nettest

    report = nettest.run(config_mod.load(_home(ctx)))
    outcome = report["outcome"]
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        route = report["route"] or {}
        via = f"proxy {route['proxy']}" if route.get("via") == "proxy" else "direct"
        click.echo(f"model:   {report['model']} at {report['baseUrl']} ({report['api']})")
        if route:
            click.echo(f"route:   {via} (mode {route['mode']}: {route['reason']})")
        if outcome["ok"]:
            click.echo(f"outcome: ok in {outcome['elapsedMs']} ms")
        else:
            status = "".join(f", {k} {outcome[k]}" for k in ("httpStatus", "proxyStatus") if k in outcome)
            click.echo(f"outcome: {outcome['code']} at {outcome['stage']} ({outcome['reason']}{status})")
    if not outcome["ok"]:
        ctx.exit(1)


@cli.command("mcp")
@click.option("--client-id", default=None, help="Stable id of this integration (required for relay and init).")
@click.option("--capability", "capabilities", multiple=True, type=click.Choice(["relay", "init", "read"]),
              help="relay (default), init or read; repeatable. Fixed for the life of the process.")
@click.option("--global", "allow_global", is_flag=True, help="Allow the global context (Profile, Preferences).")
@click.option("--workspace", "workspaces", multiple=True, help="Absolute path of a registered project (repeatable).")
@click.option("--accept-client-reported-user-turns", "accept", is_flag=True,
              help="Trust this local host to relay verbatim user turns (relay only).")
@click.pass_context
def mcp_command(ctx: click.Context, client_id: str | None, capabilities: tuple[str, ...], allow_global: bool,
                workspaces: tuple[str, ...], accept: bool) -> None:
    """Serve memory to one MCP host over stdio (stdout carries MCP only)."""
    from cmrunner import mcp_access, mcp_server

    launch = mcp_access.Launch(capabilities, client_id, allow_global, workspaces, accept)
    mcp_server.serve(mcp_access.Binding(_home(ctx), launch))


@cli.command("import")
@click.argument("file")
@click.option("--workspace", default=None, help="Import into this registered project (default: global).")
@click.option("--author", default="unknown", show_default=True, help="user, agent, third_party, mixed or unknown.")
@click.option("--label", default=None, help="Display label (default: the file name).")
@click.option("--no-wait", is_flag=True, help="Only queue; a background drain processes it.")
@click.pass_context
def import_command(ctx: click.Context, file: str, workspace: str | None, author: str, label: str | None,
                   no_wait: bool) -> None:
    """Import one Markdown file through the Writer; exit 1 unless every part was processed."""
    from cmrunner import importer

    def progress(outcome: object) -> None:
        code = f" ({outcome.code})" if outcome.code else ""
        click.echo(f"job {outcome.job_id[:12]}: {outcome.state}{code}")

    report = importer.run(_home(ctx), file, workspace, author, label, not no_wait, progress)
    click.echo(f"import {report.import_id} into {report.scope}: "
               + ("duplicate of an earlier import (its metadata is kept)" if report.duplicate else "queued"))
    for part in report.parts:
        where = f"; retained in {', '.join(part['retainedIn'])}" if part["retainedIn"] else ""
        issue = f" ({part['issue']})" if part["issue"] else ""
        hint = {"dead": f"; run `cm retry {part['jobId']}`",
                "quarantined": "; final for this content: change the file to import it again"}.get(part["state"], "")
        click.echo(f"part {part['index']}/{part['count']}: {part['state']}{issue}{where}{hint}")
    if report.note:
        click.echo(report.note, err=True)
    click.echo(f"complete: {'true' if report.complete else 'false'}")
    if report.waited and not report.complete:
        ctx.exit(1)


@cli.command("show")
@click.option("--plain", is_flag=True, help="Plain output even in a terminal.")
@click.option("--workspace", default=None, help="Also show this registered project's memory.")
@click.pass_context
def show_command(ctx: click.Context, plain: bool, workspace: str | None) -> None:
    """Print the memory directory and exactly what consumers receive (opens no database)."""
    from cmrunner import show as show_mod

    report = show_mod.gather(_home(ctx), workspace)
    styled = not plain and workspace is None and sys.stdout.isatty()

    def label(text: str) -> str:
        return click.style(text, bold=True) if styled else text

    click.echo(f"{label('memory directory:')} {report.memory_dir}")
    click.echo(f"{label('contexts:')} {', '.join(report.contexts) or 'none'}")
    for note in report.notes:
        click.echo(f"{label('note:')} {note}")
    click.echo("")
    click.echo(report.text, nl=False)


def _generated(paths: list[str]) -> None:
    for path in paths:
        click.echo(f"wrote {path}")
    click.echo("review every file before use; nothing was installed")


@cli.command("codex-config")
@click.option("--mode", type=click.Choice(["posix", "windows-wsl"]), default=None,
              help="Where Codex runs relative to cm (a bundle needs --output).")
@click.option("--output", default=None, help="Absolute path of a new folder for the bundle (default: print).")
@click.option("--distro", default=None, help="WSL distribution (windows-wsl; default this one).")
@click.option("--user", default=None, help="Linux user (windows-wsl; default this one).")
@click.option("--bridge-path", default=None, help="Windows path of the bridge script (windows-wsl).")
@click.option("--workspace", "workspaces", multiple=True, help="Registered project to read (repeatable).")
@click.pass_context
def codex_config_command(ctx: click.Context, mode: str | None, output: str | None, distro: str | None,
                         user: str | None, bridge_path: str | None, workspaces: tuple[str, ...]) -> None:
    """Print (or write as a bundle) the Codex profile: six hooks, the read MCP server, /memory-refresh."""
    from cmrunner import bundles

    if output is None:
        if mode == "windows-wsl":
            raise CmError("OUTPUT_REQUIRED", "--mode windows-wsl writes a bundle with the bridge; pass --output")
        click.echo(bundles.print_codex(_home(ctx), list(workspaces)), nl=False)
        return
    _generated(bundles.write(_home(ctx), "codex", mode or "posix", output, list(workspaces), distro, user,
                             bridge_path))


@cli.command("work-config")
@click.option("--mode", type=click.Choice(["posix", "windows-wsl"]), required=True,
              help="Where the ChatGPT Work agent runs relative to cm.")
@click.option("--output", required=True, help="Absolute path of a new folder for the bundle.")
@click.option("--distro", default=None, help="WSL distribution (windows-wsl; default this one).")
@click.option("--user", default=None, help="Linux user (windows-wsl; default this one).")
@click.option("--bridge-path", default=None, help="Windows path of the bridge script (windows-wsl).")
@click.option("--workspace", "workspaces", multiple=True, help="Registered project to read (repeatable).")
@click.pass_context
def work_config_command(ctx: click.Context, mode: str, output: str, distro: str | None, user: str | None,
                        bridge_path: str | None, workspaces: tuple[str, ...]) -> None:
    """Write a ChatGPT Work bundle: hooks, read and init MCP servers, /memory-refresh (and the bridge)."""
    from cmrunner import bundles

    _generated(bundles.write(_home(ctx), "work", mode, output, list(workspaces), distro, user, bridge_path))


@cli.command("mcp-config")
@click.option("--wsl", is_flag=True, help="Blocks for a Windows host that reaches this WSL runtime via wsl.exe.")
@click.option("--distro", default=None, help="WSL distribution to pin (default WSL_DISTRO_NAME).")
@click.option("--user", default=None, help="Linux user to pin (default this one).")
@click.option("--workspace", "workspaces", multiple=True, help="Registered project to read (repeatable).")
@click.pass_context
def mcp_config_command(ctx: click.Context, wsl: bool, distro: str | None, user: str | None,
                       workspaces: tuple[str, ...]) -> None:
    """Print the init and read [mcp_servers.*] blocks with this runtime's pinned paths."""
    from cmrunner import mcp_config

    if (distro or user) and not wsl:
        raise CmError("WSL_OPTIONS_WITHOUT_WSL", "--distro and --user go with --wsl")
    click.echo(mcp_config.render(_home(ctx), list(workspaces), wsl, distro, user), nl=False)


@cli.command("doctor")
@click.option("--codex-home", default=None, help="Codex configuration folder (default $CODEX_HOME or ~/.codex).")
@click.option("--profile", "profile_name", default="common-memory", show_default=True, help="Codex profile name.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts.")
@click.pass_context
def doctor_command(ctx: click.Context, codex_home: str | None, profile_name: str, as_json: bool) -> None:
    """Check the installation for Codex (files, hooks and their trust, the read MCP server); changes nothing."""
    from cmrunner import bundles, doctor

    checks = doctor.run(_home(ctx), codex_home or bundles.codex_home(), profile_name)
    if as_json:
        click.echo(json.dumps([c.as_json() for c in checks], indent=2))
    else:
        for check in checks:
            click.echo(f"{check.state:<5} {check.name}: {check.detail}")
    if any(c.state == "fail" for c in checks):
        ctx.exit(1)


@cli.command("hook", context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def hook_stub(args: tuple[str, ...]) -> None:
    """Codex / ChatGPT Work hook entry: `cm hook codex|work --home <abs>` (event on stdin)."""
    from cmrunner.hooks import codex

    sys.exit(codex.main(list(args)))


@cli.command("capture", context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def capture_stub(args: tuple[str, ...]) -> None:
    """Pi bridge entry: `cm capture --home <abs>` (one Pi event as JSON on stdin)."""
    from cmrunner.hooks import pi

    sys.exit(pi.main(list(args)))


@cli.command("session-refresh", context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def refresh_stub(args: tuple[str, ...]) -> None:
    """Replace this session's frozen memory (the /memory-refresh skill runs it)."""
    from cmrunner.hooks import refresh

    sys.exit(refresh.main(list(args)))


@cli.command("session-drain", context_settings={"ignore_unknown_options": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def drain_stub(args: tuple[str, ...]) -> None:
    """The detached single-instance consumer: `cm session-drain --home <abs>`."""
    from cmrunner.writer_proc import drain

    sys.exit(drain.main(list(args)))


def main() -> None:
    cli(prog_name="cm")
