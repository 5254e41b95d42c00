"""Where memory sync keeps its state, and the record of its last run that ``cm status`` shows.

Contract:
- Sync's private files live under ``<data root>/runtime/sync/`` (0700): ``repo.git`` is the git
  directory whose work tree is ``memory/`` (kept outside ``memory/`` so hosts and readers, which
  only ever see ``memory/``, never meet git's objects, and so git's copies of old text stay with
  cm's other private state), ``state.json`` the configuration and the last outcome, ``sync.lock``
  the lock one sync at a time holds.
- ``state.json`` never holds a URL's user information (``redact`` removes it): the real remote
  URL lives only in the git directory's own config, where git's credential helpers expect it.
- ``read`` never creates anything; ``write`` publishes a whole file or nothing (``write_atomic``).
- ``synced`` is the commit this machine and the remote last agreed on (recorded by every sync that
  ends ok). It lives here, outside ``repo.git``, so a damaged git directory does not lose it:
  ``cm sync repair`` rebuilds on it as the merge base (``last_synced``).
- ``device_name(home)`` is the name commit messages and history give this machine: the home's
  ``deviceName`` (``core/device.py``), else its hostname's first label.
Stdlib only (the drain reads ``configured`` on its way out).
"""

from __future__ import annotations

import json
import os
import re
import time

from cmrunner.core import config, device, fsutil
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

STATE_VERSION = 1
_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")
_SCP_USER = re.compile(r"^[^/@:]+@(?=[^/:]+:)")


def sync_dir(paths: DataPaths) -> str:
    return os.path.join(paths.runtime, "sync")


def git_dir(paths: DataPaths) -> str:
    return os.path.join(sync_dir(paths), "repo.git")


def state_path(paths: DataPaths) -> str:
    return os.path.join(sync_dir(paths), "state.json")


def lock_path(paths: DataPaths) -> str:
    return os.path.join(sync_dir(paths), "sync.lock")


def redact(url: str) -> str:
    """``url`` without its user information (``https://user:token@host/x`` → ``https://***@host/x``);
    an scp-like ``user@host:path`` keeps its form but not the user."""
    if _USERINFO.match(url):
        return _USERINFO.sub(r"\1***@", url)
    return _SCP_USER.sub("***@", url)


def device_name(home: str | None = None) -> str:
    """This machine's name for commit messages and history (module contract)."""
    if home is not None:
        try:
            return device.name(config.load(home))
        except CmError:
            pass  # an invalid configuration fails the sync elsewhere; the name falls back
    return device.default_name()


def read(paths: DataPaths) -> dict | None:
    """The sync state, or ``None`` when sync was never set up (or its file cannot be read)."""
    try:
        with open(state_path(paths), encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("version") == STATE_VERSION else None


def configured(paths: DataPaths) -> bool:
    return read(paths) is not None


def write(paths: DataPaths, state: dict) -> None:
    fsutil.ensure_private_dir(sync_dir(paths), "the sync folder")
    fsutil.write_atomic(state_path(paths), (json.dumps(state, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def record(paths: DataPaths, outcome: str, code: str | None = None, detail: str | None = None,
           synced: str | None = None) -> None:
    """Record the outcome of a sync run (``ok`` or ``failed`` with a code and a one-line detail);
    ``synced`` is the commit an ok run left this machine and the remote both at."""
    state = read(paths)
    if state is None:
        return
    now = int(time.time() * 1000)
    state["last"] = {"at": now, "outcome": outcome, "code": code, "detail": detail}
    if outcome == "ok":
        state["lastOk"] = now
    if synced is not None:
        state["synced"] = synced
    write(paths, state)


def last_synced(state: dict) -> str | None:
    """The commit id this machine and the remote last agreed on, or ``None`` when none is recorded
    (a state from before it was kept) or the record is not a commit id."""
    found = state.get("synced")
    return found if isinstance(found, str) and _COMMIT_ID.fullmatch(found) else None
