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
  URL (a plain ``http://`` or ``git://`` remote carries memory unencrypted); ``kind`` tells them
  apart by git's own rules, so ``host:path`` is ssh and ``memory.git`` a path relative to the
  current folder (made absolute: git runs from ``/``).
- ``status`` reads only: no network, nothing written.
- ``repair`` ends a hand-started merge or rebase, removes stale git locks, and, when the
  repository is damaged, rebuilds it from the memory files and the remote, on the last commit this
  machine synced when the remote still has it (so the sync that follows merges by section from
  that base; otherwise every difference is a conflict, and it says so). Conflict markers in a
  memory file are the user's to edit: it says which file.
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

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SAFE_SCHEMES = frozenset({"ssh", "git+ssh", "ssh+git", "https"})


def kind(remote: str) -> str:
    """What git makes of ``remote``, by git's own rules: ``url:<scheme>`` for ``scheme://…``,
    ``helper`` for ``transport::address``, ``scp`` for ``[user@]host:path`` (a colon before any
    slash), else ``local`` (a path, relative ones to the current folder)."""
    found = _SCHEME.match(remote)
    if found:
        return f"url:{found.group(1).lower()}"
    if "::" in remote.split("/", 1)[0]:
        return "helper"
    colon, slash = remote.find(":"), remote.find("/")
    if colon > 0 and (slash == -1 or colon < slash):
        return "scp"
    return "local"


def warning(remote: str) -> str | None:
    found = kind(remote)
    if found in ("local", "url:file", "scp") or found.removeprefix("url:") in _SAFE_SCHEMES:
        return None
    return (f"the remote {syncstate.redact(remote)} is not a local path, an ssh or an https URL: memory may travel "
            "unencrypted or to a server you do not control")


def _normal(remote: str) -> str:
    """A local path made absolute (git runs from ``/``, where a relative path means something else)."""
    if kind(remote) != "local":
        return remote
    return os.path.abspath(os.path.expanduser(remote))


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
            try:
                found = engine.fetch(git, branch)
            except CmError as exc:  # fetch's remedy speaks of a set-up sync retrying; nothing is set up yet
                raise CmError(exc.code, f"{exc.message.split(';')[0]}; nothing was set up and your memory files are "
                                        "untouched; check the path or URL and your access, then run `cm sync init` "
                                        "again") from None
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


def repair(paths: DataPaths, home: str) -> tuple[list[str], engine.Outcome]:
    """What was repaired (module contract) and the sync that follows; raises what stays for the user."""
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
            # A sync checks only the tip; repair reads every object, so damage deeper down (what a
            # failed fetch or push reports as SYNC_REPO_CORRUPT) is rebuilt too.
            if git.run("fsck", "--no-progress", "--no-dangling", check=False,
                       timeout=engine.LOCK_SECONDS).returncode != 0:
                raise CmError("SYNC_REPO_CORRUPT", "the sync repository holds an object that does not read")
        except CmError as exc:
            if exc.code == "SYNC_CONFLICT_MARKERS":
                raise
            done += _rebuild(paths, git, state)
    return done, engine.run(paths, home, f"cm: repaired on {git.device}")


def _rebuild(paths: DataPaths, git: Git, state: dict) -> list[str]:
    """Rebuild a damaged git directory beside it, on the remote's history, and swap it in.

    Its HEAD is the last commit this machine synced (``syncstate.last_synced``) when the remote
    still has it, so the sync that follows merges from that base: only a section changed on both
    sides since is a conflict. A remote that cannot be read leaves the damaged directory as it
    was (the rebuild needs the remote's history, or every difference would count as a conflict)."""
    url = _remote_url(git)
    if url is None:
        raise CmError("SYNC_REPO_CORRUPT", "the sync repository is damaged and its remote cannot be read from it; "
                                           "remove the sync setup (`cm sync init` again after deleting "
                                           "runtime/sync) and set it up again")
    branch = state["branch"]
    fresh = Git(paths, git.device)
    fresh.git_dir = git.git_dir + ".new"
    shutil.rmtree(fresh.git_dir, ignore_errors=True)
    fresh.run("init", "--quiet", "--bare", fresh.git_dir)
    fresh.run("symbolic-ref", "HEAD", f"refs/heads/{branch}")
    fresh.run("remote", "add", engine.REMOTE, url)
    try:
        tip = engine.fetch(fresh, branch)
    except CmError as exc:
        shutil.rmtree(fresh.git_dir, ignore_errors=True)
        raise CmError(exc.code, f"{exc.message.split(';')[0]}; the damaged sync repository is kept as it was and "
                                "your memory files are untouched; run `cm sync repair` again once the remote "
                                "answers") from None
    base = syncstate.last_synced(state)
    said = ["rebuilt the sync repository from the memory files and the remote"]
    if tip is None:
        said.append("the remote's branch is empty: this machine's memory is pushed as it is")
    elif base is not None and fresh.ok("merge-base", "--is-ancestor", base, tip):
        fresh.run("update-ref", "-m", "cm sync repair", "HEAD", base)
        said.append(f"merging from the last commit this machine synced ({base[:12]}): only a section changed on "
                    "both machines since then is a conflict")
    else:
        why = "no record of the last sync is kept here" if base is None else \
            f"the last commit this machine synced ({base[:12]}) is no longer on the remote (its history was rewritten)"
        said.append(f"{why}: without a merge base, every section that differs from the remote is a conflict "
                    "(the remote's text kept, this machine's in `cm trash`, restorable)")
    broken = git.git_dir + ".broken"
    shutil.rmtree(broken, ignore_errors=True)
    if os.path.exists(git.git_dir):
        os.rename(git.git_dir, broken)
    os.rename(fresh.git_dir, git.git_dir)  # a kill between the two renames: the next repair reads .new's remote
    shutil.rmtree(broken, ignore_errors=True)
    return said


def _remote_url(git: Git) -> str | None:
    """The remote's URL from the git directory's config, or from a rebuild a kill interrupted."""
    try:
        found = git.run("config", "--get", f"remote.{engine.REMOTE}.url", check=False)
    except GitFailed:
        found = None
    if found is not None and found.returncode == 0 and found.stdout.strip():
        return found.stdout.decode("utf-8").strip()
    for folder in (git.git_dir, git.git_dir + ".new", git.git_dir + ".broken"):
        try:
            text = open(os.path.join(folder, "config"), encoding="utf-8").read()
        except OSError:
            continue
        m = re.search(r"^\s*url\s*=\s*(.+)$", text, re.M)
        if m:
            return m.group(1).strip()
    return None


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
        syncstate.record(paths, "ok", synced=new)  # the old tip is gone: repair's base is the new one
        return new
