"""The file-system half of the Writer's commit, and its crash recovery.

A commit publishes several Markdown documents and one receipt as a unit. The Writer (which holds
the repository lock around every call here, and does the database side) drives it like this::

    for r in recover(paths):            # at drain start and before every commit
        <replay r.receipt on the DB side>; r.cleanup()
    tx = stage(paths, job_id, [FileChange(target, before_hash, after_bytes), ...], receipt)
    <repository lock>                   # everything that publishes nothing happened before it
    try:
        tx.verify_before()              # STALE_REVISION: a hand edit since the snapshot
        tx.mark()                       # the point of no return
        tx.publish()
        <mark observations processed, links, receipt row; COMMIT>
    except BaseException:
        tx.abandon()                    # deletes it only if unmarked; else recovery replays it
        raise
    tx.cleanup()                        # only once the DB side has committed

API:
- ``FileChange(target, before, after)``: ``target`` is ``profile``, ``preferences`` or
  ``project:<id>``; ``before`` the sha256 hex the agent's snapshot saw, or ``sections.MISSING_HASH``;
  ``after`` the new bytes, which must parse as a valid document (structure only: budgets are the
  Writer's business).
- ``stage(paths, job_id, changes, receipt) -> Transaction`` creates ``runtime/transactions/<uuid4>/``
  (0700) holding, for each document and, last, the receipt (canonical JSON, one line plus
  newline), ``stage-<n>`` (0600, what recovery trusts) and ``publish-<n>`` (0600, the same bytes:
  the copy the commit renames into place); then ``READY`` (the marker's content, ``v1\\n``) and
  ``journal.json`` = ``{version: 1, id: job_id, files: [{path, stage, before, after}]}`` with paths
  relative to the data root. Every file is written and fsynced, then the directory once, and the
  live directories (``memory/``, ``memory/projects/``, ``runtime/receipts/``) are created, all
  before any lock. Refuses an invalid job id or change (``INVALID_TRANSACTION``), an unsafe
  receipt (``UNSAFE_RECEIPT``), an existing receipt (``RECEIPT_EXISTS``) and any unfinished
  transaction directory (``TRANSACTION_PENDING``: run ``recover`` first), so at most one
  transaction is ever in flight.
- ``Transaction.verify_before()``: every live document still hashes to its ``before``
  (``STALE_REVISION`` otherwise; nothing has been published) and the receipt is still absent.
- ``Transaction.mark()`` renames ``READY`` to ``COMMITTING`` and fsyncs the directory: the marker
  appears whole, durably, with one rename. From here on the transaction is published forward, by
  ``publish`` or by ``recover`` after a crash.
- ``Transaction.publish()``: checks that each live file is at its ``before`` or ``after`` hash and
  that the copy of each file not yet at ``after`` matches its digest (``RECOVERY_CONFLICT``
  otherwise, before anything is renamed), then renames those copies into place: documents first,
  then one fsync of each distinct parent directory, the receipt last, then its directory's
  fsync. So the lock covers no file write and no file fsync, only directory entries (unless a
  live directory is on another file system: then ``write_atomic`` beside the target). Idempotent.
- ``Transaction.cleanup()`` / ``Recovered.cleanup()``, once the DB side has committed: rename the
  directory to ``done.<uuid>``, fsync, delete it, fsync. Refused (``TRANSACTION_ORDER``) for a
  marked, unpublished transaction.
- ``Transaction.abandon()`` for failure paths: discards an unmarked transaction; once marked it
  leaves the directory alone (returns False), because only it lets ``recover`` replay a receipt
  whose files are published but whose DB side did not commit.
- ``recover(paths) -> list[Recovered(job_id, receipt, directory)]`` looks only at
  ``runtime/transactions`` (never at ``runtime/receipts``, so its cost does not grow with history).
  It first validates every entry, touching nothing: ``done.<uuid>`` directories and unmarked
  ``<uuid>`` directories (whatever subset of staged files, copies, ``READY`` and journal a crash
  during staging left, torn or whole) are to be deleted; a marked one needs a strictly valid
  journal, staged files matching their digests, nothing foreign inside (``publish-<n>`` copies
  are allowed, in any state, because they are never trusted: recovery writes each one it needs
  afresh from ``stage-<n>``), and each live file at its ``before`` or ``after`` hash. Anything else
  (a foreign name, a file, a symlink, a bad marker, a corrupt journal, a hand edit) raises
  ``RECOVERY_CONFLICT`` naming the entry and what to do. Only if all entries pass does it delete
  and publish forward; the caller replays each returned receipt on the DB side and then calls
  ``cleanup``.

Invariants:
- A live document only ever moves from its ``before`` bytes to its ``after`` bytes by one rename;
  a file at any other hash is never overwritten.
- No temporary file is ever created outside the transaction directory: the copy that is renamed
  into place is written inside it, so a crash at any instant leaves strays only where ``cleanup``
  and ``recover`` remove them.
- Everything a marked transaction needs is durable before its marker can exist: the staged files,
  their copies, the journal and the directory entries, and ``COMMITTING`` itself before any live
  file moves. Every rename into place is durable (its directory fsynced) before ``publish`` returns.
- The receipt file exists exactly when its transaction was marked (once published or recovered).
- Receipts hold ids, hashes, counts and kinds only (``assert_receipt_safe``), never Markdown,
  titles, bodies or model text.

Crash points: ``fault(point)`` is called at each of ``FAULT_POINTS`` and does nothing. It is a
plain function seam with no configuration: the crash suite's test support replaces it in the
processes it starts (``tests/support/seams.py``), so no user setting can make cm kill itself.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cmrunner.core import sections
from cmrunner.core.errors import CmError
from cmrunner.core.fsutil import ensure_private_dir, fsync_dir, fsync_fd, write_atomic
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc.receipts import assert_receipt_safe, canonical_json

FAULT_POINTS = ("before_stage", "after_stage_file", "after_stage_copy", "after_journal", "after_marker",
                "after_publish_file", "after_publish")

JOURNAL_VERSION = 1
JOURNAL_NAME = "journal.json"
MARKER_NAME = "COMMITTING"
READY_NAME = "READY"  # the marker, written and fsynced while staging; mark() only renames it
MARKER_CONTENT = b"v1\n"
DONE_PREFIX = "done."
DOCUMENT_LIMIT = sections.MAX_HARD_BUDGET
RECEIPT_LIMIT = 4 * 1024 * 1024
JOURNAL_LIMIT = 1024 * 1024
_JOB_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")
_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_HASH_RE = re.compile(r"[0-9a-f]{64}")
_STAGE_RE = re.compile(r"stage-(0|[1-9][0-9]{0,3})")
_DOC_PATH_RE = re.compile(r"memory/(?:profile|preferences)\.md|memory/projects/[A-Za-z0-9_-]{1,128}\.md")
_RECEIPT_PATH_RE = re.compile(r"runtime/receipts/([A-Za-z0-9_-]{1,128})\.json")
_OVERSIZE = "oversize"  # a live file too large to be any staged version: matches no hash
_STRUCTURE_ONLY = sections.Budgets(soft=sections.MAX_HARD_BUDGET, hard=sections.MAX_HARD_BUDGET)

def fault(point: str) -> None:
    """A named crash point (see module docstring); does nothing in cm itself."""


@dataclass(frozen=True)
class FileChange:
    """One document of a commit: the hash its snapshot had and the bytes it gets."""

    target: str
    before: str
    after: bytes


@dataclass(frozen=True)
class _Entry:
    path: str  # relative to the data root, "/"-separated
    stage: str
    before: str
    after: str

    @property
    def is_receipt(self) -> bool:
        return self.path.startswith("runtime/")

    def limit(self) -> int:
        return RECEIPT_LIMIT if self.is_receipt else DOCUMENT_LIMIT


class Transaction:
    """A staged commit in ``runtime/transactions/<uuid>/``; see the module docstring for the order."""

    def __init__(self, paths: DataPaths, job_id: str, directory: str, entries: Sequence[_Entry]) -> None:
        self.paths = paths
        self.job_id = job_id
        self.directory = directory
        self._entries = tuple(entries)
        self._state = "staged"

    def verify_before(self) -> None:
        """``STALE_REVISION`` unless every live document is still at its ``before`` hash."""
        self._require("verify_before", "staged")
        for entry in self._entries:
            live = _live_hash(_live_path(self.paths, entry.path), entry.limit(), entry.path)
            if entry.is_receipt:
                if live != sections.MISSING_HASH:
                    raise _receipt_exists(self.job_id)
            elif live != entry.before:
                raise CmError("STALE_REVISION",
                              f"{entry.path} changed since the Memory Agent read it (probably a hand edit); "
                              "nothing was published and the job will be retried against the new text")

    def mark(self) -> None:
        """Rename ``READY`` to ``COMMITTING``: from now on the transaction is published forward."""
        self._require("mark", "staged")
        os.rename(os.path.join(self.directory, READY_NAME), os.path.join(self.directory, MARKER_NAME))
        fsync_dir(self.directory)  # the marker is durable before any live file can move
        self._state = "marked"
        fault("after_marker")

    def publish(self) -> None:
        """Rename the staged copy of every file not yet at its ``after`` hash into place. Idempotent."""
        self._require("publish", "marked", "published")
        live = _live_hashes(self.paths, self.directory, self.job_id, self._entries)
        pending = [entry for entry, current in zip(self._entries, live) if current != entry.after]
        try:
            payloads = [_read_staged(self.directory, _publish_name(entry), entry) for entry in pending]
        except _Corrupt as bad:
            raise CmError("RECOVERY_CONFLICT", f"transaction {self.directory} was altered while committing: "
                                               f"{bad}; inspect it, then delete it so the job can be redone") from None
        _install(self.paths, self.directory, pending, payloads)
        self._state = "published"
        fault("after_publish")

    def cleanup(self) -> None:
        """Remove the transaction directory crash-safely. Refused while marked but unpublished."""
        if self._state == "marked":
            raise CmError("TRANSACTION_ORDER",
                          "a marked transaction must be published before cleanup; run recovery")
        _discard(self.directory)
        self._state = "cleaned"

    def abandon(self) -> bool:
        """Discard the transaction if it was never marked; a marked one is left for ``recover``."""
        if self._state != "staged":
            return False
        _discard(self.directory)
        self._state = "cleaned"
        return True

    def _require(self, step: str, *states: str) -> None:
        if self._state not in states:
            raise CmError("TRANSACTION_ORDER",
                          f"{step} is not allowed on a {self._state} transaction; follow stage, verify, "
                          "mark, publish, cleanup")


@dataclass(frozen=True)
class Recovered:
    """A marked transaction that recovery published forward; replay ``receipt``, then ``cleanup``."""

    job_id: str
    receipt: dict[str, Any]
    directory: str

    def cleanup(self) -> None:
        _discard(self.directory)


def stage(paths: DataPaths, job_id: str, changes: Sequence[FileChange], receipt: dict[str, Any]) -> Transaction:
    """Write the staged files and the journal (see module docstring); nothing live is touched."""
    if not isinstance(job_id, str) or not _JOB_ID_RE.fullmatch(job_id):
        raise CmError("INVALID_TRANSACTION", "a job id must match [A-Za-z0-9_-]{1,128}")
    files = _prepare(changes)
    assert_receipt_safe(receipt)
    for key in ("id", "jobId"):
        if key in receipt and receipt[key] != job_id:
            raise CmError("INVALID_TRANSACTION", f"the receipt's {key} is not the job id")
    receipt_bytes = canonical_json(receipt)
    if len(receipt_bytes) > RECEIPT_LIMIT:
        raise CmError("INVALID_TRANSACTION", f"the receipt is larger than {RECEIPT_LIMIT} bytes")
    receipt_rel = f"runtime/receipts/{job_id}.json"
    if os.path.lexists(_live_path(paths, receipt_rel)):
        raise _receipt_exists(job_id)
    files.append((receipt_rel, receipt_bytes, sections.MISSING_HASH))

    ensure_private_dir(paths.transactions, "the transactions directory")
    pending = [name for name in os.listdir(paths.transactions) if not name.startswith(DONE_PREFIX)]
    if pending:
        raise CmError("TRANSACTION_PENDING",
                      f"{len(pending)} unfinished transaction(s) in {paths.transactions}; run recovery first")
    for parent in sorted({os.path.dirname(_live_path(paths, rel)) for rel, _data, _before in files}):
        ensure_private_dir(parent, "a memory or receipts directory")  # here, so publish only renames
    directory = os.path.join(paths.transactions, str(uuid.uuid4()))
    os.mkdir(directory, 0o700)
    try:
        fsync_dir(paths.transactions)
        fault("before_stage")
        entries = []
        # Inside the private, unmarked directory files need no rename dance: each is written and
        # fsynced, and one directory fsync makes all their names durable before the marker can
        # exist. Recovery checks every staged digest, so a torn file is never published. The
        # copies and READY are written here, outside the locks, so that the commit's critical
        # section only renames.
        for n, (rel, data, before) in enumerate(files):
            entry = _Entry(rel, f"stage-{n}", before, hashlib.sha256(data).hexdigest())
            _write_new(os.path.join(directory, entry.stage), data)
            fault("after_stage_file")
            _write_new(os.path.join(directory, _publish_name(entry)), data)
            fault("after_stage_copy")
            entries.append(entry)
        _write_new(os.path.join(directory, READY_NAME), MARKER_CONTENT)
        journal = {"version": JOURNAL_VERSION, "id": job_id,
                   "files": [{"path": e.path, "stage": e.stage, "before": e.before, "after": e.after}
                             for e in entries]}
        _write_new(os.path.join(directory, JOURNAL_NAME), canonical_json(journal))
        fsync_dir(directory)
    except BaseException:
        _discard(directory)  # never marked, so nothing depends on it
        raise
    fault("after_journal")
    return Transaction(paths, job_id, directory, entries)


def _prepare(changes: Sequence[FileChange]) -> list[tuple[str, bytes, str]]:
    if not isinstance(changes, (list, tuple)):
        raise CmError("INVALID_TRANSACTION", "changes must be a list of FileChange")
    files: list[tuple[str, bytes, str]] = []
    seen: set[str] = set()
    for change in changes:
        if not isinstance(change, FileChange):
            raise CmError("INVALID_TRANSACTION", "changes must be a list of FileChange")
        rel = sections.target_relpath(change.target)
        if rel in seen:
            raise CmError("INVALID_TRANSACTION", f"{rel} appears twice in one commit")
        seen.add(rel)
        if not _is_before_hash(change.before):
            raise CmError("INVALID_TRANSACTION", f"the before hash of {rel} is not sha256 hex or missing")
        if not isinstance(change.after, bytes):
            raise CmError("INVALID_TRANSACTION", f"the new content of {rel} must be bytes")
        sections.parse(change.target, change.after, _STRUCTURE_ONLY)
        files.append((rel, change.after, change.before))
    return files


def recover(paths: DataPaths) -> list[Recovered]:
    """Finish or discard what a crash left in ``runtime/transactions`` (see module docstring)."""
    root = paths.transactions
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        raise CmError("RECOVERY_CONFLICT", f"{root} is not a real directory; move it away so cm can recreate it")
    names = sorted(os.listdir(root))
    if not names:
        return []
    discard: list[str] = []
    pending: list[tuple[str, _Marked]] = []
    for name in names:
        directory = os.path.join(root, name)
        kind = _classify(root, name)
        if kind == "marked":
            pending.append((directory, _load_marked(paths, directory, name)))
        else:
            discard.append(directory)
    _refuse_overlap(root, pending)
    for directory in discard:
        _discard(directory)
    recovered = []
    for directory, marked in pending:
        todo = [(entry, data) for entry, data, current in zip(marked.entries, marked.payloads, marked.live)
                if current != entry.after]
        for entry, data in todo:  # never trust a copy a crash left: write each one afresh
            ensure_private_dir(os.path.dirname(_live_path(paths, entry.path)), f"the directory of {entry.path}")
            _write_new(os.path.join(directory, _publish_name(entry)), data)
        _install(paths, directory, [entry for entry, _data in todo], [data for _entry, data in todo])
        recovered.append(Recovered(marked.job_id, marked.receipt, directory))
    return recovered


@dataclass(frozen=True)
class _Marked:
    job_id: str
    entries: tuple[_Entry, ...]
    payloads: tuple[bytes, ...]
    live: tuple[str, ...]
    receipt: dict[str, Any]


def _foreign(root: str, name: str, why: str) -> CmError:
    shown = repr(name[:80])
    return CmError("RECOVERY_CONFLICT",
                   f"{shown} in {root} {why}; cm does not touch what it cannot verify: inspect it, "
                   "move it out of that directory, then run cm again")


def _classify(root: str, name: str) -> str:
    """``done``, ``unmarked`` or ``marked``; anything else is foreign or corrupt."""
    if name.startswith(DONE_PREFIX):
        is_uuid = bool(_UUID_RE.fullmatch(name[len(DONE_PREFIX):]))
    else:
        is_uuid = bool(_UUID_RE.fullmatch(name))
    if not is_uuid:
        raise _foreign(root, name, "is not a cm transaction")
    st = os.lstat(os.path.join(root, name))
    if not stat.S_ISDIR(st.st_mode):
        raise _foreign(root, name, "is not a real directory")
    if name.startswith(DONE_PREFIX):
        return "done"
    marker = os.path.join(root, name, MARKER_NAME)
    try:
        data = _read_private(marker, len(MARKER_CONTENT))
    except FileNotFoundError:
        return "unmarked"
    except (OSError, _Corrupt):
        raise _foreign(root, name, "has a commit marker that is not a regular file") from None
    if data != MARKER_CONTENT:
        raise _foreign(root, name, "has a commit marker of an unknown version")
    return "marked"


def _load_marked(paths: DataPaths, directory: str, name: str) -> _Marked:
    root = paths.transactions
    try:
        raw = _read_private(os.path.join(directory, JOURNAL_NAME), JOURNAL_LIMIT)
    except (OSError, _Corrupt):
        raise _foreign(root, name, "is committed but its journal is missing or unreadable") from None
    try:
        job_id, entries = _parse_journal(raw)
    except _Corrupt as bad:
        raise _foreign(root, name, f"is committed but its journal is invalid ({bad})") from None
    allowed = {JOURNAL_NAME, MARKER_NAME}
    for entry in entries:
        allowed.update((entry.stage, _publish_name(entry)))
    extra = [n for n in os.listdir(directory) if n not in allowed]
    if extra:
        raise _foreign(root, name, f"holds {len(extra)} file(s) the journal does not name")
    try:
        payloads, live = _check(paths, directory, job_id, entries)
    except _Corrupt as bad:
        raise _foreign(root, name, f"is committed but {bad}") from None
    try:
        receipt = _strict_json(payloads[-1])
    except _Corrupt:
        receipt = None
    if not isinstance(receipt, dict):
        raise _foreign(root, name, "is committed but its staged receipt is not a JSON object")
    return _Marked(job_id, entries, payloads, live, receipt)


def _parse_journal(raw: bytes) -> tuple[str, tuple[_Entry, ...]]:
    journal = _strict_json(raw)
    if not isinstance(journal, dict) or set(journal) != {"version", "id", "files"}:
        raise _Corrupt("it must have exactly version, id and files")
    if type(journal["version"]) is not int or journal["version"] != JOURNAL_VERSION:
        raise _Corrupt("unknown journal version")
    job_id = journal["id"]
    if not isinstance(job_id, str) or not _JOB_ID_RE.fullmatch(job_id):
        raise _Corrupt("bad job id")
    files = journal["files"]
    if not isinstance(files, list) or not files:
        raise _Corrupt("no files")
    entries = []
    paths_seen: set[str] = set()
    stages_seen: set[str] = set()
    for index, item in enumerate(files):
        if not isinstance(item, dict) or set(item) != {"path", "stage", "before", "after"} \
                or not all(isinstance(v, str) for v in item.values()):
            raise _Corrupt(f"file {index} must have string path, stage, before and after")
        path, stage_name, before, after = item["path"], item["stage"], item["before"], item["after"]
        last = index == len(files) - 1
        receipt_match = _RECEIPT_PATH_RE.fullmatch(path)
        if last:
            if not receipt_match or receipt_match.group(1) != job_id or before != sections.MISSING_HASH:
                raise _Corrupt("the last file must be this job's new receipt")
        elif not _DOC_PATH_RE.fullmatch(path):
            raise _Corrupt(f"file {index} is not a memory document path")
        if path in paths_seen or stage_name in stages_seen:
            raise _Corrupt(f"file {index} repeats a path or stage")
        if not _STAGE_RE.fullmatch(stage_name):
            raise _Corrupt(f"file {index} has a bad stage name")
        if not _is_before_hash(before) or not _HASH_RE.fullmatch(after):
            raise _Corrupt(f"file {index} has a bad hash")
        paths_seen.add(path)
        stages_seen.add(stage_name)
        entries.append(_Entry(path, stage_name, before, after))
    return job_id, tuple(entries)


def _refuse_overlap(root: str, pending: list[tuple[str, _Marked]]) -> None:
    owner: dict[str, str] = {}
    for directory, marked in pending:
        for entry in marked.entries:
            if entry.path in owner:
                raise CmError("RECOVERY_CONFLICT",
                              f"two committed transactions in {root} both change {entry.path}; cm cannot "
                              "tell which is newer: keep the version you want, then delete both "
                              f"{owner[entry.path]} and {directory}")
            owner[entry.path] = directory


def _check(paths: DataPaths, directory: str, job_id: str,
           entries: Sequence[_Entry]) -> tuple[tuple[bytes, ...], tuple[str, ...]]:
    """Staged bytes (digest-checked) and live hashes; conflict unless each live is before/after."""
    payloads = tuple(_read_staged(directory, entry.stage, entry) for entry in entries)
    return payloads, _live_hashes(paths, directory, job_id, entries)


def _read_staged(directory: str, name: str, entry: _Entry) -> bytes:
    """The bytes of ``name`` in the transaction, which must match ``entry``'s ``after`` digest."""
    try:
        data = _read_private(os.path.join(directory, name), entry.limit())
    except (OSError, _Corrupt):
        raise _Corrupt(f"its {name} is missing or unreadable") from None
    if hashlib.sha256(data).hexdigest() != entry.after:
        raise _Corrupt(f"its {name} does not match the journal's digest")
    return data


def _live_hashes(paths: DataPaths, directory: str, job_id: str, entries: Sequence[_Entry]) -> tuple[str, ...]:
    """The live hash of each entry; ``RECOVERY_CONFLICT`` unless each is at its before or after."""
    live = []
    for entry in entries:
        path = _live_path(paths, entry.path)
        try:
            current = _live_hash(path, entry.limit(), entry.path)
        except CmError:
            current = _OVERSIZE
        if current not in (entry.before, entry.after):
            raise CmError("RECOVERY_CONFLICT",
                          f"{entry.path} was changed outside cm while job {job_id} was committing; cm will "
                          f"not overwrite it. Keep the version you want (cm's is {directory}/{entry.stage}), "
                          f"then delete {directory} so the job can be redone")
        live.append(current)
    return tuple(live)


def _install(paths: DataPaths, directory: str, entries: Sequence[_Entry], payloads: Sequence[bytes]) -> None:
    """Rename each entry's ``publish-<n>`` copy (digest-checked, fsynced) into place: the documents,
    one fsync per distinct parent directory, then the receipt and its directory's fsync."""
    staged = list(zip(entries, payloads))
    documents = [(entry, data) for entry, data in staged if not entry.is_receipt]
    receipt = [(entry, data) for entry, data in staged if entry.is_receipt]
    for group in (documents, receipt):  # every document is durable before the receipt appears
        parents: list[str] = []
        for entry, data in group:
            target = _live_path(paths, entry.path)
            _rename_into_place(os.path.join(directory, _publish_name(entry)), target, entry.path, data)
            fault("after_publish_file")
            if os.path.dirname(target) not in parents:
                parents.append(os.path.dirname(target))
        for parent in parents:
            fsync_dir(parent)


def _rename_into_place(copy: str, target: str, rel: str, data: bytes) -> None:
    parent = os.path.dirname(target)
    try:
        os.rename(copy, target)
    except FileNotFoundError:
        if os.path.lexists(parent):
            raise
        ensure_private_dir(parent, f"the directory of {rel}")  # removed since staging
        _rename_into_place(copy, target, rel, data)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        # A separately mounted data directory: fall back to a temp file next to the target.
        os.unlink(copy)
        write_atomic(target, data)


def _write_new(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` (0600, replacing a stray copy from a crash) and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        fsync_fd(fd)
    finally:
        os.close(fd)


def _discard(directory: str) -> None:
    """Rename to ``done.<uuid>`` first, so a crash mid-delete never leaves a live-looking directory."""
    parent, name = os.path.split(directory)
    if name.startswith(DONE_PREFIX):
        done = directory
    else:
        done = os.path.join(parent, DONE_PREFIX + name)
        try:
            os.rename(directory, done)
        except FileNotFoundError:
            if not os.path.lexists(done):
                return
        fsync_dir(parent)
    try:
        shutil.rmtree(done)
    except FileNotFoundError:
        pass
    fsync_dir(parent)


class _Corrupt(Exception):
    """A transaction file that is not what cm wrote (the text is a reason, never file content)."""


def _read_private(path: str, limit: int) -> bytes:
    """A regular, single-link, non-symlink file of at most ``limit`` bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise _Corrupt("not a regular file")
        if st.st_size > limit:
            raise _Corrupt("too large")
        data = b""
        while chunk := os.read(fd, 1 << 16):
            data += chunk
            if len(data) > limit:
                raise _Corrupt("too large")
        return data
    finally:
        os.close(fd)


def _live_hash(path: str, limit: int, rel: str) -> str:
    """sha256 of a live file, ``missing`` when absent; ``UNSAFE_PATH`` for links and non-files."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return sections.MISSING_HASH
    except OSError:
        raise CmError("UNSAFE_PATH", f"{rel} cannot be opened safely (a symbolic link?); "
                                     "replace it with a regular file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CmError("UNSAFE_PATH", f"{rel} is not a regular file; replace it with one")
        if st.st_size > limit:
            return _OVERSIZE
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 16):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def _strict_json(raw: bytes) -> object:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                raise _Corrupt("duplicate key")
            result[key] = value
        return result

    def constant(name: str) -> object:
        raise _Corrupt("non-finite number")

    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=pairs, parse_constant=constant)
    except (ValueError, RecursionError):
        raise _Corrupt("not valid JSON") from None


def _is_before_hash(value: object) -> bool:
    return isinstance(value, str) and (value == sections.MISSING_HASH or bool(_HASH_RE.fullmatch(value)))


def _publish_name(entry: _Entry) -> str:
    return "publish-" + entry.stage[len("stage-"):]


def _live_path(paths: DataPaths, rel: str) -> str:
    return os.path.join(paths.root, *rel.split("/"))


def _receipt_exists(job_id: str) -> CmError:
    return CmError("RECEIPT_EXISTS",
                   f"job {job_id} already has a receipt; it was committed before and must not be applied twice")
