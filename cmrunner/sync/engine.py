"""One sync: commit the memory folder as it is, fetch, merge by section, publish, push.

Contract:
- One sync at a time per data root (``sync.lock``); a sync that finds a git lock file left by a
  killed run removes it (only a sync holds that git directory, and it holds the sync lock).
- The repository is never used with ``git merge``, ``checkout`` or ``reset --hard``: git never
  writes a memory file. Commits are built from the documents' bytes (``git hash-object``,
  ``update-index --index-info`` on a scratch index, ``write-tree``, ``commit-tree``,
  ``update-ref`` with the old value): a kill at any point leaves HEAD at the old or the new commit.
- 1. Local commit, under the repository lock (no publish runs meanwhile): the live documents
  (``profile.md``, ``preferences.md``, ``projects/*.md``; nothing else, no SQLite, no ``.env``)
  plus the ``.cm-memory`` marker; nothing when the tree is unchanged. A section the secret net
  withholds from readers stays on this machine: the tree gets its document without it
  (``merge.split``), a merge puts it back in the live file (``merge.rejoin``), and ``withheld``
  names the documents concerned (recorded as ``SYNC_SECTION_KEPT_LOCAL``).
  2. Fetch the branch (deadline). 3. The remote is behind or equal: push. The remote is ahead or
  the two diverged: each document is merged by section (``sync/merge.py``) from the merge base,
  the live file and the remote's, and every document that changes is published through the
  Writer's own path (``writer_proc/usercommit.py``: drain lease, repository lock, CAS of the live
  file against the bytes merged, atomic publish, history as a ``sync`` from the device whose
  commit changed the document (``author_of``), a conflict's local text to the trash as
  ``sync_conflict``); only then does HEAD move to the
  merge commit (or the remote's, for a fast-forward). The drain lease is taken before the
  publish's documents are final: once held (a running job is waited for), the live files are read
  again and, when a job's commit changed them, merged again, so a job never has a file changed
  under it and its commit is merged, not refused. A hand edit meanwhile fails the CAS
  (``STALE_REVISION``): nothing is published and the next sync merges again. 4. Push; a push the
  remote rejects because it moved goes back to 2, at most ``ROUNDS`` times.
- ``run(..., deadline=)``: an automatic sync's overall deadline (``sync.autoDeadlineSeconds``);
  every git step and every wait of its own (sync lock, repository lock, drain lease) gets at most
  the time left, and past it the sync is ``SYNC_TIMEOUT`` (``sync/git.py``), its local commit
  kept. A publish that started is never cut: the Writer's commit inside it keeps its own limits.
- Every outcome is recorded (``core/syncstate.py:record``) for ``cm status``, an ok one with the
  commit HEAD and the remote are both at (``cm sync repair``'s merge base); failures are
  ``CmError`` codes with a remedy, and the memory files are untouched by a failed sync.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from cmrunner.core import fsutil, history, scopes, sections, syncstate
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.secrets import withhold
from cmrunner.sync import merge
from cmrunner.sync.git import INDEX_ENV, MARKER, MARKER_TEXT, Git, GitFailed
from cmrunner.writer_proc import commit, usercommit

ROUNDS = 3
LOCK_SECONDS = 120.0
NETWORK_SECONDS = 60.0
REMOTE = "origin"
_PROJECT_FILE = re.compile(r"projects/([A-Za-z0-9_-]{1,128})\.md")


class Outcome(NamedTuple):
    committed: bool  # a local commit was made
    pulled: int  # documents the remote changed here
    conflicts: int  # sections whose local text went to the trash
    pushed: bool
    withheld: list[str]  # documents kept out of the repository (a secret)


def target_of(path: str) -> str | None:
    if path in ("profile.md", "preferences.md"):
        return path[:-3]
    m = _PROJECT_FILE.fullmatch(path)
    return scopes.project_scope(m.group(1)) if m else None


def path_of(target: str) -> str:
    return sections.target_relpath(target).removeprefix("memory/")


def live_documents(paths: DataPaths) -> dict[str, bytes]:
    """``{relative path: bytes}`` of every memory document on disk (regular files only)."""
    found: dict[str, bytes] = {}
    names = ["profile.md", "preferences.md"]
    if os.path.isdir(paths.projects_dir):
        names += [f"projects/{n}" for n in sorted(os.listdir(paths.projects_dir)) if target_of(f"projects/{n}")]
    for name in names:
        data = fsutil.read_regular_file(os.path.join(paths.memory, name), sections.MAX_HARD_BUDGET + 1, name)
        if data is not None:
            found[name] = data
    return found


@contextmanager
def sync_lock(paths: DataPaths, wait: float = LOCK_SECONDS) -> Iterator[None]:
    from filelock import FileLock, Timeout

    fsutil.ensure_private_dir(syncstate.sync_dir(paths), "the sync folder")
    lock = FileLock(syncstate.lock_path(paths), timeout=wait, fallback_to_soft=False, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        raise CmError("SYNC_BUSY", "another sync of this memory is running; `cm sync status` shows its outcome "
                                   "when it ends") from None
    try:
        yield
    finally:
        lock.release()


def clear_stale_locks(git: Git) -> None:
    """Lock files a killed git left behind (the caller holds the sync lock, so none is live)."""
    for folder, _dirs, files in os.walk(git.git_dir):
        for name in files:
            if name.endswith(".lock"):
                os.unlink(os.path.join(folder, name))


def clear_leftovers(git: Git) -> None:
    """The copies a ``cm sync repair`` killed mid-rebuild left beside a healthy git directory (the
    damaged one keeps objects of text that may since have been purged)."""
    for suffix in (".new", ".broken"):
        shutil.rmtree(git.git_dir + suffix, ignore_errors=True)


def check_health(git: Git, paths: DataPaths) -> None:
    """Refuse, touching nothing, a repository mid-merge by hand, corrupt, or a file with conflict markers."""
    if not os.path.isdir(git.git_dir) or not os.path.isfile(os.path.join(git.git_dir, "HEAD")):
        raise CmError("SYNC_REPO_CORRUPT", "the sync repository is missing or damaged; run `cm sync repair`")
    for name in ("MERGE_HEAD", "rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD", "REVERT_HEAD"):
        if os.path.exists(os.path.join(git.git_dir, name)):
            raise CmError("SYNC_MERGE_IN_PROGRESS", "a git merge or rebase was started by hand in the sync "
                                                    "repository; run `cm sync repair` (your memory files are untouched)")
    head = git.run("symbolic-ref", "-q", "HEAD", check=False)
    if head.returncode != 0:
        raise CmError("SYNC_REPO_CORRUPT", "the sync repository's HEAD is not a branch; run `cm sync repair`")
    named = git.run("rev-parse", "--verify", "--quiet", "HEAD", check=False).returncode == 0  # reads no object
    # The tip's commit and tree must read back (a full fsck would grow with history on every sync);
    # damage deeper down surfaces as a failed git step, which `cm sync repair` handles the same way.
    if named and not git.ok("cat-file", "-e", "HEAD^{tree}"):
        raise CmError("SYNC_REPO_CORRUPT", "the sync repository is damaged; run `cm sync repair` (it rebuilds it "
                                           "from your memory files and the remote)")
    for name, data in live_documents(paths).items():
        if re.search(rb"^<<<<<<< |^>>>>>>> ", data, re.M) and re.search(rb"^=======$", data, re.M):
            raise CmError("SYNC_CONFLICT_MARKERS", f"memory/{name} holds git conflict markers; edit them out by hand "
                                                   "(or `cm sync repair`), then run `cm sync`")


def withheld_documents(docs: dict[str, bytes], home: str, paths: DataPaths) -> dict[str, set[int]]:
    """``{document: flagged units}`` of the documents holding a section the secret net withholds
    from readers (the user's allow-list applies); those units never enter the repository."""
    out: dict[str, set[int]] = {}
    for name, data in docs.items():
        target = target_of(name)
        if target is None:
            continue
        _shown, withheld = withhold.document(data.decode("utf-8", "replace"), target, home, paths)
        if withheld:
            out[name] = {w.unit for w in withheld}
    return out


def shareable(docs: dict[str, bytes], held: dict[str, set[int]]) -> tuple[dict[str, bytes], dict[str, list[merge.Held]]]:
    """What of ``docs`` may leave this machine, and per document the units that stay."""
    out, kept_back = dict(docs), {}
    for name, units in held.items():
        out[name], kept_back[name] = merge.split(target_of(name) or "", docs[name], units)
    return out, kept_back


def marker_of(git: Git, rev: str | None) -> bytes:
    """The ``.cm-memory`` marker of ``rev``: its format and the history epoch (``purge_history``
    starts a new one, so a machine can tell a rewritten remote from an unrelated one)."""
    return git.blob(rev, MARKER) or MARKER_TEXT


def build_tree(git: Git, files: dict[str, bytes], marker: bytes = MARKER_TEXT) -> str:
    """A tree of ``files`` and the marker, through a scratch index (module contract)."""
    entries = {**files, MARKER: marker}
    ids = {name: git.hash_blob(data) for name, data in sorted(entries.items())}
    index = os.path.join(git.git_dir, "cm-index")
    env_index = {INDEX_ENV: index}
    git.run("read-tree", "--empty", env=env_index)
    git.run("update-index", "--add", "--index-info", env=env_index,
            input="".join(f"100644 {ids[n]}\t{n}\n" for n in sorted(ids)).encode("utf-8"))
    return git.out("write-tree", env=env_index)


def make_commit(git: Git, tree: str, parents: list[str], message: str, old: str | None) -> str:
    args = ["commit-tree", tree, "-m", message]
    for parent in parents:
        args += ["-p", parent]
    new = git.out(*args)
    git.run("update-ref", "-m", "cm sync", "HEAD", new, old or "")
    return new


def tree_files(git: Git, rev: str | None) -> dict[str, bytes]:
    return {p: git.blob(rev, p) or b"" for p in git.files(rev) if target_of(p)}


def commit_local(git: Git, paths: DataPaths, home: str, message: str) -> tuple[bool, list[str]]:
    """Step 1 (module contract): ``(committed, withheld documents)``."""
    with commit.repository_lock(paths, _wait(git, commit.REPO_LOCK_SECONDS)):
        head = git.rev("HEAD")
        live = live_documents(paths)
        held = withheld_documents(live, home, paths)
        files, _kept_back = shareable(live, held)
        tree = build_tree(git, files, marker_of(git, head))
        if head is not None and git.out("rev-parse", f"{head}^{{tree}}") == tree:
            return False, sorted(held)
        make_commit(git, tree, [head] if head else [], message, head)
        return True, sorted(held)


def fetch(git: Git, branch: str) -> str | None:
    """The remote branch's tip after a fetch, or ``None`` when the remote has no such branch yet."""
    found = git.run("ls-remote", "--heads", REMOTE, f"refs/heads/{branch}", timeout=NETWORK_SECONDS, check=False)
    if found.returncode != 0:
        raise _network_error(found.returncode, found.stderr, "read")
    if not found.stdout.strip():
        return None
    tip = found.stdout.split()[0].decode()
    if tip == git.rev(f"refs/remotes/{REMOTE}/{branch}"):
        return tip  # nothing new there: no fetch
    try:
        git.run("fetch", "--no-tags", "--quiet", REMOTE, f"+refs/heads/{branch}:refs/remotes/{REMOTE}/{branch}",
                timeout=NETWORK_SECONDS)
    except GitFailed as exc:
        if exc.code == "SYNC_TIMEOUT":
            raise
        raise _network_error(exc.returncode, b"", "read", exc.kind) from None
    return git.rev(f"refs/remotes/{REMOTE}/{branch}")


def _network_error(returncode: int, stderr: bytes, verb: str, kind: str | None = None) -> CmError:
    from cmrunner.sync.git import classify

    kind = kind or classify(stderr.decode("utf-8", "replace"))
    if kind == "corrupt":  # not the network: `cm sync repair` rebuilds the repository
        return CmError("SYNC_REPO_CORRUPT", f"the sync repository is damaged: one of its own objects did not read "
                                            f"while cm {'read from' if verb == 'read' else 'pushed to'} the remote "
                                            f"(git exit {returncode}); your memory "
                                            "files are untouched; run `cm sync repair` (it rebuilds it from your "
                                            "memory files and the remote)")
    if kind == "rejected":
        return CmError("SYNC_REMOTE_REJECTED", f"the remote refused to let cm {verb} (git exit {returncode}); check "
                                               "your access to it, then run `cm sync`")
    return CmError("SYNC_REMOTE_UNREACHABLE", f"the remote could not be reached to {verb} (git exit {returncode}); "
                                              "your memory is committed locally and cm retries later; check the "
                                              "network or the remote, or run `cm sync`")


def push(git: Git, branch: str) -> bool:
    """``True`` when pushed; ``False`` when the remote moved meanwhile (fetch and merge again)."""
    found = git.run("push", "--quiet", "--porcelain", REMOTE, f"HEAD:refs/heads/{branch}", timeout=NETWORK_SECONDS,
                    check=False)
    if found.returncode == 0:
        return True
    text = (found.stdout + found.stderr).decode("utf-8", "replace")
    if re.search(r"non-fast-forward|fetch first|\[rejected\]", text):
        return False
    raise _network_error(found.returncode, found.stdout + found.stderr, "push")


def integrate(git: Git, paths: DataPaths, home: str, local: str | None, remote: str,
              seen: str | None) -> tuple[int, int]:
    """Step 3 for a remote that is ahead or diverged: merge, publish, move HEAD. ``(documents, conflicts)``.

    ``seen`` is the remote tip the previous fetch saw. A remote whose history was rewritten by
    ``cm sync purge-history`` on another machine (no common commit, another epoch in its marker)
    is merged from the last base this machine shared with the old history, and the result's only
    parent is the new tip: the old history is not pushed back."""
    base = git.out("merge-base", local, remote) if local and git.ok("merge-base", local, remote) else None
    rewritten = (base is None and local is not None and seen is not None and seen != remote
                 and marker_of(git, local) != marker_of(git, remote))
    if rewritten:
        assert local is not None and seen is not None
        base = git.out("merge-base", local, seen) if git.ok("merge-base", local, seen) else None
    with commit.repository_lock(paths, _wait(git, commit.REPO_LOCK_SECONDS)):
        live = live_documents(paths)
    result, conflicts, here = _merge_all(git, paths, home, base, remote, live)
    changed = {n for n, data in here.items() if data is not None and data != live.get(n)}
    if changed:
        # A running drain's job may commit between that read and a publish. The publish holds the
        # drain lease (no job runs meanwhile), so the merge is done again from what is live then:
        # a job's commit is merged with the pulled change instead of failing this sync.
        with usercommit.exclusive(paths, home, _wait(git, usercommit.WAIT_SECONDS)) as session:
            with commit.repository_lock(paths, _wait(git, commit.REPO_LOCK_SECONDS)):
                now = live_documents(paths)
            if now != live:
                live = now
                result, conflicts, here = _merge_all(git, paths, home, base, remote, live)
                changed = {n for n, data in here.items() if data is not None and data != live.get(n)}
            if changed:
                _publish(session, git, local, remote, {n: live.get(n) for n in changed},
                         {n: here[n] or b"" for n in changed},
                         frozenset(c.key for n in changed for c in conflicts.get(n, [])))
    tree = build_tree(git, result, marker_of(git, remote))
    if rewritten:
        make_commit(git, tree, [remote], f"cm sync: merge on {git.device} onto rewritten history", local)
    elif local is not None and git.ok("merge-base", "--is-ancestor", local, remote) and \
            git.out("rev-parse", f"{remote}^{{tree}}") == tree:
        git.run("update-ref", "-m", "cm sync: fast-forward", "HEAD", remote, local)
    else:
        make_commit(git, tree, [p for p in (local, remote) if p], f"cm sync: merge on {git.device}", local)
    return len(changed), sum(len(v) for v in conflicts.values())


def _merge_all(git: Git, paths: DataPaths, home: str, base: str | None, remote: str,
               live: dict[str, bytes]) -> tuple[dict[str, bytes], dict[str, list[merge.Conflict]], dict[str, bytes | None]]:
    """Every document merged by section: ``(what the tree gets, conflicts, what the live file gets)``;
    the live file keeps the sections the secret net holds back here."""
    names = sorted(set(live) | {p for p in git.files(remote) if target_of(p)})
    result: dict[str, bytes] = {}
    conflicts: dict[str, list[merge.Conflict]] = {}
    held = withheld_documents(live, home, paths)
    ours_shared, kept_back = shareable(live, held)
    for name in names:
        target = target_of(name) or ""
        merged = merge.merge(target, git.blob(base, name), ours_shared.get(name), git.blob(remote, name))
        if merged.data is not None:
            result[name] = merged.data
        if merged.conflicts:
            conflicts[name] = merged.conflicts
    here = {n: merge.rejoin(target_of(n) or "", result.get(n) or sections.missing_document_text(
        target_of(n) or "").encode(), kept_back[n]) if n in kept_back else result.get(n) for n in names}
    return result, conflicts, here


def _wait(git: Git, most: float) -> float:
    """How long a wait inside this sync may take: ``most``, or less when the overall deadline nears."""
    left = git.left()
    if left is None:
        return most
    if left <= 0:
        raise git.past_deadline("before a wait")
    return min(most, left)


def author_of(git: Git, local: str | None, remote: str, name: str) -> str:
    """The device whose commit last changed ``name`` on the remote's side of ``local``: a merge
    that only carried the file over is passed by (git's history simplification follows the
    parent it came from), so a third machine's merge on the tip does not take the credit. Per
    file, not per section: two machines' edits of one file since ``local`` name the later
    commit's (a merge that combined them, its maker). The tip's author when none is found."""
    found = git.out("log", "-1", "--format=%an", f"{local}..{remote}" if local else remote, "--", name)
    found = found or git.out("log", "-1", "--format=%an", remote)
    return found.removeprefix("cm on ") or "another machine"


def _publish(session: usercommit.Session, git: Git, local: str | None, remote: str,
             before: dict[str, bytes | None], after: dict[str, bytes], trashed: frozenset[str]) -> None:
    """Publish the merged documents, one user commit per device they came from (history names it)."""
    snapshot = {}
    for name in sorted(after):
        target = target_of(name)
        assert target is not None
        doc = commit.read_document(session.paths, target)
        if (doc.data if doc.exists else None) != before[name]:
            raise CmError("STALE_REVISION", f"memory/{name} changed while cm merged it (a hand edit); nothing was "
                                            "published; run `cm sync` again")
        snapshot[target] = doc
    by_author: dict[str, list[str]] = {}
    for name in sorted(after):
        by_author.setdefault(author_of(git, local, remote, name), []).append(name)
    for author, names in sorted(by_author.items()):
        targets = {n: target_of(n) or "" for n in names}
        usercommit.commit_change(session, {t: snapshot[t] for t in targets.values()},
                                 {t: sections.parse(t, after[n]) for n, t in targets.items()}, "sync",
                                 history.Provenance(history.USER, client=f"sync from {author}"[:120]), trashed)


def run(paths: DataPaths, home: str, message: str | None = None, wait: float = LOCK_SECONDS,
        deadline: float | None = None) -> Outcome:
    """One sync (module contract); records its outcome for ``cm status`` either way. ``deadline``
    (seconds, an automatic sync's ``sync.autoDeadlineSeconds``) bounds the whole run: every git
    step and every wait gets at most the time left (``sync/git.py``)."""
    state = syncstate.read(paths)
    if state is None:
        raise CmError("SYNC_NOT_SET_UP", "memory sync is not set up; run `cm sync init <remote>` first")
    git: Git | None = None
    try:
        git = Git(paths, syncstate.device_name(home))
        if deadline is not None:
            git.limit(deadline)
        with sync_lock(paths, _wait(git, wait)):
            clear_stale_locks(git)
            check_health(git, paths)
            clear_leftovers(git)
            outcome = _run(git, paths, home, state["branch"], message or f"cm: memory on {git.device}")
            synced = git.rev("HEAD")  # an ok run ends with the remote at HEAD: repair's merge base
    except CmError as exc:
        left = git.left() if git is not None else None
        if exc.code in _WAITS and left is not None and left <= 0:  # the wait was cut by the deadline
            assert git is not None
            cut = git.past_deadline(_WAITS[exc.code])
            syncstate.record(paths, "failed", cut.code, cut.message[:300])
            raise cut from None
        if exc.code != "SYNC_BUSY":  # the running sync records its own outcome
            syncstate.record(paths, "failed", exc.code, exc.message[:300])
        raise
    syncstate.record(paths, "ok", "SYNC_SECTION_KEPT_LOCAL" if outcome.withheld else None,
                     ", ".join(outcome.withheld) or None, synced=synced)
    return outcome


# Waits the deadline shortens, and what a sync past it was waiting for (SYNC_BUSY stays itself: the
# running sync records its own outcome).
_WAITS = {"REPOSITORY_LOCK_TIMEOUT": "while waiting for the memory folder's lock",
          "DRAIN_BUSY": "while waiting for the drain"}


def _run(git: Git, paths: DataPaths, home: str, branch: str, message: str) -> Outcome:
    committed, held = commit_local(git, paths, home, message)
    pulled = conflicts = 0
    for _ in range(ROUNDS):
        local = git.rev("HEAD")
        seen = git.rev(f"refs/remotes/{REMOTE}/{branch}")
        remote = fetch(git, branch)
        behind = remote is not None and remote != local and (
            local is None or not git.ok("merge-base", "--is-ancestor", remote, local))
        if behind:
            assert remote is not None
            docs, found = integrate(git, paths, home, local, remote, seen)
            pulled += docs
            conflicts += found
        if remote is not None and remote == git.rev("HEAD"):
            return Outcome(committed, pulled, conflicts, False, held)
        if push(git, branch):
            return Outcome(committed, pulled, conflicts, True, held)
    raise CmError("SYNC_REMOTE_BUSY", f"the remote kept moving during {ROUNDS} rounds; run `cm sync` again")


def commit_message(paths: DataPaths, receipts: list[str], device: str) -> str:
    """The message of a commit the drain or ``cm flush`` asks for: the receipts it published, the
    sources they came from (history's client of each version) and the device. Ids and names only."""
    from cmrunner.core import store

    sources: set[str] = set()
    conn = store.open_existing(paths)
    if conn is not None:
        try:
            for receipt in receipts:
                sources |= {v.client for v in history.by_receipt(conn, receipt) if v.client}
        except Exception:  # a store too old for history: the receipts alone still say what happened
            pass
        finally:
            conn.close()
    lines = [f"cm: {len(receipts)} commit(s) on {device}", ""]
    lines += [f"receipt: {r}" for r in receipts]
    lines.append(f"source: {', '.join(sorted(sources)) or 'unknown'}")
    lines.append(f"device: {device}")
    return "\n".join(lines)


def ahead_behind(git: Git, branch: str) -> tuple[int, int] | None:
    """Commits here not on the remote-tracking branch, and the reverse (as of the last fetch)."""
    local, remote = git.rev("HEAD"), git.rev(f"refs/remotes/{REMOTE}/{branch}")
    if local is None or remote is None:
        return None
    counts = git.out("rev-list", "--left-right", "--count", f"{local}...{remote}").split()
    return int(counts[0]), int(counts[1])
