"""Wiring hosts up: `cm codex-config`, `cm work-config`, `cm mcp-config`, `cm doctor`."""

from __future__ import annotations

import json

import click
from click.core import ParameterSource

from cmrunner.commands.base import _home, cli, echo
from cmrunner.core.errors import CmError


def _generated(paths: list[str]) -> None:
    for path in paths:
        echo(f"wrote {path}")
    echo("review every file before use; nothing was installed")


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
    from cmrunner.manage import bundles

    if output is None:
        if mode == "windows-wsl":
            raise CmError("OUTPUT_REQUIRED", "--mode windows-wsl writes a bundle with the bridge; pass --output")
        echo(bundles.print_codex(_home(ctx), list(workspaces)), nl=False)
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
    from cmrunner.manage import bundles

    _generated(bundles.write(_home(ctx), "work", mode, output, list(workspaces), distro, user, bridge_path))


@cli.command("mcp-config")
@click.option("--host", default="codex", show_default=True, metavar="HOST",
              help="codex, claude-code, claude-desktop, cursor, vscode, gemini, windsurf or zed.")
@click.option("--wsl", is_flag=True, help="Blocks for a Windows host that reaches this WSL runtime via wsl.exe.")
@click.option("--distro", default=None, help="WSL distribution to pin (default WSL_DISTRO_NAME).")
@click.option("--user", default=None, help="Linux user to pin (default this one).")
@click.option("--workspace", "workspaces", multiple=True, help="Registered project to read (repeatable).")
@click.pass_context
def mcp_config_command(ctx: click.Context, host: str, wsl: bool, distro: str | None, user: str | None,
                       workspaces: tuple[str, ...]) -> None:
    """Print cm's MCP server configuration for HOST with this runtime's pinned paths (Codex: TOML, others: JSON)."""
    from cmrunner.manage import mcp_config

    if (distro or user) and not wsl:
        raise CmError("WSL_OPTIONS_WITHOUT_WSL", "--distro and --user go with --wsl")
    echo(mcp_config.render(_home(ctx), list(workspaces), wsl, distro, user, host), nl=False)
    if host != "codex":
        echo(mcp_config.where(host), err=True)


@cli.command("doctor")
@click.option("--codex-home", default=None, help="Codex configuration folder (default $CODEX_HOME or ~/.codex).")
@click.option("--profile", "profile_name", default="common-memory", show_default=True, help="Codex profile name.")
@click.option("--probe-model", is_flag=True,
              help="Also send the model one small request, as `cm network-test` does (recorded in `cm usage`).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object for scripts.")
@click.pass_context
def doctor_command(ctx: click.Context, codex_home: str | None, profile_name: str, probe_model: bool,
                   as_json: bool) -> None:
    """Check the installation (model, data root, secrets) and every agent here, one group each; changes nothing."""
    from cmrunner.manage import bundles, doctor
    from cmrunner.manage.integrations import checks as host_checks

    home = _home(ctx)
    explicit = codex_home is not None or ctx.get_parameter_source("profile_name") is not ParameterSource.DEFAULT
    found = doctor.run(home, probe_model) + host_checks.host_groups(home, codex_home or bundles.codex_home(), profile_name,
                                                       explicit)
    if as_json:
        echo(json.dumps([c.as_json() for c in found], indent=2))
    else:
        for check in found:
            group = f"{check.group} · " if check.group else ""
            echo(f"{check.state:<5} {group}{check.name}: {check.detail}")
    if any(c.state == "fail" for c in found):
        ctx.exit(1)
