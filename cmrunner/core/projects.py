"""The project registry (``<data root>/runtime/projects.json``) and scope resolution.

Contract:
- A project is ``{id, path, name, registeredAt}``; ids are generated (``<slug>-<6 hex>``, within
  ``[A-Za-z0-9_-]{1,128}``) and never reused for another path; paths are stored as real paths.
- ``scope_for(cwd)`` picks the registered project whose path is the longest ancestor-or-self of
  the real cwd, else ``global``. Capture freezes that scope at admission time.
- Registration grants nothing: reading and writing a project's memory still need
  ``project:<id>`` in ``disclosure.allowedScopes`` and ``writableScopes``.
- Changes are read-modify-write under an ``flock`` on ``runtime/projects.lock`` and published
  atomically, so concurrent ``cm project`` commands never lose a registration; readers need no lock.
Stdlib only (hooks resolve scope).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from cmrunner.core import fsutil, jsonfast, scopes
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

REGISTRY_LIMIT = 1 << 20


class Project:
    __slots__ = ("id", "path", "name", "registered_at")

    def __init__(self, id: str, path: str, name: str, registered_at: int) -> None:
        self.id = id
        self.path = path
        self.name = name
        self.registered_at = registered_at

    @property
    def scope(self) -> str:
        return scopes.project_scope(self.id)

    def as_json(self) -> dict:
        return {"id": self.id, "path": self.path, "name": self.name, "registeredAt": self.registered_at}


def _invalid() -> CmError:
    return CmError("PROJECT_REGISTRY_INVALID", "runtime/projects.json is damaged; restore it from a backup or remove it")


def load(paths: DataPaths) -> list[Project]:
    """Registered projects (empty when the registry does not exist)."""
    raw = fsutil.read_regular_file(paths.registry, REGISTRY_LIMIT, "project registry")
    if raw is None:
        return []
    try:
        data = jsonfast.loads(raw.decode("utf-8"))
        projects = [
            Project(str(p["id"]), str(p["path"]), str(p["name"]), int(p["registeredAt"]))
            for p in data["projects"]
        ]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise _invalid() from None
    if any(not scopes.is_project_id(p.id) or not os.path.isabs(p.path) for p in projects):
        raise _invalid()
    return projects


def _save(paths: DataPaths, projects: list[Project]) -> None:
    import json  # indented output; registering is never on the hook path

    body = json.dumps({"version": 1, "projects": [p.as_json() for p in projects]}, indent=2, ensure_ascii=False)
    fsutil.write_atomic(paths.registry, (body + "\n").encode("utf-8"))


@contextmanager
def _locked(paths: DataPaths) -> Iterator[None]:
    import fcntl

    fsutil.ensure_private_dir(paths.runtime, "runtime directory")
    fd = os.open(os.path.join(paths.runtime, "projects.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _slug(name: str) -> str:
    # Registration only, never a hook: ``re`` is imported here so that the hook path, which resolves
    # scopes through this module, does not load it.
    import re

    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:48]
    return slug or "project"


def register(paths: DataPaths, path: str, name: str) -> Project:
    """Register ``path`` (absolute, an existing directory) under display ``name``."""
    if "\x00" in path or not os.path.isabs(path):
        raise CmError("PATH_NOT_ABSOLUTE", "the project path must be absolute; pass the full path")
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise CmError("PROJECT_PATH_NOT_FOUND", f"{path} is not an existing directory; create it or fix the path")
    name = name.strip()
    if not name or len(name) > 200 or any(ord(c) < 32 for c in name):
        raise CmError("INVALID_PROJECT_NAME", "the project name must be 1-200 printable characters")
    with _locked(paths):
        projects = load(paths)
        for project in projects:
            if project.path == real:
                raise CmError(
                    "PROJECT_ALREADY_REGISTERED",
                    f"{real} is already registered as {project.id}; remove it first to re-register",
                )
        taken = {p.id for p in projects}
        while True:
            candidate = f"{_slug(name)}-{os.urandom(3).hex()}"
            if candidate not in taken:
                break
        project = Project(candidate, real, name, int(time.time() * 1000))
        _save(paths, projects + [project])
    return project


def remove(paths: DataPaths, project_id: str) -> Project:
    """Unregister a project by id; its Markdown stays where it is."""
    with _locked(paths):
        projects = load(paths)
        kept = [p for p in projects if p.id != project_id]
        if len(kept) == len(projects):
            raise CmError("UNKNOWN_PROJECT", f"no registered project has id {project_id!r}; see `cm project list`")
        _save(paths, kept)
    return next(p for p in projects if p.id == project_id)


def match(projects: list[Project], cwd: str) -> Project | None:
    """The registered project with the longest path that is ``cwd`` or one of its ancestors."""
    real = os.path.realpath(cwd)
    best: Project | None = None
    for project in projects:
        inside = real == project.path or real.startswith(project.path.rstrip("/") + "/")
        if inside and (best is None or len(project.path) > len(best.path)):
            best = project
    return best


def scope_for(paths: DataPaths, cwd: str) -> str:
    """The capture scope of ``cwd``: ``project:<id>`` of the matching project, else ``global``."""
    found = match(load(paths), cwd)
    return found.scope if found else "global"
