"""Complete uninstall: owned integrations, configuration and the program; Memory Data only if confirmed.

Contract:
- ``plan`` changes nothing and lists what would go, what stays and what blocks. Blockers fail the
  whole uninstall closed: a live Writer (the drain lease holder is a running process, or a job
  holds an unexpired lease), an unsafe path (the configuration home or data root is ``/``, the
  user's home folder, a symbolic link or not a folder), a reference to cm in an agent's
  configuration that cm did not write (removing the program would leave it dangling), and any
  integration removal that ``manager.plan`` refuses (an owned file the user changed).
- ``execute`` re-checks the blockers, removes the integrations in one transaction, then the
  private ``.env``, ``config.json`` (with its pre-validated cache) and cm's state files, then — only with ``remove_data`` — the
  data root's known entries (``memory/``, ``runtime.sqlite*``, ``runtime/``; anything else is kept
  and reported), then empty folders, then the program itself when asked and when cm was installed
  as a package (a source checkout or editable install is never removed: fail closed).
- Memory Data is kept unless ``remove_data`` is true; the UI asks for it separately, default no.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

from cmrunner.core import config as config_mod, drainlease, jobstore, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths, config_path, env_path
from cmrunner.manage import setupstate
from cmrunner.manage.integrations import codexroot, discovery, manager, manifest as manifest_mod, tomledit, txn

DIST = "common-memory-cm"
DATA_ENTRIES = ("memory", "runtime", "runtime.sqlite", "runtime.sqlite-wal", "runtime.sqlite-shm",
                "runtime.sqlite-journal")
MARKERS = ("cmrunner", "common_memory", "common-memory", "COMMON_MEMORY")


@dataclass
class UninstallPlan:
    home: str
    data_root: str
    integrations: manager.Plan | None
    config_files: list[str]
    program: list[str] | None
    program_note: str
    blockers: list[str] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        return bool(self.blockers)


def _unsafe(path: str, what: str) -> str | None:
    normal = os.path.normpath(path)
    if normal in ("/", os.path.expanduser("~")) or not os.path.isabs(normal):
        return f"{what} {normal} is not a folder cm may delete"
    if os.path.lexists(normal) and (os.path.islink(normal) or not os.path.isdir(normal)):
        return f"{what} {normal} is a link or not a folder"
    return None


def writer_blockers(data_root: str) -> list[str]:
    paths = DataPaths(data_root)
    try:
        conn = store.open_existing(paths)
    except CmError as exc:
        return [f"the runtime store cannot be read ({exc.code}); stop any cm process and retry"]
    if conn is None:
        return []
    try:
        found = []
        holder = drainlease.live_holder(conn)
        if holder is not None:
            found.append(f"a Writer is running (pid {holder.pid}); wait for it to finish or stop it, then retry")
        now = int(time.time() * 1000)
        live = jobstore.count_live_leases(conn, now)
        if live:
            found.append(f"{live} job(s) hold an active Writer lease; wait until they finish")
        return found
    finally:
        conn.close()


def _candidate_files(hosts: dict[str, discovery.Host]) -> list[str]:
    found = []
    root = hosts["codex"].root
    if os.path.isdir(root):
        for name in sorted(os.listdir(root)):
            if name in ("config.toml", "hooks.json") or name.endswith(".config.toml"):
                found.append(os.path.join(root, name))
        skill = os.path.join(root, codexroot.SKILL_DIR, "SKILL.md")
        if os.path.isfile(skill):
            found.append(skill)
    pi_root = hosts["pi"].root
    extensions = os.path.join(pi_root, "extensions")
    if os.path.isdir(extensions):
        for name in sorted(os.listdir(extensions)):
            path = os.path.join(extensions, name)
            found.append(os.path.join(path, "index.ts") if os.path.isdir(path) else path)
    found.append(os.path.join(pi_root, "settings.json"))
    found.append(os.path.join(hosts["claude-code"].root, "settings.json"))
    if hosts["claude-code"].mcp_file:
        found.append(hosts["claude-code"].mcp_file)
    found.append(os.path.join(hosts["gemini"].root, "settings.json"))
    return [p for p in found if os.path.isfile(p)]


def unmanaged_references(home: str, hosts: dict[str, discovery.Host]) -> list[str]:
    """Agent configuration files that mention cm outside what the manifest says cm wrote."""
    manifest = manifest_mod.load(home)
    found = []
    for path in _candidate_files(hosts):
        if path in manifest["files"]:
            continue
        try:
            text = (txn.read_bytes(path) or b"").decode("utf-8", "replace")
            ours = [tomledit.Entry.from_json(e) for e in manifest["entries"] if e["file"] == path]
            if ours:
                text = manager.without(text, ours, path)
        except CmError:
            found.append(path)
            continue
        if any(marker in text for marker in MARKERS) or home in text:
            found.append(path)
    return found


def program_removal() -> tuple[list[str] | None, str]:
    """The command that removes this installation, or ``None`` with the reason it stays."""
    try:
        dist = importlib.metadata.distribution(DIST)
    except importlib.metadata.PackageNotFoundError:
        return None, "cm runs from a source checkout, not an installed package: remove the checkout yourself"
    direct = dist.read_text("direct_url.json")
    if direct:
        try:
            editable = json.loads(direct).get("dir_info", {}).get("editable", False)
        except ValueError:
            editable = True
        if editable:
            return None, "cm is an editable install of a source checkout: remove the checkout yourself"
    if importlib.util.find_spec("pip") is None:
        return None, f"pip is not available to {sys.executable}; remove the package {DIST} with your installer"
    argv = [sys.executable, "-m", "pip", "uninstall", "-y", DIST]
    return argv, f"runs `{' '.join(argv)}`"


def plan(home: str, hosts: dict[str, discovery.Host] | None = None) -> UninstallPlan:
    hosts = hosts or discovery.discover()
    cfg = config_mod.load(home)
    blockers = [b for b in (_unsafe(home, "the configuration home"), _unsafe(cfg.data_root, "the data root")) if b]
    blockers += writer_blockers(cfg.data_root)
    integrations = None
    try:
        integrations = manager.plan(home, [], hosts=hosts)
    except CmError as exc:
        blockers.append(f"{exc.code}: {exc.message}")
    try:
        for path in unmanaged_references(home, hosts):
            blockers.append(f"{path} refers to cm but cm did not write it; remove that reference by hand first")
    except CmError as exc:
        blockers.append(f"{exc.code}: {exc.message}")
    files = [p for p in (env_path(home), config_path(home), os.path.join(home, setupstate.FILE_NAME),
                         os.path.join(home, setupstate.UI_FILE)) if os.path.lexists(p)]
    program, note = program_removal()
    return UninstallPlan(home, cfg.data_root, integrations, files, program, note,
                         blockers)


def _remove_data(data_root: str) -> list[str]:
    kept = []
    for name in sorted(os.listdir(data_root)):
        path = os.path.join(data_root, name)
        if name not in DATA_ENTRIES:
            kept.append(path)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    if not kept:
        os.rmdir(data_root)
    return kept


def execute(home: str, planned: UninstallPlan, remove_data: bool, remove_program: bool) -> list[str]:
    """Carry out the plan (see module contract); returns one line per thing done or kept."""
    blockers = writer_blockers(planned.data_root) + planned.blockers
    if blockers:
        raise CmError("UNINSTALL_BLOCKED", blockers[0])
    done = []
    if planned.integrations is not None and not planned.integrations.empty:
        manager.apply(home, planned.integrations)
        removed = ", ".join(discovery.TITLES[h] for h in planned.integrations.remove) or "none"
        done.append(f"removed integrations: {removed}")
    for path in planned.config_files:
        if os.path.lexists(path):
            os.unlink(path)
            done.append(f"removed {path}")
    # Derived from config.json, and the host-configuration lock: they go with it, unreported.
    for derived in (config_mod.cache_path(home), os.path.join(home, txn.LOCK_FILE)):
        if os.path.lexists(derived):
            os.unlink(derived)
    if remove_data and os.path.isdir(planned.data_root):
        kept = _remove_data(planned.data_root)
        done.append(f"removed Memory Data in {planned.data_root}")
        done += [f"kept {path} (not cm's)" for path in kept]
    elif os.path.isdir(planned.data_root):
        done.append(f"kept Memory Data in {planned.data_root}")
    backups = os.path.join(home, os.path.dirname(txn.BACKUP_DIR))
    if os.path.isdir(backups):  # the user's own settings as they were: theirs to delete
        done.append(f"kept {backups} (your agents' settings files as they were before cm changed them)")
    try:
        os.rmdir(home)
        done.append(f"removed {home}")
    except OSError:
        pass
    if remove_program and planned.program:
        proc = subprocess.run(planned.program, capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
        done.append("removed the cm program" if proc.returncode == 0
                    else f"the program could not be removed (exit {proc.returncode}); run {' '.join(planned.program)}")
    elif planned.program is None:
        done.append(f"kept the program: {planned.program_note}")
    else:
        done.append("kept the program")
    return done
