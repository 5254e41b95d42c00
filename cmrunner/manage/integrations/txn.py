"""All-or-nothing file changes across host folders, with a journal that survives a crash.

Contract:
- A ``Change`` replaces, creates or deletes one file, guarded by the digest the planner saw
  (``before``: the sha256 of the current bytes, or ``None`` for "must not exist"). Every guard is
  checked before anything is written; a mismatch is ``HOST_FILE_MODIFIED`` and nothing changes.
- ``apply`` first writes a journal under ``<home>/integrations.txn/`` (a copy of every file it
  will touch, fsynced), then changes the files one by one (temp file + rename, existing mode
  kept), then marks the journal committed and removes it. An exception rolls back at once from
  the journal (an ``OSError`` then becomes ``INTEGRATION_WRITE_FAILED`` naming the file); a crash
  leaves the journal, and ``recover`` (called before every transaction and at start-up of the
  management UI) restores every file to its state before the transaction and
  removes the folders it created. A committed journal is only cleaned up.
- One lock for every host-configuration transaction of a home, whoever runs it (the management
  UI, ``cm agents``, uninstall): ``locked`` takes an ``flock`` on ``<home>/integrations.lock``
  (re-entrant within a process, so a plan and its apply can hold it together), waiting at most
  ``LOCK_WAIT_S``, then ``INTEGRATIONS_BUSY``. ``apply`` and ``recover`` run under it. The journal
  names its owner (``core.identity``: boot id, pid, start time); ``recover`` rolls back only a
  transaction whose owner is gone (a process without the lock, such as an older cm, that is still
  running makes it ``INTEGRATIONS_BUSY``), so no process ever undoes another's live transaction.
  A journal without an owner (written by an older cm) is rolled back under the lock, as before.
- Symbolic links are never written through: a link in a changed file's place is ``UNSAFE_PATH``.
- A change marked ``backup`` (an edit of the user's own settings file) first leaves a copy of the
  file as it was in ``<home>/backups/integrations/<UTC time>/`` with an ``index.json`` naming
  each copy's original path; the newest ``KEEP_BACKUPS`` folders are kept. They outlive the
  transaction, for the user to go back to by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from cmrunner.core import fsutil, identity
from cmrunner.core.errors import CmError

JOURNAL_DIR = "integrations.txn"
LOCK_FILE = "integrations.lock"
LOCK_WAIT_S = 30.0
_BUSY = ("another cm process is changing your agents' settings (the management UI or `cm agents`); wait for it "
         "to finish and try again, nothing was changed")
BACKUP_DIR = os.path.join("backups", "integrations")
KEEP_BACKUPS = 20
# No size limit here: whatever the planner decided to change is read, copied and restored, so a
# grown host file never blocks a removal or a rollback (the planner limits only additions).
FILE_LIMIT = sys.maxsize
NEW_FILE_MODE = 0o644


def digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_bytes(path: str) -> bytes | None:
    """The file's bytes, ``None`` if it does not exist; links and non-files are ``UNSAFE_PATH``."""
    if os.path.islink(path):
        raise CmError("UNSAFE_PATH", f"{path} is a symbolic link; cm does not write through links, replace it with "
                                     "a regular file or leave this integration out")
    return fsutil.read_regular_file(path, FILE_LIMIT, "host file")


@dataclass
class Change:
    path: str
    before: str | None
    after: bytes | None
    mode: int | None = None
    prune: list[str] = field(default_factory=list)  # cm's own folders, removed when a deletion empties them
    created_dirs: list[str] = field(default_factory=list)
    backup: bool = False  # keep a copy of the file as it was (see module contract)


def _journal(home: str) -> str:
    return os.path.join(home, JOURNAL_DIR)


_held: dict[str, int] = {}  # homes whose lock this process holds, and how deeply


@contextlib.contextmanager
def locked(home: str, wait: float | None = None) -> Iterator[None]:
    """Hold the host-configuration lock of ``home`` (see module contract)."""
    key = os.path.realpath(home)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    fsutil.ensure_private_dir(home, "configuration home")
    fd = os.open(os.path.join(home, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + (LOCK_WAIT_S if wait is None else wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise CmError("INTEGRATIONS_BUSY", _BUSY) from None
                time.sleep(0.05)
        _held[key] = 1
        try:
            yield
        finally:
            del _held[key]
    finally:
        os.close(fd)  # releases the lock


def _check(changes: list[Change]) -> None:
    for change in changes:
        if not os.path.isabs(change.path):
            raise CmError("PATH_NOT_ABSOLUTE", f"{change.path} is not absolute")
        current = digest(read_bytes(change.path))
        if current != change.before:
            raise CmError("HOST_FILE_MODIFIED", f"{change.path} changed while cm was preparing the change; nothing "
                                                "was written, try again")


def missing_dirs(path: str) -> list[str]:
    missing = []
    current = os.path.dirname(path)
    while not os.path.exists(current):
        missing.append(current)
        current = os.path.dirname(current)
    return list(reversed(missing))


def _write(path: str, data: bytes, mode: int) -> None:
    for directory in missing_dirs(path):
        os.mkdir(directory, 0o755)
    fsutil.write_atomic(path, data, mode)


def _restore(home: str) -> None:
    journal = _journal(home)
    with open(os.path.join(journal, "journal.json"), encoding="utf-8") as handle:
        entries = json.load(handle)["files"]
    for entry in reversed(entries):
        path = entry["path"]
        if entry["backup"] is None:
            if os.path.lexists(path) and not os.path.islink(path):
                os.unlink(path)
        else:
            with open(os.path.join(journal, entry["backup"]), "rb") as handle:
                _write(path, handle.read(), entry["mode"])
        for directory in reversed(entry["createdDirs"]):
            try:
                os.rmdir(directory)
            except OSError:
                pass


def _keep_backups(home: str, changes: list[Change]) -> str | None:
    """Copy the files of ``backup`` changes aside; the folder, or ``None`` when none was needed."""
    import time

    wanted: list[tuple[str, bytes]] = []
    for change in changes:
        data = read_bytes(change.path) if change.backup else None
        if data is not None:
            wanted.append((change.path, data))
    if not wanted:
        return None
    root = os.path.join(home, BACKUP_DIR)
    fsutil.ensure_private_dir(root, "backups folder")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = os.path.join(root, stamp)
    suffix = 1
    while os.path.exists(folder):
        suffix += 1
        folder = os.path.join(root, f"{stamp}-{suffix}")
    os.mkdir(folder, 0o700)
    index = []
    for number, (path, data) in enumerate(wanted):
        name = f"{number}-{os.path.basename(path)}"
        fsutil.write_atomic(os.path.join(folder, name), data, 0o600)
        index.append({"path": path, "copy": name})
    fsutil.write_atomic(os.path.join(folder, "index.json"), json.dumps({"files": index}, indent=2).encode("utf-8"),
                        0o600)
    fsutil.fsync_dir(root)
    for old in sorted(os.listdir(root))[:-KEEP_BACKUPS]:
        shutil.rmtree(os.path.join(root, old), ignore_errors=True)
    return folder


def recover(home: str) -> bool:
    """Finish or roll back a transaction whose owner is gone; ``True`` if one was found."""
    journal = _journal(home)
    if not os.path.isdir(journal):
        return False
    with locked(home):
        if not os.path.isdir(journal):
            return False  # another process recovered it while this one waited
        listing = os.path.join(journal, "journal.json")
        if not os.path.exists(os.path.join(journal, "COMMITTED")) and os.path.exists(listing):
            with open(listing, encoding="utf-8") as handle:
                owner = identity.parse_key(str(json.load(handle).get("owner", "")))
            if owner is not None and owner != identity.current() and identity.is_alive(owner):
                raise CmError("INTEGRATIONS_BUSY", _BUSY)
            _restore(home)
        shutil.rmtree(journal)
        fsutil.fsync_dir(home)
        return True


def apply(home: str, changes: list[Change]) -> None:
    """Apply every change or none (see module contract), under the lock."""
    with locked(home):
        _apply(home, changes)


def _apply(home: str, changes: list[Change]) -> None:
    recover(home)
    _check(changes)
    if not changes:
        return
    journal = _journal(home)
    fsutil.ensure_private_dir(home, "configuration home")
    _keep_backups(home, changes)
    os.mkdir(journal, 0o700)
    entries: list[dict] = []
    for index, change in enumerate(changes):
        current = read_bytes(change.path)
        mode = change.mode
        backup = None
        if current is not None:
            mode = mode or (os.stat(change.path).st_mode & 0o777)
            backup = f"b{index}"
            fsutil.write_atomic(os.path.join(journal, backup), current)
        change.created_dirs = missing_dirs(change.path) if change.after is not None else []
        entries.append({"path": change.path, "backup": backup, "mode": mode or NEW_FILE_MODE,
                        "createdDirs": change.created_dirs})
    owner = identity.current().key()
    fsutil.write_atomic(os.path.join(journal, "journal.json"),
                        json.dumps({"owner": owner, "files": entries}).encode("utf-8"))
    fsutil.fsync_dir(journal)
    current_path = ""
    try:
        for change, entry in zip(changes, entries):
            current_path = change.path
            if change.after is None:
                if os.path.lexists(change.path):
                    os.unlink(change.path)
                    fsutil.fsync_dir(os.path.dirname(change.path))
                _prune_empty_dirs(change.prune)
            else:
                _write(change.path, change.after, change.mode or entry["mode"])
    except BaseException as exc:
        _restore(home)
        shutil.rmtree(journal, ignore_errors=True)
        if isinstance(exc, OSError):
            raise CmError("INTEGRATION_WRITE_FAILED", f"writing {current_path} failed ({exc.strerror or exc}); every "
                                                      "file was put back as it was, fix the cause and try again"
                          ) from None
        raise
    fsutil.write_atomic(os.path.join(journal, "COMMITTED"), b"")
    shutil.rmtree(journal)
    fsutil.fsync_dir(home)


def _prune_empty_dirs(directories: list[str]) -> None:
    """Remove cm's own folders that are now empty, deepest first (a non-empty one stays)."""
    for directory in sorted(directories, key=len, reverse=True):
        try:
            os.rmdir(directory)
        except OSError:
            pass
