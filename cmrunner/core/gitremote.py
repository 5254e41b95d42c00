"""What a repository says about itself, and the one grammar of normalized git remotes.

Contract:
- ``normalize(url, base)`` turns a remote URL into one canonical text so that every spelling of
  the same repository gives the same result, and different repositories never do:
  * ``scheme://[user[:password]@]host[:port]/path``, the scp form ``[user@]host:path`` and
    ``git@host:path`` all become ``host[:port]/path``. The scheme (https, http, ssh, git,
    git+ssh, …) and the user (and any password or token) are dropped, the host is lowercased, a
    default port (22, 80, 443, 9418) is dropped and any other port kept.
  * The path keeps its case (hosts differ on case-sensitivity; merging two repositories would be
    worse than not matching two spellings); percent-escapes of the URL form are decoded, repeated
    and trailing slashes and one trailing ``.git`` are removed.
  * A local path (``/srv/repo.git``, ``file:///srv/repo``, or relative to ``base``) becomes
    ``file://<absolute normal path>`` without ``.git``.
  * Anything empty, holding control characters or without a path gives ``None``.
- ``origin(path)`` reads a directory's repository with the real ``git`` (bounded by a timeout, no
  network): the remote named ``origin``, else the only remote, and the directory's path inside
  the work tree (``""`` at its top). It never raises: a directory outside git, git missing, no
  or several remotes, or git failing give an ``Origin`` with ``remote=None`` and a ``why``.
Registration runs this, never a hook (hooks only read the registry).
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

GIT_SECONDS = 10.0
DEFAULT_PORTS = {22, 80, 443, 9418}
# [user@]host:path with no "/" before the colon: git's scp-like syntax (anything else is a path).
_SCP = re.compile(r"(?:[^@/:]+@)?(?P<host>[^@/:\[\]]+):(?P<path>.*)", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Origin(NamedTuple):
    remote: str | None  # the normalized remote, or None
    subpath: str  # the directory inside its work tree, "/"-separated, "" at the top
    why: str  # when remote is None: why (one line); else ""


def _clean_path(path: str) -> str:
    path = re.sub(r"/{2,}", "/", path).strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")].rstrip("/")
    return path


def _local(path: str, base: str | None) -> str | None:
    if not os.path.isabs(path):
        if base is None:
            return None
        path = os.path.join(base, path)
    cleaned = _clean_path(os.path.normpath(path))
    return f"file:///{cleaned}" if cleaned else None


def normalize(url: str, base: str | None = None) -> str | None:
    """The canonical text of remote ``url`` (see the module contract); ``base`` resolves a relative path."""
    url = url.strip()
    if not url or _CONTROL.search(url):
        return None
    if "://" in url:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return None
        if parts.scheme.lower() == "file":
            return _local(unquote(parts.path), base)
        host = (parts.hostname or "").lower()
        path = _clean_path(unquote(parts.path))
        if not host or not path:
            return None
        where = host if port is None or port in DEFAULT_PORTS else f"{host}:{port}"
        return f"{where}/{path}"
    scp = _SCP.fullmatch(url)
    if scp is not None:
        path = _clean_path(scp.group("path"))
        return f"{scp.group('host').lower()}/{path}" if path else None
    return _local(url, base)


def _git(cwd: str, *args: str) -> str | None:
    # A host's GIT_DIR or GIT_WORK_TREE must not steer us; these commands never reach the network.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    proc = subprocess.run(["git", "-C", cwd, *args], capture_output=True, env=env, timeout=GIT_SECONDS,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


def origin(path: str) -> Origin:
    """The normalized remote and sub-path of the repository holding directory ``path``."""
    try:
        top = _git(path, "rev-parse", "--show-toplevel")
        if top is None:
            return Origin(None, "", "not inside a git work tree")
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(top))
        subpath = "" if rel == "." else rel.replace(os.sep, "/")
        names = (_git(path, "remote") or "").split()
        if "origin" in names:
            name = "origin"
        elif len(names) == 1:
            name = names[0]
        else:
            why = "the repository has no remote" if not names else "several remotes and none is named origin"
            return Origin(None, subpath, why)
        url = _git(path, "remote", "get-url", name)
        remote = normalize(url, top) if url else None
        return Origin(remote, subpath, "" if remote else f"remote {name}'s URL is not one git accepts")
    except FileNotFoundError:
        return Origin(None, "", "git is not on PATH")
    except (OSError, subprocess.SubprocessError):
        return Origin(None, "", "git did not answer")
