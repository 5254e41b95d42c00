"""``cm sync init``, ``cm sync status``, ``cm sync repair`` and ``cm sync purge-history``.

Contract:
- ``init(remote, branch)`` creates the git directory (``core/syncstate.py`` says where), names the
  remote ``origin`` in it (the URL, with any token in it, stays in git's own config), reads the
  remote's branch and refuses (``SYNC_NOT_CM_MEMORY``) a branch whose tree lacks the
  ``.cm-memory`` marker; an unreachable remote is ``SYNC_REMOTE_UNREACHABLE``. On any refusal the
  git directory is removed again and the memory files were never touched. Then the first sync
  runs: an empty remote receives this memory; a remote memory is adopted, and merged by section
  with this machine's when both hold some (never overwritten: a section both hold differently
  keeps the remote's text in place and this machine's in the trash).
- ``warning(remote)`` says when a remote is not a local path, an ``ssh``/scp-like or an ``https``
  URL (a plain ``http://`` or ``git://`` remote carries memory unencrypted).
- ``status`` reads only: no network, nothing written.
- ``repair`` ends a hand-started merge or rebase, removes stale git locks, and, when the
  repository is damaged, rebuilds it from the memory files and the remote (the next sync merges
  them by section). Conflict markers in a memory file are the user's to edit: it says which file.
- ``purge_history`` syncs, then replaces the remote branch by one commit holding only the current
  files (``--force-with-lease`` on the tip it just saw), and prunes the local copies. What other
  clones, forks or the hosting service keep is beyond it (README says so).
"""

from __future__ import annotations

import os
import re
import shutil
import time

from cmrunner.core import syncstate
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.sync import engine
from cmrunner.sync.git import MARKER_TEXT, Git, GitFailed

_SCP = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:")


def is_local(remote: str) -> bool:
    return remote.startswith(("/", "./", "../", "~", "file://"))


def warning(remote: str) -> str | None:
    if is_local(remote) or remote.startswith(("ssh://", "https://")) or _SCP.match(remote):
        return None
    return (f"the remote {syncstate.redact(remote)} is not a local path, an ssh or an https URL: memory may travel "
            "unencrypted or to a server you do not control")


def _normal(remote: str) -> str:
    if remote.startswith("~"):
        remote = os.path.expanduser(remote)
    if remote.startswith(("./", "../")) or (remote.startswith("/") and not remote.startswith("//")):
        return os.path.abspath(remote)
    return remote


def init(paths: DataPaths, home: str, remote: str, branch: str = "main") -> engine.Outcome:
    git = Git(paths, syncstate.device_name(home))
    if not remote or "\n" in remote or "\0" in remote or remote.startswith("-"):
        raise CmError("SYNC_BAD_REMOTE", "give the remote as a URL or path git accepts (it may not start with '-')")
    if not re.fullmatch(r"[A-Za-z0-9._/-]{1,100}", branch) or branch.startswith(("-", "/")) or ".." in branch:
        raise CmError("SYNC_BAD_BRANCH", "give --branch as a simple branch name (letters, digits, . _ - /)")
    if syncstate.configured(paths):
        raise CmError("SYNC_ALREADY_SET_UP", "memory sync is already set up; run `cm sync` (or `cm sync repair`)")
    with engine.sync_lock(paths):
        shutil.rmtree(git.git_dir, ignore_errors=True)  # a half-made one from an init that was killed
        try:
            git.run("init", "--quiet", "--bare", git.git_dir)
            git.run("symbolic-ref", "HEAD", f"refs/heads/{branch}")
            git.run("remote", "add", engine.REMOTE, _normal(remote))
            found = engine.fetch(git, branch)
            if found is not None and git.blob(found, engine.MARKER) is None:
                raise CmError("SYNC_NOT_CM_MEMORY", f"the remote's branch {branch} holds something that is not a cm "
                                                    "memory (no .cm-memory file); give an empty repository or one "
                                                    "cm made, or another --branch")
        except BaseException:
            shutil.rmtree(git.git_dir, ignore_errors=True)
            raise
        syncstate.write(paths, {"version": syncstate.STATE_VERSION, "branch": branch,
                                "remote": syncstate.redact(_normal(remote)), "device": git.device,
                                "createdAt": int(time.time() * 1000)})
    return engine.run(paths, home, f"cm: first sync from {git.device}")


def status(paths: DataPaths, home: str) -> dict:
    state = syncstate.read(paths)
    if state is None:
        return {"configured": False}
    out = {"configured": True, "remote": state.get("remote"), "branch": state.get("branch"),
           "device": syncstate.device_name(home), "last": state.get("last"), "lastOk": state.get("lastOk")}
    try:
        git = Git(paths, syncstate.device_name(home))
        counts = engine.ahead_behind(git, state["branch"])
        out["ahead"], out["behind"] = counts if counts else (None, None)
    except CmError as exc:
        out["problem"] = exc.code
    return out


def repair(paths: DataPaths, home: str) -> list[str]:
    """What was repaired (module contract), then a sync; raises what stays for the user."""
    state = syncstate.read(paths)
    if state is None:
        raise CmError("SYNC_NOT_SET_UP", "memory sync is not set up; run `cm sync init <remote>` first")
    done: list[str] = []
    with engine.sync_lock(paths):
        git = Git(paths, syncstate.device_name(home))
        for name in ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge",
                     "rebase-apply"):
            path = os.path.join(git.git_dir, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
                done.append(f"ended the unfinished {name}")
            elif os.path.exists(path):
                os.unlink(path)
                done.append(f"ended the unfinished {name}")
        if os.path.isdir(git.git_dir):
            engine.clear_stale_locks(git)
        try:
            engine.check_health(git, paths)
        except CmError as exc:
            if exc.code == "SYNC_CONFLICT_MARKERS":
                raise
            url = _remote_url(git)
            if url is None:
                raise CmError("SYNC_REPO_CORRUPT", "the sync repository is damaged and its remote cannot be read "
                                                   "from it; remove the sync setup (`cm sync init` again after "
                                                   "deleting runtime/sync) and set it up again") from None
            broken = git.git_dir + ".broken"
            shutil.rmtree(broken, ignore_errors=True)
            os.rename(git.git_dir, broken)
            git.run("init", "--quiet", "--bare", git.git_dir)
            git.run("symbolic-ref", "HEAD", f"refs/heads/{state['branch']}")
            git.run("remote", "add", engine.REMOTE, url)
            shutil.rmtree(broken, ignore_errors=True)
            done.append("rebuilt the sync repository from the memory files and the remote")
    engine.run(paths, home, f"cm: repaired on {git.device}")
    return done


def _remote_url(git: Git) -> str | None:
    try:
        found = git.run("config", "--get", f"remote.{engine.REMOTE}.url", check=False)
    except GitFailed:
        return None
    if found.returncode == 0 and found.stdout.strip():
        return found.stdout.decode("utf-8").strip()
    config = os.path.join(git.git_dir, "config")
    try:
        text = open(config, encoding="utf-8").read()
    except OSError:
        return None
    m = re.search(r"^\s*url\s*=\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else None


def purge_history(paths: DataPaths, home: str) -> str:
    """Replace the remote's history by one commit of the current memory; returns the new commit."""
    engine.run(paths, home)
    state = syncstate.read(paths)
    assert state is not None
    branch = state["branch"]
    with engine.sync_lock(paths):
        git = Git(paths, syncstate.device_name(home))
        head = git.rev("HEAD")
        if head is None:
            raise CmError("SYNC_NOTHING_TO_PURGE", "the sync repository has no commit yet")
        epoch = f"epoch: {os.urandom(8).hex()}\n".encode()
        files = engine.tree_files(git, head)
        tree = engine.build_tree(git, files, MARKER_TEXT + epoch)
        new = git.out("commit-tree", tree, "-m", f"cm: memory history purged on {git.device}")
        lease = f"--force-with-lease=refs/heads/{branch}:{head}"
        found = git.run("push", "--quiet", lease, engine.REMOTE, f"{new}:refs/heads/{branch}",
                        timeout=engine.NETWORK_SECONDS, check=False)
        if found.returncode != 0:
            raise CmError("SYNC_REMOTE_REJECTED", "the remote refused the rewritten history (it moved, or it "
                                                  "forbids force pushes); run `cm sync`, then try again")
        git.run("update-ref", "HEAD", new, head)
        git.run("update-ref", f"refs/remotes/{engine.REMOTE}/{branch}", new)
        git.run("reflog", "expire", "--expire=now", "--all")
        git.run("gc", "--quiet", "--prune=now")
        return new
