"""Current Configuration: paths, data size, model, key status, network and the whole configuration.

Contract: reads ``config.json``, the names (never the values) in the private ``.env``, the
integrations manifest and file sizes under the data root. It opens no network connection, never
opens SQLite and creates nothing. Secrets never appear: private values are shown as
"set"/"not set", and a proxy appears as scheme, host and port only.
"""

from __future__ import annotations

import json
import os

from cmrunner.core import config as config_mod, envfile
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths, config_path, env_path
from cmrunner.manage import netsettings
from cmrunner.manage.integrations import discovery, manifest as manifest_mod

SIZE_WALK_LIMIT = 100_000


def data_size(root: str) -> int | None:
    """Bytes of regular files under ``root`` (bounded walk; ``None`` if the root does not exist)."""
    if not os.path.isdir(root):
        return None
    total, seen = 0, 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        for name in files:
            seen += 1
            if seen > SIZE_WALK_LIMIT:
                return total
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def human(size: int | None) -> str:
    if size is None:
        return "not created yet"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return str(size)


def lines(home: str) -> list[str]:
    """The Current Configuration screen as text lines."""
    out = [f"Configuration home   {home}", f"config.json          {config_path(home)}",
           f"private .env         {env_path(home)} (mode 0600; values never shown)"]
    try:
        cfg = config_mod.load(home)
    except CmError as exc:
        return out + ["", f"config.json is invalid: {exc.code}: {exc.message}"]
    paths = DataPaths(cfg.data_root)
    out += [f"Data root            {paths.root}", f"Memory (Markdown)    {paths.memory}",
            f"Runtime database     {paths.db}", f"Data size            {human(data_size(paths.root))}", ""]
    try:
        private = envfile.read(home)
    except CmError as exc:
        private = {}
        out.append(f"private .env is unreadable: {exc.code}")
    remote = cfg.remote
    if remote is None:
        out.append("Model                not configured (Change Model / Provider)")
    elif config_mod.is_agent_cli(remote):
        out += [f"Memory Agent         {config_mod.runtime_label(remote)}",
                f"Agent path           {remote.get('agentPath') or '(found on PATH)'}"]
    else:
        key = "set" if private.get(remote["apiKeyEnv"]) else "MISSING - enter it in Change Model / Provider"
        out += [f"Provider             {remote.get('preset', 'custom')} at {remote['baseUrl']}",
                f"Model                {remote['model']} ({remote.get('api', 'responses')})",
                f"API key              {remote['apiKeyEnv']}: {key}"]
        net = netsettings.describe(home)
        out.append(f"Network mode         {net['mode']}"
                   + ("" if net["mode"] != "legacy" else " (no remote.proxy: host route, kept until you save "
                                                          "network settings)"))
        if net["mode"] == "custom":
            out.append(f"Proxy URL            {'set' if net['proxyUrlSet'] else 'MISSING'} (private)")
            out.append(f"Bypass list          {net['noProxy'] or '(none)'}")
        out.append(f"Extra CA file        {net['caFile'] or '(none)'}")
        if "route" in net:
            route = net["route"]
            via = f"proxy {route['proxy']}" if route["via"] == "proxy" else "direct"
            out.append(f"Route                {via}: {route['reason']}")
        else:
            out.append(f"Route                cannot be resolved: {net['routeError']}")
    try:
        hosts = manifest_mod.load(home)["hosts"]
        names = ", ".join(discovery.TITLES[h] for h in discovery.HOST_IDS if h in hosts) or "none"
    except CmError as exc:
        names = f"unknown ({exc.code})"
    out += [f"Agents installed     {names}", "", "Private values (names only):"]
    out += [f"  {name}: {'set' if value else 'empty'}" for name, value in sorted(private.items())] or ["  (none)"]
    out += ["", "config.json" + ("" if cfg.exists else " (absent: defaults shown)") + ":"]
    out += json.dumps(cfg.data, indent=2, ensure_ascii=False).splitlines()
    return out
