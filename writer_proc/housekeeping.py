"""What every drain does first, whether or not a Memory Agent can run: finish interrupted commits,
then apply the retention rules.

Contract:
- ``at_drain_start(paths, conn, cfg, now)`` runs in the process that holds the drain lease (the
  drain, ``cm flush``), before any consumer: if a commit left anything in ``runtime/transactions``
  (``recovery_due``), ``commit.recover`` under the repository lock (marked transactions published
  forward and their receipts replayed, unmarked ones discarded; no model call); then, in one
  transaction, the retention rules: the bodies of observations processed or finally quarantined
  more than ``observations.PRUNE_AFTER_MS`` ago are dropped, trash entries older than
  ``history.trashRetentionDays`` purged (``history.expire_trash``) and disclosure ledger rows
  older than ``ledger.RETENTION_MS`` removed. Returns the number of replayed commits.
- Recovery comes first on purpose: a replayed commit may settle history rows of a section whose
  trash entry has expired (an interrupted restore); expiring first would delete them, and history
  would no longer match the documents.
- None of this needs a model, so a drain without one (only capturing, or a model removed later)
  still forgets on schedule: retention never waits for configuration. Such a drain runs after
  every host event, so the usual case stays cheap: no lock and no commit machinery is loaded
  unless a transaction directory exists, and updates that match nothing write nothing.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable

from cmrunner.capture import observations
from cmrunner.core import config as config_mod, history, ledger, store
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import drainlog

log = drainlog.get("housekeeping")


def recovery_due(paths: DataPaths) -> bool:
    """Whether a commit left a transaction directory: the only case ``commit.recover`` has work."""
    return os.path.isdir(paths.transactions) and bool(os.listdir(paths.transactions))


def finish_interrupted(paths: DataPaths, conn: sqlite3.Connection, now: Callable[[], int]) -> int:
    """``commit.recover`` under the repository lock when ``recovery_due`` (at drain start and
    before every Writer attempt); returns the number of replayed commits."""
    if not recovery_due(paths):
        return 0
    from cmrunner.writer_proc import commit  # only then: a capture-only drain stays light

    with commit.repository_lock(paths):
        replayed = commit.recover(paths, conn, now)
    if replayed:
        log.info("recovered %d interrupted commit(s)", replayed)
    return replayed


def at_drain_start(paths: DataPaths, conn: sqlite3.Connection, cfg: config_mod.Config, now: Callable[[], int]) -> int:
    replayed = finish_interrupted(paths, conn, now)
    with store.immediate(conn):
        at = now()
        observations.prune_processed(conn, at - observations.PRUNE_AFTER_MS)
        observations.prune_quarantined(conn, at - observations.PRUNE_AFTER_MS)  # the same retention
        expired = history.expire_trash(conn, at, cfg.trash_retention_ms)
        ledger.prune(conn, at - ledger.RETENTION_MS)
    if expired:
        log.info("purged %d trash entr%s past retention", expired, "y" if expired == 1 else "ies")
    return replayed
