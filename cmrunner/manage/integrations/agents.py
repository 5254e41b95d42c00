"""``cm agents``: the Agent Integration of the terminal UI, scriptable, one host at a time.

Contract:
- ``listing`` reports every host cm knows, in ``discovery.LISTED`` order, with its public id,
  whether cm installed it (the manifest), whether it was found here, and its version: the first
  version-looking word of ``<binary> --version`` (run with a bounded timeout, all at once), or
  ``None`` when there is no binary or it did not answer. A version is cached in
  ``<home>/cache/host-versions.json`` under the binary's resolved path with that file's size and
  mtime, so a listing runs a host's ``--version`` (5-8 s for Node hosts) only after an install or
  upgrade changed the file; a failed answer is never cached. The cache is the only thing written.
- ``install`` and ``remove`` change the selection by one host and hand it to ``manager.plan`` and
  ``manager.apply``: the same checks, transaction, rollback and ownership manifest as the UI.
  Installing an installed host refreshes its pins; removing one cm did not install changes nothing.
  ChatGPT Work's import server is kept as it was unless ``init`` says otherwise. The manifest is
  read, planned on and replaced under one hold of the host-configuration lock (``txn.locked``), so
  two ``cm agents`` (or one and the UI) never lose each other's change.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from cmrunner.core import fsutil
from cmrunner.core.errors import CmError
from cmrunner.manage.integrations import discovery, manager, txn

VERSION_TIMEOUT_S = 15
_VERSION_RE = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.]+)?")


@dataclass
class Row:
    id: str
    public_id: str
    title: str
    installed: bool
    found: bool
    detail: str
    version: str | None

    def as_json(self) -> dict:
        return {"id": self.public_id, "title": self.title, "installed": self.installed, "found": self.found,
                "version": self.version, "detail": self.detail}


def version_of(binary: str | None) -> str | None:
    if binary is None:
        return None
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION_RE.search(proc.stdout or "") if proc.returncode == 0 else None
    return match.group(0) if match else None


def _stamp(binary: str) -> tuple[str, str] | None:
    """The cache key of a binary: its resolved path, and the size and mtime of the file it runs."""
    try:
        real = os.path.realpath(binary)
        st = os.stat(real)
    except OSError:
        return None
    return real, f"{st.st_size}:{st.st_mtime_ns}"


def _cache_path(home: str) -> str:
    return os.path.join(home, "cache", "host-versions.json")


def _read_cache(home: str) -> dict[str, dict[str, str]]:
    try:
        with open(_cache_path(home), "rb") as fh:
            data = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items()
            if isinstance(v, dict) and isinstance(v.get("stamp"), str) and isinstance(v.get("version"), str)}


def _write_cache(home: str, cache: dict[str, dict[str, str]]) -> None:
    # A cache that cannot be written only costs the next listing its speed: never an error.
    try:
        fsutil.ensure_private_dir(os.path.dirname(_cache_path(home)), "the cache folder")
        fsutil.write_atomic(_cache_path(home), json.dumps(cache, sort_keys=True).encode())
    except (OSError, CmError):
        pass


def cached_versions(home: str, binaries: list[str | None]) -> list[str | None]:
    """``version_of`` for each binary, answered from the cache while the binary's file is unchanged."""
    cache = _read_cache(home) if os.path.isdir(home) else {}
    stamps = [_stamp(b) if b else None for b in binaries]
    missing = [i for i, (b, st) in enumerate(zip(binaries, stamps))
               if b and not (st and cache.get(st[0], {}).get("stamp") == st[1])]
    with ThreadPoolExecutor(max_workers=max(1, len(missing))) as pool:
        found = dict(zip(missing, pool.map(lambda i: version_of(binaries[i]), missing)))
    changed = False
    for i, version in found.items():
        stamp = stamps[i]
        if version is not None and stamp is not None:
            cache[stamp[0]] = {"stamp": stamp[1], "version": version}
            changed = True
    if changed and os.path.isdir(home):
        _write_cache(home, cache)
    return [found[i] if i in found else (cache[st[0]]["version"] if b and st else None)
            for i, (b, st) in enumerate(zip(binaries, stamps))]


def listing(home: str, hosts: dict[str, discovery.Host] | None = None) -> list[Row]:
    hosts = hosts or discovery.discover()
    installed = manager.installed(home)
    order = [hosts[h] for h in discovery.LISTED]
    versions = cached_versions(home, [h.binary for h in order])
    return [Row(h.id, discovery.public_id(h.id), h.title, h.id in installed, h.available,
                h.found if h.available or h.found != "not found" else h.limits, version)
            for h, version in zip(order, versions)]


def install(home: str, host: str, init: bool | None = None, grant: bool = False,
            hosts: dict[str, discovery.Host] | None = None) -> manager.Plan:
    with txn.locked(home):  # the manifest read here is the one planned on
        installed = manager.installed(home)
        keep_init = bool(installed.get("chatgpt", {}).get("init"))
        planned = manager.plan(home, [*installed, host], keep_init if init is None else init, grant, hosts)
        manager.apply(home, planned)
    return planned


def remove(home: str, host: str, hosts: dict[str, discovery.Host] | None = None) -> manager.Plan | None:
    if host not in manager.installed(home):
        return None
    with txn.locked(home):
        installed = manager.installed(home)
        if host not in installed:
            return None
        keep_init = bool(installed.get("chatgpt", {}).get("init"))
        planned = manager.plan(home, [h for h in installed if h != host], keep_init, False, hosts)
        manager.apply(home, planned)
    return planned
