"""The project registry (``<data root>/runtime/projects.json``) and scope resolution.

Contract:
- A project is ``{id, path, name, registeredAt, remote, subpath}``; paths are stored as real paths.
- Ids (``[A-Za-z0-9_-]{1,128}``, ``scopes.PROJECT_ID``) are derived in one place, ``derive_id``:
  a directory in a git work tree with a remote gets ``<slug>-<6 hex>`` from its normalized remote
  and its sub-path in the work tree (``core/gitremote.py``), so the same repository has the same
  id on every machine and under every local path; the slug is the repository's (or sub-folder's)
  name, never the display name. Without a remote the id is generated (``<slug of name>-<6 random
  hex>``) and never reused. ``register(..., project_id=)`` joins a known id explicitly.
- ``preview`` says what ``register_here`` would register (id and how it was chosen) and saves nothing.
- One id may have several paths (clones or worktrees of one repository on one machine): they
  share one memory; ``remove`` drops every path of the id.
- Known, not registered here: a project whose memory file ``memory/projects/<id>.md`` exists (it
  arrived by sync from another machine) but no path here has its id (``known_unregistered``).
  The id is what matches: nothing else travels, so no remote URL, credential or local path is
  ever written into the memory folder.
- The registry format is versioned (``REGISTRY_VERSION``) and upgraded by named steps
  (``STEPS``) on the next registry command, under the lock, after a byte-for-byte copy to
  ``runtime/projects.json.v<old>`` (never overwritten). ``r002_record_remotes`` records each
  existing project's remote and sub-path and keeps its id: ids already named in
  ``allowedScopes``, ``writableScopes``, queued captures and memory file names keep working.
  Readers accept every known version; a newer one is ``UNSUPPORTED_REGISTRY_VERSION``.
- ``scope_for(cwd)`` picks the registered project whose path is the longest ancestor-or-self of
  the real cwd, else ``global``. Capture freezes that scope at admission time.
- Registration grants nothing: reading and writing a project's memory still need
  ``project:<id>`` in ``disclosure.allowedScopes`` and ``writableScopes``.
- Changes are read-modify-write under an ``flock`` on ``runtime/projects.lock`` and published
  atomically, so concurrent ``cm project`` commands never lose a registration; readers need no lock.
Stdlib only (hooks resolve scope); git runs only when registering or upgrading, never on a hook.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from cmrunner.core import fsutil, gate, jsonfast, scopes, sha
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

REGISTRY_LIMIT = 1 << 20
REGISTRY_VERSION = 2


class Project:
    __slots__ = ("id", "path", "name", "registered_at", "remote", "subpath")

    def __init__(self, id: str, path: str, name: str, registered_at: int, remote: str | None = None,
                 subpath: str = "") -> None:
        self.id = id
        self.path = path
        self.name = name
        self.registered_at = registered_at
        self.remote = remote  # the normalized git remote (core/gitremote.py), None: none or not recorded
        self.subpath = subpath  # the path inside the repository's work tree, "" at its top

    @property
    def scope(self) -> str:
        return scopes.project_scope(self.id)

    @property
    def remote_id(self) -> str | None:
        """The id this project's repository derives (``None`` without a remote); differs from ``id``
        for a project registered before ids came from remotes, or joined to another id by hand."""
        return derive_id(self.remote, self.subpath) if self.remote else None

    def as_json(self) -> dict:
        return {"id": self.id, "path": self.path, "name": self.name, "registeredAt": self.registered_at,
                "remote": self.remote, "subpath": self.subpath}


class Registered:
    """What a registration did. A plain class, not a ``typing.NamedTuple``: this module is on the hook
    path (scope resolution), and ``typing`` loads ``re``, which the hook otherwise never needs."""

    __slots__ = ("project", "how", "why")

    def __init__(self, project: Project, how: str, why: str) -> None:
        self.project = project
        # "new", "known" (its memory was here already), "shared" (another path has the id), "generated", "joined"
        self.how = how
        self.why = why  # for "generated": why no id could be derived (one line); else ""


def _invalid() -> CmError:
    return CmError("PROJECT_REGISTRY_INVALID", "runtime/projects.json is damaged; restore it from a backup or remove it")


def _read(paths: DataPaths) -> tuple[int, list[dict], bytes] | None:
    """The registry's format version, its entries and its bytes; ``None`` when it does not exist."""
    raw = fsutil.read_regular_file(paths.registry, REGISTRY_LIMIT, "project registry")
    if raw is None:
        return None
    try:
        data = jsonfast.loads(raw.decode("utf-8"))
        version, entries = data.get("version", 1), data["projects"]  # format 1 files were never read by version
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise _invalid() from None
    if type(version) is not int or not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise _invalid()
    if version > REGISTRY_VERSION or version < 1:
        raise CmError("UNSUPPORTED_REGISTRY_VERSION",
                      f"runtime/projects.json has format {version}, newer than this cm reads; upgrade cm")
    return version, entries, raw


def _project(entry: dict) -> Project:
    remote = entry.get("remote")
    subpath = entry.get("subpath", "")
    if not (remote is None or isinstance(remote, str)) or not isinstance(subpath, str):
        raise TypeError("remote")
    return Project(str(entry["id"]), str(entry["path"]), str(entry["name"]), int(entry["registeredAt"]),
                   remote, subpath)


def load(paths: DataPaths) -> list[Project]:
    """Registered projects (empty when the registry does not exist); every registry version reads."""
    found = _read(paths)
    if found is None:
        return []
    try:
        projects = [_project(entry) for entry in found[1]]
    except (ValueError, KeyError, TypeError):
        raise _invalid() from None
    if any(not scopes.is_project_id(p.id) or not os.path.isabs(p.path) for p in projects):
        raise _invalid()
    return projects


def _save(paths: DataPaths, projects: list[Project]) -> None:
    import json  # indented output; registering is never on the hook path

    body = json.dumps({"version": REGISTRY_VERSION, "projects": [p.as_json() for p in projects]}, indent=2,
                      ensure_ascii=False)
    fsutil.write_atomic(paths.registry, (body + "\n").encode("utf-8"))


# -- the registry's format steps ----------------------------------------------------------------

Step = Callable[[list[dict]], None]


def r002_record_remotes(entries: list[dict]) -> None:
    """Format 2: record each project's normalized remote and sub-path; its id is kept as it is."""
    from cmrunner.core import gitremote

    for entry in entries:
        where = entry.get("path")
        found = gitremote.origin(where) if isinstance(where, str) and os.path.isdir(where) else None
        entry["remote"] = found.remote if found else None
        entry["subpath"] = found.subpath if found else ""


STEPS: list[Step] = [r002_record_remotes]  # STEPS[n - 1] upgrades format n to n + 1; never renumbered


def _upgraded(paths: DataPaths) -> list[Project]:
    """The registry, upgraded to ``REGISTRY_VERSION`` first if it is older (the caller holds the lock)."""
    found = _read(paths)
    if found is None or found[0] == REGISTRY_VERSION:
        return load(paths)
    version, entries, raw = found
    backup = f"{paths.registry}.v{version}"
    if not os.path.exists(backup):
        fsutil.write_atomic(backup, raw)
    for step in STEPS[version - 1:]:
        step(entries)
    try:
        projects = [_project(entry) for entry in entries]
    except (ValueError, KeyError, TypeError):
        raise _invalid() from None
    _save(paths, projects)
    return load(paths)


def upgrade(paths: DataPaths) -> list[Project]:
    """Bring the registry to the current format (a no-op when it is current or absent)."""
    if not os.path.exists(paths.registry):
        return []
    with _locked(paths):
        return _upgraded(paths)


def _locked(paths: DataPaths) -> gate.held:
    """The registry's ``flock`` for a ``with`` block, waited for without a bound."""
    fsutil.ensure_private_dir(paths.runtime, "runtime directory")
    return gate.held(os.path.join(paths.runtime, "projects.lock"), None)


# -- ids ------------------------------------------------------------------------------------------

def _slug(name: str) -> str:
    # Registration only, never a hook: ``re`` is imported here so that the hook path, which resolves
    # scopes through this module, does not load it.
    import re

    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:48]
    return slug or "project"


def derive_id(remote: str, subpath: str = "") -> str:
    """The id of the repository at normalized ``remote`` (folder ``subpath`` of its work tree):
    the same on every machine; the slug is the last folder's or the repository's name."""
    name = (subpath or remote).rstrip("/").rsplit("/", 1)[-1]
    digest = sha.sha256(f"{remote}\n{subpath}".encode()).hexdigest()[:6]
    return f"{_slug(name)}-{digest}"


def known_unregistered(paths: DataPaths, registered: list[Project]) -> list[str]:
    """Ids with a memory file here (``memory/projects/<id>.md``) and no registered path."""
    try:
        names = os.listdir(paths.projects_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    have = {p.id for p in registered}
    ids = (name[:-3] for name in names if name.endswith(".md"))
    return sorted(pid for pid in ids if scopes.is_project_id(pid) and pid not in have
                  and os.path.isfile(os.path.join(paths.projects_dir, pid + ".md")))


def _checked(path: str, name: str) -> tuple[str, str]:
    if "\x00" in path or not os.path.isabs(path):
        raise CmError("PATH_NOT_ABSOLUTE", "the project path must be absolute; pass the full path")
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise CmError("PROJECT_PATH_NOT_FOUND", f"{path} is not an existing directory; create it or fix the path")
    name = name.strip()
    if not name or len(name) > 200 or any(ord(c) < 32 for c in name):
        raise CmError("INVALID_PROJECT_NAME", "the project name must be 1-200 printable characters")
    return real, name


def register(paths: DataPaths, path: str, name: str) -> Project:
    """Register ``path`` (absolute, an existing directory) under display ``name``."""
    return register_here(paths, path, name).project


def register_here(paths: DataPaths, path: str, name: str, project_id: str | None = None,
                  generated: str | None = None) -> Registered:
    """Register ``path`` under display ``name``; its id is derived from its repository's remote
    (``derive_id``), ``project_id`` when given (it must be registered or known here), else generated:
    ``generated`` (the id a ``preview`` showed) when it is still free, else a new one."""
    from cmrunner.core import gitremote

    real, name = _checked(path, name)
    found = gitremote.origin(real)
    with _locked(paths):
        projects = _upgraded(paths)
        for project in projects:
            if project.path == real:
                raise CmError(
                    "PROJECT_ALREADY_REGISTERED",
                    f"{real} is already registered as {project.id}; remove it first to re-register",
                )
        candidate, how, why = _choose_id(paths, projects, name, found, project_id, generated)
        project = Project(candidate, real, name, int(time.time() * 1000), found.remote, found.subpath)
        _save(paths, projects + [project])
    return Registered(project, how, why)


def preview(paths: DataPaths, path: str, name: str) -> Registered:
    """What ``register_here(paths, path, name)`` would register, saving nothing: the same id choice
    (a generated id is drawn now; pass it back as ``generated`` to keep it)."""
    from cmrunner.core import gitremote

    real, name = _checked(path, name)
    found = gitremote.origin(real)
    projects = load(paths)
    candidate, how, why = _choose_id(paths, projects, name, found, None, None)
    return Registered(Project(candidate, real, name, 0, found.remote, found.subpath), how, why)


def _choose_id(paths: DataPaths, projects: list[Project], name: str, found: tuple[str | None, str, str],
               project_id: str | None, generated: str | None) -> tuple[str, str, str]:
    """The id a new registration gets, how it was chosen and (generated) why; ``found`` is the
    folder's ``gitremote.Origin`` (remote, sub-path, why)."""
    taken = {p.id for p in projects}
    remote, subpath, reason = found
    if project_id is not None:
        if not scopes.is_project_id(project_id) or (
                project_id not in taken and project_id not in known_unregistered(paths, projects)):
            raise CmError("UNKNOWN_PROJECT", f"no project here has id {project_id!r} (registered or with a "
                                             "memory file); see `cm project list`")
        return project_id, "joined", ""
    if remote is not None:
        same = next((p for p in projects if (p.remote, p.subpath) == (remote, subpath)), None)
        # Another path of the same repository here keeps its id, even one registered before ids
        # came from remotes: one repository, one memory on this machine.
        candidate = same.id if same is not None else derive_id(remote, subpath)
        if candidate in taken:
            return candidate, "shared", ""
        if os.path.isfile(paths.document(scopes.project_scope(candidate))):
            return candidate, "known", ""
        return candidate, "new", ""

    def free(candidate: str) -> bool:
        return candidate not in taken and not os.path.exists(paths.document(scopes.project_scope(candidate)))

    if generated is not None and generated.startswith(_slug(name) + "-") and scopes.is_project_id(generated) \
            and free(generated):
        return generated, "generated", reason
    while True:
        candidate = f"{_slug(name)}-{os.urandom(3).hex()}"
        if free(candidate):
            return candidate, "generated", reason


def remove(paths: DataPaths, project_id: str) -> list[Project]:
    """Unregister every path of a project id; its Markdown stays where it is."""
    with _locked(paths):
        projects = _upgraded(paths)
        kept = [p for p in projects if p.id != project_id]
        if len(kept) == len(projects):
            raise CmError("UNKNOWN_PROJECT", f"no registered project has id {project_id!r}; see `cm project list`")
        _save(paths, kept)
    return [p for p in projects if p.id == project_id]


def rename_id(paths: DataPaths, old: str, new: str) -> list[Project]:
    """Give every path of project ``old`` the id ``new`` (``adopt-remote-id``); the caller moves its
    memory file and its scopes. ``new`` must be a well-formed id no other registered path holds."""
    if not scopes.is_project_id(new):
        raise CmError("INVALID_TARGET_REFERENCE", f"{new!r} is not a project id")
    with _locked(paths):
        projects = _upgraded(paths)
        if not any(p.id == old for p in projects):
            raise CmError("UNKNOWN_PROJECT", f"no registered project has id {old!r}; see `cm project list`")
        if any(p.id == new for p in projects):
            raise CmError("PROJECT_ALREADY_REGISTERED", f"{new} is already registered here; remove it first")
        for p in projects:
            if p.id == old:
                p.id = new
        _save(paths, projects)
    return [p for p in projects if p.id == new]


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
