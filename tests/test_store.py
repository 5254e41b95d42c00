"""runtime.sqlite: durability pragmas, named forward-only migrations, backups, version refusal."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest
from conftest import run_cm, run_hook

from cmrunner.core import migrations, store
from cmrunner.core.errors import StoreError
from cmrunner.core.home import DataPaths


@pytest.fixture
def paths(home) -> DataPaths:
    return DataPaths(os.path.join(home, "data"))


def test_fresh_store_is_wal_full_and_private(paths):
    conn = store.open_store(paths)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations.LATEST
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations")]
        assert names == [m.__name__ for m in migrations.MIGRATIONS]
    finally:
        conn.close()
    assert stat.S_IMODE(os.stat(paths.db).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(paths.root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(paths.runtime).st_mode) == 0o700


def test_write_path_tables_exist(paths):
    conn = store.open_store(paths)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    for table in ("observations", "jobs", "sessions", "session_turns", "session_batches", "session_messages",
                  "codex_inbox", "codex_candidates", "codex_cursors", "codex_watches", "codex_failures",
                  "drain_lease", "receipts", "pi_inbox", "host_activations", "host_snapshots"):
        assert table in tables


def test_reopening_a_current_store_changes_nothing(paths):
    store.open_store(paths).close()
    store.open_store(paths).close()
    assert not os.path.exists(paths.backups)


def test_newer_schema_is_refused(paths):
    conn = store.open_store(paths)
    conn.execute(f"PRAGMA user_version={migrations.LATEST + 1}")
    conn.close()
    with pytest.raises(StoreError) as caught:
        store.open_store(paths)
    assert caught.value.code == "UNSUPPORTED_RUNTIME_VERSION"
    assert "upgrade cm" in caught.value.message


@pytest.mark.parametrize("stop", range(1, len(migrations.MIGRATIONS)))
def test_every_historical_schema_migrates_to_latest(paths, monkeypatch, stop):
    """A store left at any earlier version reaches the same schema as a fresh one, after a backup."""
    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:stop])
        m.setattr(migrations, "LATEST", stop)
        store.open_store(paths).close()
    conn = store.open_store(paths)
    migrated = sorted(conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
    conn.close()
    fresh = DataPaths(paths.root + "-fresh")
    conn = store.open_store(fresh)
    expected = sorted(conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))
    conn.close()
    assert migrated == expected
    assert os.listdir(paths.backups)[0].startswith(f"v{stop}-to-v{migrations.LATEST}-")


def _m_next_add_column(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE jobs ADD COLUMN note TEXT")


def test_migrating_an_existing_store_backs_it_up_first(paths, monkeypatch):
    conn = store.open_store(paths)
    conn.execute("INSERT INTO settings VALUES ('marker', 'before-upgrade')")
    conn.close()
    before = migrations.LATEST
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, _m_next_add_column])
    monkeypatch.setattr(migrations, "LATEST", len(migrations.MIGRATIONS))
    conn = store.open_store(paths)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == before + 1
        assert "note" in [r[1] for r in conn.execute("PRAGMA table_info(jobs)")]
    finally:
        conn.close()
    (backup,) = os.listdir(paths.backups)
    assert backup.startswith(f"v{before}-to-v{before + 1}-")
    old = sqlite3.connect(os.path.join(paths.backups, backup, "runtime.sqlite"))
    try:
        assert old.execute("PRAGMA user_version").fetchone()[0] == before
        assert old.execute("SELECT value FROM settings WHERE key = 'marker'").fetchall() == [("before-upgrade",)]
        assert old.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        old.close()


def _m_next_fails(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE half_done (x)")
    raise RuntimeError("simulated crash inside a migration")


def test_failed_migration_rolls_back_completely(paths, monkeypatch):
    store.open_store(paths).close()
    before = migrations.LATEST
    names = [m.__name__ for m in migrations.MIGRATIONS]
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, _m_next_fails])
    monkeypatch.setattr(migrations, "LATEST", len(migrations.MIGRATIONS))
    with pytest.raises(RuntimeError):
        store.open_store(paths)
    conn = sqlite3.connect(paths.db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == before
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchall() == []
        assert [r[0] for r in conn.execute("SELECT name FROM schema_migrations")] == names
    finally:
        conn.close()


def test_immediate_rolls_back_on_error(paths):
    conn = store.open_store(paths)
    with pytest.raises(ValueError):
        with store.immediate(conn):
            conn.execute("INSERT INTO settings VALUES ('k', 'v')")
            raise ValueError
    assert conn.execute("SELECT COUNT(*) FROM settings WHERE key = 'k'").fetchone()[0] == 0
    conn.close()


def test_busy_database_becomes_store_busy(paths):
    store.open_store(paths).close()
    holder = sqlite3.connect(paths.db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        conn = store.connect(paths.db, busy_ms=50)
        with pytest.raises(StoreError) as caught:
            with store.immediate(conn, busy_ms=50):
                pass
        assert caught.value.code == "STORE_BUSY"
        conn.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_symlinked_data_root_is_refused(home, tmp_path):
    real = tmp_path / "real-data"
    real.mkdir()
    os.makedirs(home)
    os.symlink(real, os.path.join(home, "data"))
    with pytest.raises(Exception) as caught:
        store.open_store(DataPaths(os.path.join(home, "data")))
    assert getattr(caught.value, "code", None) == "UNSAFE_PATH"


def test_open_existing_never_creates(paths):
    assert store.open_existing(paths) is None
    assert not os.path.exists(paths.root)


def test_document_paths_never_escape_the_memory_directory(paths):
    assert paths.document("project:abc-1_2").endswith("/memory/projects/abc-1_2.md")
    for bad in ("project:../x", "project:", "project:a/b", "project:é", "notes"):
        with pytest.raises(Exception) as caught:
            paths.document(bad)
        assert getattr(caught.value, "code", None) == "INVALID_TARGET_REFERENCE"


def test_write_gate_works_from_a_worker_thread_under_contention(paths):
    """MCP tools run in worker threads, where SIGALRM cannot bound a blocking flock."""
    import threading

    from cmrunner.core import gate

    store.open_store(paths).close()
    results: list[str] = []
    with gate.held(paths.write_gate, 1.0):
        def worker() -> None:
            try:
                with gate.held(paths.write_gate, 0.2):
                    results.append("acquired")
            except StoreError as exc:
                results.append(exc.code)

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert results == ["STORE_BUSY"]

    def free_worker() -> None:
        conn = store.open_store(paths)
        with store.immediate(conn):
            results.append("written")
        conn.close()

    with gate.held(paths.write_gate, 1.0):
        thread = threading.Thread(target=free_worker)
        thread.start()
    thread.join()  # the worker waited for the gate, then wrote
    assert results == ["STORE_BUSY", "written"]


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"], ["flush"], ["secrets", "list"]])
def test_a_damaged_database_is_one_clear_line_never_a_traceback(home, argv):
    assert run_cm(["status"]).returncode == 0
    paths = DataPaths(os.path.join(home, "data"))
    os.makedirs(paths.runtime, mode=0o700, exist_ok=True)
    with open(paths.db, "wb") as handle:
        handle.write(b"this is not a database at all" * 100)
    os.chmod(paths.db, 0o600)
    proc = run_cm(argv)
    err = proc.stderr.decode()
    assert b"Traceback" not in proc.stdout + proc.stderr
    assert "STORE_DAMAGED" in err + proc.stdout.decode(), (proc.stdout, err)
    assert open(paths.db, "rb").read().startswith(b"this is not a database"), "nothing was overwritten"


def test_a_hook_facing_a_damaged_database_fails_with_the_code(home):
    paths = DataPaths(os.path.join(home, "data"))
    os.makedirs(paths.runtime, mode=0o700, exist_ok=True)
    with open(paths.db, "wb") as handle:
        handle.write(b"\x00garbage" * 512)
    proc = run_hook(home, {"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup",
                           "transcript_path": None, "cwd": home, "model": "m"})
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: STORE_DAMAGED: "), proc.stderr
