"""``--workspace <abs>`` arguments: from a path to the registered project it names.

Contract: a workspace is an absolute POSIX path inside a registered project (real paths, longest
ancestor, as capture matches them). A Windows path (``C:\\…``, ``\\\\server\\…``) is never mapped to
a WSL path: it is ``INVALID_WORKSPACE_PATH``, like a relative path. A path outside every registered
project is ``UNREGISTERED_WORKSPACE``. Resolving reads only the registry file (no SQLite).
Stdlib only.
"""

from __future__ import annotations

import os
import re

from cmrunner.core import projects
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.core.projects import Project

_WINDOWS_PATH_RE = re.compile(r"^([A-Za-z]:|\\\\|//\?/)|\\")


def is_windows_path(path: str) -> bool:
    return bool(_WINDOWS_PATH_RE.search(path))


def check_path(path: str) -> str:
    """``path`` normalised, or ``INVALID_WORKSPACE_PATH``."""
    if is_windows_path(path):
        raise CmError("INVALID_WORKSPACE_PATH",
                      "a workspace must be a POSIX path; Windows paths are not mapped, pass the WSL path of the project")
    if not path or "\x00" in path or not os.path.isabs(path):
        raise CmError("INVALID_WORKSPACE_PATH", "a workspace must be an absolute path; pass the project's full path")
    return os.path.normpath(path)


def resolve(paths: DataPaths, path: str) -> Project:
    """The registered project that contains the workspace ``path``."""
    normal = check_path(path)
    found = projects.match(projects.load(paths), normal)
    if found is None:
        raise CmError("UNREGISTERED_WORKSPACE",
                      f"{normal} is not inside a registered project; run `cm project register {normal} <name>` first")
    return found
