"""Where cm keeps things: the configuration home and the data root.

Contract: resolving paths never creates, repairs or opens anything (``cm status`` and every read
path rely on that). ``COMMON_MEMORY_HOME`` (default ``~/.common-memory``) holds ``config.json``
and the private ``.env``; the data root (``config.dataRoot``, default ``<home>/data``) holds the
Markdown memory, ``runtime.sqlite`` and ``runtime/``. Stdlib only (hook path).
"""

from __future__ import annotations

import os

from cmrunner.core import scopes
from cmrunner.core.errors import CmError

HOME_ENV = "COMMON_MEMORY_HOME"


def resolve_home(explicit: str | None = None) -> str:
    """The configuration home: ``--home`` if given, else ``$COMMON_MEMORY_HOME``, else default."""
    if explicit is not None:
        home = explicit
        source = "--home"
    else:
        home = os.environ.get(HOME_ENV) or os.path.join(os.path.expanduser("~"), ".common-memory")
        source = HOME_ENV
    if "\x00" in home or not os.path.isabs(home):
        raise CmError("PATH_NOT_ABSOLUTE", f"{source} must be an absolute path; pass one")
    return os.path.normpath(home)


class DataPaths:
    """Every path under one data root. Pure computation; nothing is touched."""

    __slots__ = ("root", "memory", "projects_dir", "db", "runtime", "transactions", "receipts",
                 "backups", "registry", "repo_lock", "write_gate", "logs", "drain_log")

    def __init__(self, root: str) -> None:
        self.root = root
        self.memory = os.path.join(root, "memory")
        self.projects_dir = os.path.join(self.memory, "projects")
        self.db = os.path.join(root, "runtime.sqlite")
        self.runtime = os.path.join(root, "runtime")
        self.transactions = os.path.join(self.runtime, "transactions")
        self.receipts = os.path.join(self.runtime, "receipts")
        self.backups = os.path.join(self.runtime, "upgrade-backups")
        self.registry = os.path.join(self.runtime, "projects.json")
        self.repo_lock = os.path.join(self.runtime, "repository.lock")
        self.write_gate = os.path.join(self.runtime, "write.gate")
        self.logs = os.path.join(self.runtime, "logs")
        self.drain_log = os.path.join(self.logs, "drain.log")

    def document(self, target: str) -> str:
        """The Markdown file of a target (``profile``, ``preferences`` or ``project:<id>``)."""
        if target == "profile":
            return os.path.join(self.memory, "profile.md")
        if target == "preferences":
            return os.path.join(self.memory, "preferences.md")
        # The id becomes a file name: only the scope grammar's id alphabet can never escape projects/.
        project_id = scopes.project_id(target)
        if project_id is not None:
            return os.path.join(self.projects_dir, project_id + ".md")
        raise CmError("INVALID_TARGET_REFERENCE", f"unknown memory target {target!r}")


def config_path(home: str) -> str:
    return os.path.join(home, "config.json")


def env_path(home: str) -> str:
    return os.path.join(home, ".env")


def default_data_root(home: str) -> str:
    return os.path.join(home, "data")
