"""The commit critical section and crash recovery, in the design's order.

Contract:
- Lock order, always: repository lock (``filelock``, no soft-lock fallback) → ``BEGIN IMMEDIATE`` →
  lease and fencing check → snapshot CAS → ``COMMITTING`` marker → atomic publish → database side
  → COMMIT. No network call ever runs inside it. Everything that publishes nothing runs outside
  it: before, the caller's ``history.stage`` (the history rows the commit will add) and
  ``publish.stage`` (every file write and file fsync: the staged files, the copies that will be
  renamed into place, the marker's content); after, cleanup. Inside, the file system sees reads
  of the documents, renames and one fsync per directory that changed; the database sees the
  commit's own rows and one insert per history version (its chain head found through the
  per-section index, so the cost does not grow with history).
- Each live document is read and hashed once before the marker: the CAS covers the snapshot
  documents the commit leaves alone, ``verify_before`` the ones it changes (the same check
  against the same hashes). ``publish`` checks the changed ones again after the marker, because
  a hand edit in between must never be overwritten.
- ``apply_receipt`` is the whole database side of a commit and is driven by the receipt alone, so
  the normal commit and the replay after a crash (files published, database not) end in the same
  state without calling the model again. It is idempotent: a receipt row makes it a no-op.
- ``recover`` runs under the repository lock at drain start and before every attempt: unmarked
  transactions are discarded, marked ones published forward and their receipts replayed. It looks
  only at ``runtime/transactions``; its cost does not grow with historical receipts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from cmrunner.capture import observations
from cmrunner.core import fsutil, history, jobstore, records, sections, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.core.sections import Document
from cmrunner.writer_proc import publish, receipts

REPO_LOCK_SECONDS = 30.0


@contextmanager
def repository_lock(paths: DataPaths, wait: float = REPO_LOCK_SECONDS) -> Iterator[None]:
    """The memory folder's lock; ``wait`` is less than ``REPO_LOCK_SECONDS`` for a caller with a
    deadline of its own (an automatic sync)."""
    from filelock import FileLock, Timeout

    lock = FileLock(paths.repo_lock, timeout=wait, fallback_to_soft=False, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        raise CmError("REPOSITORY_LOCK_TIMEOUT", f"another cm process held the repository lock for {wait:.0f} s; retry later") from None
    try:
        yield
    finally:
        lock.release()


def read_document(paths: DataPaths, target: str) -> Document:
    """The live document of ``target``, parsed (a missing file reads as the empty document)."""
    raw = fsutil.read_regular_file(paths.document(target), sections.DEFAULT_BUDGETS.hard, target)
    return sections.parse(target, raw)


def current_hash(paths: DataPaths, target: str) -> str:
    raw = fsutil.read_regular_file(paths.document(target), sections.MAX_HARD_BUDGET + 1, target)
    return sections.document_hash(raw)


def apply_receipt(conn: sqlite3.Connection, receipt: dict, now: int) -> bool:
    """The database side of a commit, inside the caller's transaction; ``False`` if already applied."""
    job_id = receipt["jobId"]
    if records.applied(conn, job_id):
        return False
    held = sorted(observations.ids_of_job(conn, job_id))
    if held != receipt["observationIds"]:
        raise CmError("RECOVERY_CONFLICT", f"receipt {job_id} does not match the database's batch; run `cm status` and report it")
    jobstore.finish(conn, job_id, receipt.get("editResult"), now)
    observations.mark_processed(conn, job_id, now)
    for doc in receipt["documents"]:
        records.set_version(conn, doc["target"], doc["after"])
    records.replace_links(conn, receipt["linkTargets"],
                          [(link["target"], link["key"], sid) for link in receipt["links"] for sid in link["sourceIds"]])
    for sid in receipt["forgetSourceIds"]:
        observations.forget(conn, sid)
    observations.purge_processed(conn, receipt["purgeSourceIds"])
    for mark in receipt["watermarks"]:
        records.raise_watermark(conn, mark["target"], mark["at"], mark["sourceId"])
    history.settle(conn, job_id, now)
    records.add_receipt(conn, job_id, now)
    return True


def recover(paths: DataPaths, conn: sqlite3.Connection, now: Callable[[], int]) -> int:
    """Finish or discard interrupted commits (caller holds the repository lock); returns replays."""
    replayed = 0
    for found in publish.recover(paths):
        with store.immediate(conn):
            replayed += apply_receipt(conn, found.receipt, now())
        found.cleanup()
    return replayed


def commit(paths: DataPaths, conn: sqlite3.Connection, job_id: str, fence: Callable[[], None],
           snapshot: dict[str, Document], changed: dict[str, Document], receipt: dict, now: Callable[[], int]) -> None:
    """Publish ``changed`` and apply ``receipt`` atomically with respect to crashes (module contract).

    The caller ran ``recover`` under the repository lock before this attempt, and holds the drain
    lease, so no other process stages or recovers meanwhile. ``fence`` runs inside the lock and the
    transaction and raises unless the caller may still commit (the Writer: the job's lease; a user
    action: the drain lease).
    """
    receipts.assert_receipt_safe(receipt)
    # Staging is the slow part (every file fsync) and publishes nothing: it runs before the
    # locks. If a stray recovery deleted it meanwhile, mark() fails and the job is simply retried.
    transaction = None
    if changed:
        transaction = publish.stage(
            paths, job_id, [publish.FileChange(t, snapshot[t].hash, changed[t].data) for t in sorted(changed)], receipt,
        )
    try:
        with repository_lock(paths), store.immediate(conn):
            fence()
            for target, doc in snapshot.items():  # CAS over every document the agent read
                if target in changed:
                    continue  # verify_before holds it to the same snapshot hash
                if current_hash(paths, target) != doc.hash:
                    raise CmError("STALE_REVISION", f"{target} changed since the Memory Agent read it "
                                  "(probably a hand edit); nothing was published and the job will be retried")
            if transaction is not None:
                transaction.verify_before()
                transaction.mark()
                transaction.publish()
            apply_receipt(conn, receipt, now())
    except BaseException:
        if transaction is not None:
            transaction.abandon()  # only an unmarked one is deleted; a marked one is recovery's
        raise
    # Outside the locks: the commit is complete, and a recovery that meets the directory meanwhile
    # finds every file at its after-hash and the receipt row present, so it only cleans up too.
    if transaction is not None:
        transaction.cleanup()
