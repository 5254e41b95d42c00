"""``cm project adopt-remote-id ID``: move a project registered before ids came from git remotes
to the id its repository derives, so its memory is shared with every other machine.

Contract:
- Only when the user asks: registering and the registry upgrade never change an existing id.
- Refused, nothing changed: an unknown id (``UNKNOWN_PROJECT``); no remote recorded for it
  (``PROJECT_HAS_NO_REMOTE``); its paths' remotes disagree (``PROJECT_REMOTES_DIFFER``); captures
  of ``project:<old>`` still waiting anywhere (inboxes, session cache, queue, a job:
  ``PROJECT_HAS_QUEUED_WORK``, run ``cm flush`` first); a drain that stays busy (``DRAIN_BUSY``).
- Under the drain lease (no Memory Agent commit runs meanwhile), in an order a crash can redo by
  running the command again: 1. ``config.json``: ``project:<old>`` becomes ``project:<new>`` in
  ``disclosure.allowedScopes`` and ``writableScopes`` where it is (validated, atomic). 2. The memory
  file ``projects/<old>.md`` is renamed to ``projects/<new>.md`` (same folder, atomic, the folder
  fsynced) unless ``<new>.md`` exists already (it came from another machine): then both files are
  kept, untouched, and the result says so (``kept_both``); the old one is listed as known, and
  ``cm import`` of it with ``--workspace`` brings its sections in through the Writer. 3. The
  registry gives every path of the project the new id.
- Never lost: no memory file is deleted or overwritten. The old file's history stays recorded
  under its old name.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from cmrunner.core import config as config_mod, fsutil, projects, scopes
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths


class Adopted(NamedTuple):
    old: str
    new: str
    paths: list[str]
    file: str  # "moved", "kept_both" (both files exist), "none" (no memory yet) or "already" (nothing to do)


def _replace_scope(values: list[str], old: str, new: str) -> list[str]:
    out: list[str] = []
    for value in values:
        value = new if value == old else value
        if value not in out:
            out.append(value)
    return out


def _move_scopes(home: str, old: str, new: str) -> None:
    cfg = config_mod.load(home)
    if not cfg.exists:
        return  # the defaults grant no project
    data = cfg.data
    disclosure = data["disclosure"]
    allowed = _replace_scope(disclosure["allowedScopes"], old, new)
    writable = _replace_scope(data["writableScopes"], old, new)
    if allowed != disclosure["allowedScopes"] or writable != data["writableScopes"]:
        data = dict(data, disclosure=dict(disclosure, allowedScopes=allowed), writableScopes=writable)
        config_mod.save(home, data)


def _queued(paths: DataPaths, scope: str) -> int:
    from cmrunner.capture import observations, waiting
    from cmrunner.core import store

    conn = store.open_existing(paths)
    if conn is None:
        return 0
    try:
        return waiting.turns(conn, scope) + observations.unfinished_in_scope(conn, scope)
    finally:
        conn.close()


def _move_file(paths: DataPaths, old: str, new: str) -> str:
    source = paths.document(scopes.project_scope(old))
    target = paths.document(scopes.project_scope(new))
    if os.path.lexists(target):
        return "kept_both" if os.path.lexists(source) else "moved"
    if not os.path.lexists(source):
        return "none"
    os.rename(source, target)
    fsutil.fsync_dir(paths.projects_dir)
    return "moved"


def adopt(home: str, project_id: str) -> Adopted:
    """Move project ``project_id`` to its remote-derived id (see the module contract)."""
    paths = DataPaths(config_mod.load(home).data_root)
    registered = [p for p in projects.upgrade(paths) if p.id == project_id]
    if not registered:
        raise CmError("UNKNOWN_PROJECT", f"no registered project has id {project_id!r}; see `cm project list`")
    derived = {p.remote_id for p in registered}
    if None in derived:
        raise CmError("PROJECT_HAS_NO_REMOTE", f"{project_id} has no git remote recorded, so no id can be derived; "
                                               "add a remote (`git remote add origin URL`), remove and register it again")
    if len(derived) > 1:
        raise CmError("PROJECT_REMOTES_DIFFER", f"the paths of {project_id} have different remotes; remove the "
                                                "ones of other repositories and register them on their own")
    new = derived.pop()
    assert new is not None
    where = [p.path for p in registered]
    if new == project_id:
        return Adopted(project_id, new, where, "already")
    if any(p.id == new for p in projects.load(paths)):
        raise CmError("PROJECT_ALREADY_REGISTERED", f"{new} is already registered here for another path; "
                                                    "remove it first (its memory file is kept)")
    from cmrunner.writer_proc import usercommit

    old_scope = scopes.project_scope(project_id)
    with usercommit.exclusive(paths, home):
        held = _queued(paths, old_scope)
        if held:
            raise CmError("PROJECT_HAS_QUEUED_WORK", f"{held} capture(s) of {old_scope} still wait to be written; "
                                                     "run `cm flush`, then this command again")
        _move_scopes(home, old_scope, scopes.project_scope(new))
        moved = _move_file(paths, project_id, new)
        projects.rename_id(paths, project_id, new)
    return Adopted(project_id, new, where, moved)
