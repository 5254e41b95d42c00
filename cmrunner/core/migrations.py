"""Forward-only, named schema migrations of ``runtime.sqlite``.

Contract:
- ``MIGRATIONS`` is an ordered list of named functions; each runs with its bookkeeping row in
  the same ``BEGIN IMMEDIATE`` transaction, so a crash leaves the schema wholly before or after.
- ``schema_migrations(name, applied_at)`` records what ran; ``PRAGMA user_version`` mirrors the
  count so a hook can tell "current" with one pragma read.
- An existing database that needs migrating is first copied with ``VACUUM INTO`` to
  ``runtime/upgrade-backups/v<from>-to-v<to>-<random>/runtime.sqlite`` (fsynced). The copy is
  consistent: if another connection committed between the copy and the migration transaction
  (``PRAGMA data_version`` moved), the copy is taken again.
- A database whose ``user_version`` is newer than this code refuses with
  ``UNSUPPORTED_RUNTIME_VERSION``. Names are never renumbered or reused.
Stdlib only (the first hook on a fresh data root creates the schema).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable

from cmrunner.core import fsutil
from cmrunner.core.db import immediate
from cmrunner.core.errors import StoreError
from cmrunner.core.home import DataPaths

Migration = Callable[[sqlite3.Connection], None]


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run several statements inside the caller's transaction.

    ``executescript`` would COMMIT the open transaction first, breaking the all-or-nothing
    migration, so statements are split with ``sqlite3.complete_statement`` and run one by one.
    """
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            conn.execute(pending)
            pending = ""
    if pending.strip():
        raise StoreError("MIGRATION_INVALID", "a migration script ended mid-statement; this is a cm bug")


def m001_write_path(conn: sqlite3.Connection) -> None:
    """Every table the write path needs: admission, sessions, the Codex inbox, jobs, commits."""
    _run_script(
        conn,
        """
        -- Admission: every input becomes one observation with an idempotent identity.
        CREATE TABLE observations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            namespace TEXT NOT NULL,          -- session key or channel namespace
            entry_id TEXT NOT NULL,           -- identity inside the namespace
            text TEXT,                        -- the only persistent body; NULL once pruned or forgotten
            digest TEXT NOT NULL,             -- sha256 of the admitted material
            content_digest TEXT,              -- sha256 of the decoded text (forget tombstones)
            scope TEXT NOT NULL,              -- 'global' or 'project:<id>', frozen at capture
            source TEXT NOT NULL,             -- channel-level source name
            provenance TEXT,                  -- class derived from source; NULL = not authorisable
            task_kind TEXT NOT NULL DEFAULT 'observation',
            state TEXT NOT NULL,              -- buffered|pending|claimed|processed|quarantined|dead|paused (|cancelled, m009)
            observed_at TEXT NOT NULL,
            enqueued_at INTEGER NOT NULL,     -- ms since epoch
            processed_at INTEGER,
            job_id TEXT,
            batch_id TEXT,
            issue TEXT,
            UNIQUE (namespace, entry_id)
        );
        CREATE INDEX observations_state_id ON observations(state, id);
        CREATE INDEX observations_job_id ON observations(job_id, id) WHERE job_id IS NOT NULL;

        -- Jobs carry the fenced lease: a write must match id, token and generation.
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            token TEXT NOT NULL,
            generation INTEGER NOT NULL,
            state TEXT NOT NULL,              -- running|retry|done|dead|paused|quarantined (|cancelled, m009)
            scope TEXT NOT NULL,
            provenance TEXT NOT NULL,
            task_kind TEXT NOT NULL DEFAULT 'observation',
            expires INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,
            retries INTEGER NOT NULL DEFAULT 0,
            available INTEGER NOT NULL DEFAULT 0,
            issue TEXT,
            diagnostic TEXT,
            edit_result TEXT,
            model_turns INTEGER NOT NULL DEFAULT 0,
            tool_calls INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        );
        CREATE INDEX jobs_active ON jobs(state) WHERE state IN ('running', 'retry');

        -- Commit bookkeeping: receipts hold ids and hashes only.
        CREATE TABLE receipts (id TEXT PRIMARY KEY, job_id TEXT NOT NULL, committed_at INTEGER NOT NULL);
        CREATE TABLE document_versions (target TEXT PRIMARY KEY, hash TEXT NOT NULL);
        CREATE TABLE associations (
            target TEXT NOT NULL, section_key TEXT NOT NULL, source_id INTEGER NOT NULL,
            PRIMARY KEY (target, section_key, source_id)
        );
        CREATE TABLE forgotten_sources (scope TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (scope, digest));
        CREATE TABLE correction_watermarks (target TEXT PRIMARY KEY, at INTEGER NOT NULL, source_id INTEGER);
        CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);

        -- Session cache (Codex, ChatGPT Work, Pi).
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY, client TEXT NOT NULL, host_instance TEXT NOT NULL, thread TEXT NOT NULL,
            closing INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL
        );
        CREATE TABLE session_turns (
            id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, turn_id TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'open', batch_id TEXT, settled_at INTEGER,
            UNIQUE (session_id, turn_id)
        );
        CREATE INDEX session_turns_batch ON session_turns(batch_id, id);
        CREATE TABLE session_batches (
            id TEXT PRIMARY KEY, session_id TEXT NOT NULL, sealed_at INTEGER NOT NULL, reason TEXT NOT NULL
        );
        CREATE TABLE session_messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, message_id TEXT NOT NULL,
            turn INTEGER NOT NULL, role TEXT NOT NULL, digest TEXT NOT NULL, scope TEXT NOT NULL,
            source TEXT NOT NULL, observed_at TEXT NOT NULL, observation_id INTEGER, text TEXT,
            unavailable TEXT, sequence INTEGER NOT NULL DEFAULT 0,
            UNIQUE (session_id, message_id)
        );
        CREATE INDEX session_messages_turn ON session_messages(turn, id);
        CREATE INDEX session_messages_observation ON session_messages(observation_id);

        -- Host activations and frozen injection snapshots.
        CREATE TABLE host_activations (
            base TEXT PRIMARY KEY,            -- client + host instance + thread
            session_id TEXT NOT NULL,         -- the active session key
            client TEXT NOT NULL, host_instance TEXT NOT NULL, thread TEXT NOT NULL, cwd TEXT NOT NULL,
            active INTEGER NOT NULL DEFAULT 1, started_at INTEGER NOT NULL
        );
        CREATE TABLE host_snapshots (
            session_id TEXT PRIMARY KEY, body TEXT NOT NULL, pending INTEGER NOT NULL DEFAULT 0,
            authorization TEXT NOT NULL DEFAULT '[]', created_at INTEGER NOT NULL
        );

        -- The Codex / ChatGPT Work durable inbox and its companions.
        CREATE TABLE codex_cursors (
            session_id TEXT PRIMARY KEY, path TEXT NOT NULL, device INTEGER NOT NULL, inode INTEGER NOT NULL,
            offset INTEGER NOT NULL, tail_digest TEXT NOT NULL, turn_id TEXT
        );
        CREATE TABLE codex_inbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, event TEXT NOT NULL,
            turn_id TEXT, start INTEGER NOT NULL, "end" INTEGER NOT NULL, body BLOB NOT NULL,
            envelope TEXT NOT NULL, scope TEXT NOT NULL, received_at INTEGER NOT NULL
        );
        CREATE INDEX codex_inbox_session ON codex_inbox(session_id, id);
        CREATE TABLE codex_candidates (
            session_id TEXT NOT NULL, turn_id TEXT NOT NULL, digest TEXT NOT NULL, text TEXT,
            scope TEXT NOT NULL, created_at INTEGER NOT NULL,
            PRIMARY KEY (session_id, turn_id, digest)
        );
        CREATE TABLE codex_watches (
            session_id TEXT NOT NULL, turn_id TEXT NOT NULL, created_at INTEGER NOT NULL,
            PRIMARY KEY (session_id, turn_id)
        );
        CREATE TABLE codex_failures (
            session_id TEXT PRIMARY KEY, inbox_id INTEGER, recovery_id TEXT NOT NULL UNIQUE,
            issue TEXT NOT NULL, failed_at INTEGER NOT NULL, retry_requested INTEGER NOT NULL DEFAULT 0
        );

        -- Pi capture inbox: one row per bridge event, idempotent on (session, event id).
        CREATE TABLE pi_inbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, event_id TEXT NOT NULL,
            event TEXT NOT NULL, digest TEXT NOT NULL, body TEXT NOT NULL, scope TEXT NOT NULL,
            received_at INTEGER NOT NULL,
            UNIQUE (session_id, event_id)
        );

        -- Exactly-once hook admission: the digest of every admitted host event.
        CREATE TABLE admitted_events (
            session_id TEXT NOT NULL, digest TEXT NOT NULL, received_at INTEGER NOT NULL,
            PRIMARY KEY (session_id, digest)
        );

        -- The single drain lease of this data root: holder identity (boot id, pid, start ticks).
        CREATE TABLE drain_lease (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            boot_id TEXT NOT NULL, pid INTEGER NOT NULL, starttime INTEGER NOT NULL,
            state TEXT NOT NULL,              -- 'spawned' (reserved by its spawner) | 'held'
            acquired_at INTEGER NOT NULL
        );
        """
    )


def m002_claim_and_prune_indexes(conn: sqlite3.Connection) -> None:
    """Claiming a sealed batch and pruning old bodies must not scan the whole queue."""
    _run_script(
        conn,
        """
        CREATE INDEX observations_batch ON observations(batch_id, state, id) WHERE batch_id IS NOT NULL;
        CREATE INDEX observations_prunable ON observations(processed_at) WHERE state = 'processed' AND text IS NOT NULL;
        """,
    )


def m003_codex_progress(conn: sqlite3.Connection) -> None:
    """Where the inbox consumer stands in each Codex transcript, apart from the hook's cursor."""
    _run_script(
        conn,
        """
        CREATE TABLE codex_progress (
            session_id TEXT PRIMARY KEY, offset INTEGER NOT NULL, open_turn TEXT
        );
        ALTER TABLE session_turns ADD COLUMN has_user INTEGER NOT NULL DEFAULT 0;
        """,
    )


def m004_pi_inputs(conn: sqlite3.Connection) -> None:
    """Pi input origins staged until Pi reports the delivered user message."""
    _run_script(
        conn,
        """
        CREATE TABLE pi_inputs (
            id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, digest TEXT NOT NULL,
            source TEXT NOT NULL, has_images INTEGER NOT NULL, used INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX pi_inputs_session ON pi_inputs(session_id, used, id);
        """,
    )


def m005_drain_failures(conn: sqlite3.Connection) -> None:
    """Why a drain or flush stopped unexpectedly, so ``cm status`` can say so (owner: ``drainfailures``)."""
    _run_script(
        conn,
        """
        CREATE TABLE drain_failures (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at INTEGER NOT NULL,              -- ms since epoch
            process TEXT NOT NULL,            -- 'drain' | 'flush'
            code TEXT NOT NULL,               -- the CmError code, or DRAIN_CRASHED
            exception TEXT NOT NULL,          -- the exception's class name
            message TEXT,                     -- a CmError's message only (never another exception's)
            frames TEXT NOT NULL,             -- JSON list of "file:line:function", innermost last
            job_id TEXT,                      -- the job the process held, given back to retry
            resolved_at INTEGER               -- when a later drain finished cleanly
        );
        """,
    )


def m006_section_history(conn: sqlite3.Connection) -> None:
    """Section versions and the trash (owner: ``core.history``), and the agent instance of each
    observation (owner: ``capture.observations``); a purge's tombstones are ``forgotten_sources``
    rows, as a forget leaves them.

    The bytes live here only, never in the Markdown or the receipts: a purge can destroy them."""
    _run_script(
        conn,
        """
        CREATE TABLE section_versions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            target TEXT NOT NULL,             -- profile | preferences | project:<id>
            section_key TEXT NOT NULL,        -- <target>:<sha256(title)>
            version INTEGER NOT NULL,         -- 1, 2, ... per section_key
            parent_id INTEGER,                -- the version this one replaced (NULL for the first)
            title TEXT NOT NULL,
            text TEXT,                        -- the section's exact text after it (heading line included); NULL: removed
            kind TEXT NOT NULL,               -- baseline | put | replace | remove | hand_edit | undo | restore
            author TEXT NOT NULL,             -- memory_agent | user
            decision TEXT,                    -- the Memory Agent's decision kind (retain, forget, ...)
            receipt_id TEXT,                  -- the commit that made it (NULL for baseline/hand_edit)
            client TEXT, session_id TEXT, model TEXT,
            at INTEGER NOT NULL,              -- ms since epoch
            purged_at INTEGER,                -- body destroyed by a purge
            UNIQUE (section_key, version)
        );
        CREATE INDEX section_versions_target ON section_versions(target);  -- per key: the UNIQUE index
        CREATE INDEX section_versions_receipt ON section_versions(receipt_id);
        -- What a commit will add to history, written before it publishes and moved into
        -- section_versions by the commit's own transaction (or its crash replay).
        CREATE TABLE section_changes_pending (
            job_id TEXT NOT NULL, seq INTEGER NOT NULL,
            target TEXT NOT NULL, section_key TEXT NOT NULL, title TEXT NOT NULL, text TEXT,
            kind TEXT NOT NULL, author TEXT NOT NULL, decision TEXT,
            client TEXT, session_id TEXT, model TEXT, at INTEGER NOT NULL,
            PRIMARY KEY (job_id, seq)
        );
        -- Which client integration captured each observation: "<agent>:<install id>", stable and
        -- non-secret (the install id is random, made once per data root).
        ALTER TABLE observations ADD COLUMN agent_instance TEXT;
        INSERT OR IGNORE INTO settings(key, value) VALUES ('install_id', lower(hex(randomblob(6))));
        CREATE TABLE trash (
            id TEXT PRIMARY KEY,              -- short random id shown by `cm trash`
            version_id INTEGER NOT NULL,      -- the removing version; its parent holds the bytes
            target TEXT NOT NULL, section_key TEXT NOT NULL,
            removed_at INTEGER NOT NULL,      -- purged once history.trashRetentionDays have passed
            state TEXT NOT NULL DEFAULT 'trashed'  -- trashed | restored | purged
        );
        CREATE INDEX trash_expiry ON trash(state, removed_at);
        """,
    )


def m007_disclosure_ledger(conn: sqlite3.Connection) -> None:
    """One row per model request the Memory Agent or ``cm network-test`` made, whatever its outcome
    (owner: ``core.ledger``). Counts, names and codes only: never a request or response body."""
    _run_script(
        conn,
        """
        CREATE TABLE ledger (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at INTEGER NOT NULL,              -- ms since epoch, when the request was sent
            process TEXT NOT NULL,            -- memory_agent | network_test
            job_id TEXT, attempt INTEGER, turn INTEGER,
            host TEXT NOT NULL,               -- the provider's host name (never a path, query or credential)
            model TEXT NOT NULL, api TEXT NOT NULL,
            scopes TEXT NOT NULL,             -- the grant: scopes whose text the request could carry, comma-separated
            provenance TEXT NOT NULL,         -- the grant: provenance classes of the sources, comma-separated
            request_bytes INTEGER NOT NULL, response_bytes INTEGER NOT NULL,
            input_tokens INTEGER NOT NULL, cached_tokens INTEGER, output_tokens INTEGER NOT NULL,
            reasoning_tokens INTEGER,
            token_source TEXT NOT NULL,       -- provider | an estimator's name | none (nothing was billed)
            duration_ms INTEGER NOT NULL,
            outcome TEXT NOT NULL             -- ok, or the failure's code
        );
        CREATE INDEX ledger_at ON ledger(at);
        """,
    )


def m008_agent_hooks(conn: sqlite3.Connection) -> None:
    """Claude Code and Gemini CLI hook events waiting for the drain (owner: ``capture.hook_inbox``), and
    the hook events cm refused or ignored, counted per host and code for ``cm status`` (owner:
    ``capture.hook_rejections``). A rejection holds a code and a count, never event text."""
    _run_script(
        conn,
        """
        CREATE TABLE hook_inbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            event TEXT NOT NULL,              -- prompt | stop | end
            body TEXT NOT NULL,               -- canonical JSON: text, command flag, turn key, observed time
            scope TEXT NOT NULL,              -- frozen from the payload's cwd at admission
            received_at INTEGER NOT NULL
        );
        CREATE INDEX hook_inbox_session ON hook_inbox(session_id, id);
        CREATE TABLE hook_rejections (
            host TEXT NOT NULL,               -- claude-code | gemini
            code TEXT NOT NULL,               -- a stable UPPER_SNAKE code
            message TEXT NOT NULL,            -- cm's own one-line message (never payload text)
            count INTEGER NOT NULL,
            first_at INTEGER NOT NULL, last_at INTEGER NOT NULL,
            PRIMARY KEY (host, code)
        );
        """,
    )


def m009_cancellations(conn: sqlite3.Connection) -> None:
    """What ``cm cancel`` dropped (owner: ``capture.observations``): ids and counts, never text."""
    _run_script(
        conn,
        """
        CREATE TABLE cancellations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at INTEGER NOT NULL,              -- ms since epoch
            target TEXT NOT NULL,             -- what the user named: a job id, an observation id or an import id
            job_ids TEXT NOT NULL,            -- the jobs cancelled, comma-separated (may be empty)
            observation_ids TEXT NOT NULL,    -- the observations cancelled, comma-separated
            observations INTEGER NOT NULL,
            text_bytes INTEGER NOT NULL       -- how much text was deleted
        );
        """,
    )


def m010_job_cause(conn: sqlite3.Connection) -> None:
    """The real cause travels with the job (owner: ``core.jobstore``): the code its last failed
    attempt ended with, the last tool rejection the model received in that attempt (code, rule,
    document, section, fingerprint: never text), and how many attempts failed on the model's own
    decisions (they have a smaller budget than a provider's transient failures)."""
    _run_script(
        conn,
        """
        ALTER TABLE jobs ADD COLUMN failure TEXT;
        ALTER TABLE jobs ADD COLUMN rejection TEXT;
        ALTER TABLE jobs ADD COLUMN model_failures INTEGER NOT NULL DEFAULT 0;
        """,
    )


def m011_isolation_detail(conn: sqlite3.Connection) -> None:
    """Where an isolated session's unexpected failure surfaced (owner: ``capture.failures``):
    the exception's class and ``file:line:function``, never its message."""
    _run_script(conn, "ALTER TABLE codex_failures ADD COLUMN detail TEXT;")


def m012_waiting_by_scope(conn: sqlite3.Connection) -> None:
    """The freshness line of every injection counts one scope's turns still waiting
    (``capture.observations.waiting``) from this small partial index, never from the whole queue."""
    _run_script(conn, """
        CREATE INDEX observations_waiting_scope ON observations(scope, state, source)
            WHERE state IN ('buffered', 'pending', 'claimed');
    """)


def m013_waiting_turns(conn: sqlite3.Connection) -> None:
    """The freshness line also counts the user turns still queued in the inboxes, each from a
    small partial index by scope (``capture.waiting``): a Codex prompt until its delivery is read
    (``codex_candidates.text`` is kept until then), and a Pi user delivery or a Claude Code /
    Gemini CLI typed prompt until the drain consumes its row. Which inbox rows are user turns is
    known when they are admitted, so a flag column says so (no JSON is parsed to count, and the
    inboxes' indexes cover their count); rows queued before this migration are flagged from their
    bodies once, here (a body that is not valid JSON, which the drain will set aside anyway, is
    left unflagged rather than failing the upgrade). A prompt whose turn already ended, or whose
    session did, without its delivery (another hook blocked it) can never be delivered: its text is
    cleared as the consumer now does (``capture.codex_consumer``), so it does not read as waiting
    forever. The candidates' index leaves out ``text`` (a prompt's words do not belong
    in an index), so their count reads one row per prompt still waiting."""
    _run_script(conn, """
        CREATE INDEX codex_candidates_waiting_scope ON codex_candidates(scope) WHERE text IS NOT NULL;
        UPDATE codex_candidates SET text = NULL WHERE text IS NOT NULL AND (
            EXISTS (SELECT 1 FROM sessions s WHERE s.id = codex_candidates.session_id AND s.closing = 1)
            OR EXISTS (SELECT 1 FROM session_turns t WHERE t.session_id = codex_candidates.session_id
                       AND t.turn_id = codex_candidates.turn_id AND t.state != 'open'));
        ALTER TABLE pi_inbox ADD COLUMN user_turn INTEGER NOT NULL DEFAULT 0;
        UPDATE pi_inbox SET user_turn = 1 WHERE event = 'message_end' AND CASE WHEN json_valid(body)
            THEN json_extract(body, '$.payload.role') = 'user' AND trim(json_extract(body, '$.payload.text')) != ''
            ELSE 0 END;
        CREATE INDEX pi_inbox_waiting_scope ON pi_inbox(scope, user_turn) WHERE user_turn = 1;
        ALTER TABLE hook_inbox ADD COLUMN user_turn INTEGER NOT NULL DEFAULT 0;
        UPDATE hook_inbox SET user_turn = 1 WHERE event = 'prompt'
            AND CASE WHEN json_valid(body) THEN json_extract(body, '$.text') IS NOT NULL ELSE 0 END;
        CREATE INDEX hook_inbox_waiting_scope ON hook_inbox(scope, user_turn) WHERE user_turn = 1;
    """)


def m014_import_sections(conn: sqlite3.Connection) -> None:
    """What each imported source held, section by section (owner: ``capture.importsections``): a
    changed file sends only its new or edited sections. One row per (scope, source, section digest);
    ``current`` marks the sections of the source's last import, ``generation`` counts its imports."""
    _run_script(conn, """
        CREATE TABLE import_sections (
            scope TEXT NOT NULL,
            source TEXT NOT NULL,             -- the source's stable key: its label, or the file's path
            digest TEXT NOT NULL,             -- sha256 of the section's text (trimmed)
            heading TEXT NOT NULL,            -- JSON heading path, the section's own heading last
            generation INTEGER NOT NULL,      -- the source's import that last held this section
            carrier TEXT NOT NULL,            -- the import namespace whose parts last sent its text
            current INTEGER NOT NULL,         -- 1: in the file at the source's last import
            recorded_at INTEGER NOT NULL,     -- ms since epoch
            PRIMARY KEY (scope, source, digest)
        );
    """)


MIGRATIONS: list[Migration] = [m001_write_path, m002_claim_and_prune_indexes, m003_codex_progress, m004_pi_inputs,
                               m005_drain_failures, m006_section_history, m007_disclosure_ledger, m008_agent_hooks,
                               m009_cancellations, m010_job_cause, m011_isolation_detail,
                               m012_waiting_by_scope, m013_waiting_turns, m014_import_sections]
LATEST = len(MIGRATIONS)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _refuse_newer(version: int) -> None:
    if version > LATEST:
        raise StoreError(
            "UNSUPPORTED_RUNTIME_VERSION",
            f"runtime.sqlite has schema version {version}, newer than this cm knows ({LATEST}); "
            "upgrade cm or stop the newer version's processes",
        )


def check_readable(conn: sqlite3.Connection) -> int:
    """The schema version of an opened store; refuses one newer than this code."""
    version = _version(conn)
    _refuse_newer(version)
    return version


def _backup(conn: sqlite3.Connection, paths: DataPaths, version: int) -> str:
    fsutil.ensure_private_dir(paths.backups, "backup directory")
    folder = os.path.join(paths.backups, f"v{version}-to-v{LATEST}-{os.urandom(6).hex()}")
    os.mkdir(folder, 0o700)
    target = os.path.join(folder, "runtime.sqlite")
    conn.execute("VACUUM INTO ?", (target,))
    fd = os.open(target, os.O_RDONLY)
    try:
        fsutil.fsync_fd(fd)
    finally:
        os.close(fd)
    fsutil.fsync_dir(folder)
    fsutil.fsync_dir(paths.backups)
    return folder


def migrate(conn: sqlite3.Connection, paths: DataPaths, busy_ms: int) -> int:
    """Bring ``conn`` to ``LATEST``; returns the version found before migrating."""
    found = _version(conn)
    if found == LATEST:
        return found
    _refuse_newer(found)
    for _ in range(5):
        marker = None
        if found > 0:
            marker = conn.execute("PRAGMA data_version").fetchone()[0]
            _backup(conn, paths, found)
        with immediate(conn, busy_ms):
            current = _version(conn)
            if current != found or (marker is not None and conn.execute("PRAGMA data_version").fetchone()[0] != marker):
                found = current  # another process moved first: re-evaluate (maybe nothing to do)
                if current == LATEST:
                    return current
                _refuse_newer(current)
                continue
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)"
            )
            applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
            for migration in MIGRATIONS:
                if migration.__name__ in applied:
                    continue
                migration(conn)
                conn.execute(
                    "INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)",
                    (migration.__name__, _now_ms()),
                )
            conn.execute(f"PRAGMA user_version={LATEST}")
            return found
    raise StoreError("STORE_BUSY", "the runtime database kept changing during an upgrade; stop other cm processes and retry")
