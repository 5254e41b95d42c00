"""A project in one step: register it and, as the user confirms, let cm read and write its memory.

Contract:
- A registered project is used only when its scope (``project:<id>``) is in both
  ``disclosure.allowedScopes`` (its memory may be read and sent) and ``writableScopes`` (the
  Writer may write it). ``missing(cfg, scope)`` names the keys that lack it, in that order.
- ``register(home, path, name, allow)`` registers the folder (``core.projects.register``) and, with
  ``allow``, adds its scope to both keys through the one config-writing path, in one validated
  save (``configedit.set_values``): both or neither. A folder registered already is not an error
  when ``allow`` is asked: its project is the one allowed (so ``cm project register PATH NAME
  --allow`` is the one remedy both for an unregistered folder and for a registered one not allowed).
- ``preview(home, path, name)`` is what ``register(home, path, name, True)`` would save, saving
  nothing: the project (``projects.preview``: a derived id, the id of a project known from another
  machine, or a generated one, kept when registering with ``generated``) and the keys its scope
  would be added to. The TUI shows it before its one confirmation.
- ``allow(home, project)`` is the same grant for a project registered already.
- ``remedy(path, name)`` is that one command, as plans and skip reasons print it.
- ``folder_offer(home, cwd)`` is what `cm import` offers when it runs in a folder: the folder
  itself when it is a project root (``is_project_root``: it holds ``.git`` or a checked-in agent
  instructions file, ``ROOT_MARKERS``; never the user's home or ``/``) inside no registered
  project, or the registered project holding it when its memory is not allowed; ``None`` when its
  project is registered and allowed, or it is no project. ``FolderOffer.known_id`` is the id of a
  project known here but not registered (``projects.known_unregistered``: its memory arrived from
  another machine) that the folder's repository has: registering gives it that id
  (``projects.register_here``), so both machines share one memory. Offering writes nothing.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from cmrunner.core import config as config_mod, projects
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

KEYS = ("disclosure.allowedScopes", "writableScopes")
ROOT_MARKERS = (".git", "AGENTS.md", "CLAUDE.md", "GEMINI.md")


@dataclass(frozen=True, slots=True)
class Registered:
    project: projects.Project
    new: bool                 # registered now (False: it was registered already)
    granted: list[str]        # the keys the scope was added to now
    missing: list[str]        # the keys that still lack it (not allowed: the project is not used yet)
    how: str = ""             # how its id was chosen (``projects.register_here``), when registered now
    why: str = ""


def missing(cfg: config_mod.Config, scope: str) -> list[str]:
    """The keys (``KEYS``) whose lists lack ``scope``."""
    found = []
    if scope not in cfg.data.get("disclosure", {}).get("allowedScopes", []):
        found.append(KEYS[0])
    if scope not in cfg.data.get("writableScopes", []):
        found.append(KEYS[1])
    return found


def allow(home: str, project: projects.Project) -> list[str]:
    """Add the project's scope to the keys that lack it, in one save; returns those keys."""
    from cmrunner.manage import configedit

    keys = missing(config_mod.load(home), project.scope)
    if keys:
        configedit.set_values(home, [(key, "+" + project.scope) for key in keys])
    return keys


@dataclass(frozen=True, slots=True)
class Preview:
    project: projects.Project  # as it would be registered (not saved)
    how: str                   # how its id would be chosen (``projects.register_here``)
    why: str
    missing: list[str]         # the keys (``KEYS``) its scope would be added to

    @property
    def known(self) -> bool:
        """Its memory is here already (a project known from another machine, not registered here)."""
        return self.how == "known"


def preview(home: str, path: str, name: str) -> Preview:
    """What registering ``path`` as ``name`` and allowing its memory would save (see module contract)."""
    cfg = config_mod.load(home)
    seen = projects.preview(DataPaths(cfg.data_root), path, name)
    return Preview(seen.project, seen.how, seen.why, missing(cfg, seen.project.scope))


def register(home: str, path: str, name: str, allow_access: bool, project_id: str | None = None,
             generated: str | None = None) -> Registered:
    """Register ``path`` as ``name`` (``project_id``: join that project, ``projects.register_here``;
    ``generated``: the id a ``preview`` showed) and (``allow_access``) allow its memory (see module contract)."""
    paths = DataPaths(config_mod.load(home).data_root)
    how = why = ""
    try:
        done = projects.register_here(paths, path, name, project_id, generated)
        project, new, how, why = done.project, True, done.how, done.why
    except CmError as exc:
        if exc.code != "PROJECT_ALREADY_REGISTERED" or not allow_access:
            raise
        real = os.path.realpath(path)
        project, new = next(p for p in projects.load(paths) if p.path == real), False
    granted = allow(home, project) if allow_access else []
    return Registered(project, new, granted, missing(config_mod.load(home), project.scope), how, why)


def remedy(path: str | None, name: str | None = None) -> str:
    """The one command that registers ``path`` (if it is not yet) and allows its memory; the name
    defaults to the folder's own, and an unknown path is a placeholder."""
    if path is None:
        return "cm project register <its path> <name> --allow"
    name = name or os.path.basename(path.rstrip(os.sep)) or "project"
    return f"cm project register {shlex.quote(path)} {shlex.quote(name)} --allow"


@dataclass(frozen=True, slots=True)
class FolderOffer:
    path: str                                # the folder's real path (a registered project's path)
    name: str                                # the name it is registered under (its folder's)
    registered: projects.Project | None      # registered already: only its memory is not allowed
    known_id: str | None = None              # a project known from another machine that it is

    def question(self) -> str:
        """The one question that registers it (if needed) and allows its memory."""
        if self.registered is not None:
            return (f"{self.path} is the project {self.registered.id}, whose memory cm may not use yet. "
                    "Allow cm to read and write it?")
        known = f" (id {self.known_id}: known from another machine, its memory is here)" if self.known_id else ""
        return f"Register {self.path} as project {self.name}{known} and allow its memory?"

    def remedy(self) -> str:
        return remedy(self.path, self.name)


def is_project_root(folder: str) -> bool:
    """``folder`` holds one of ``ROOT_MARKERS`` (and is neither the user's home nor ``/``)."""
    real = os.path.realpath(folder)
    if real in (os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.sep)):
        return False
    return any(os.path.lexists(os.path.join(real, marker)) for marker in ROOT_MARKERS)


def folder_offer(home: str, cwd: str, skipped_here: bool = False) -> FolderOffer | None:
    """What to offer for the folder cm runs in (see module contract); ``skipped_here``: a plan
    skipped files only because that folder is not registered, which makes it a project too."""
    real = os.path.realpath(cwd)
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    registered = projects.load(paths)
    inside = projects.match(registered, real)
    if inside is not None:
        return FolderOffer(inside.path, inside.name, inside) if missing(cfg, inside.scope) else None
    if not (skipped_here or is_project_root(real)):
        return None
    name = os.path.basename(real.rstrip(os.sep)) or "project"
    return FolderOffer(real, name, None, _known_id(paths, registered, real))


def _known_id(paths: DataPaths, registered: list[projects.Project], real: str) -> str | None:
    known = projects.known_unregistered(paths, registered)
    if not known:
        return None  # nothing to match: git is not run
    from cmrunner.core import gitremote

    found = gitremote.origin(real)
    if found.remote is None:
        return None
    candidate = projects.derive_id(found.remote, found.subpath)
    return candidate if candidate in known else None
