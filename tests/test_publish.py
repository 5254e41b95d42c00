"""The staged commit and its recovery (``cmrunner.writer_proc.publish``), including real SIGKILLs."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import stat
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import OVERLAY
from support import seams

from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.core.sections import MISSING_HASH
from cmrunner.writer_proc import publish
from cmrunner.writer_proc.publish import FileChange, recover, stage
from cmrunner.writer_proc.receipts import assert_receipt_safe, canonical_json

JOB = "job-0001"
BEFORE = {
    "profile": b"# Profile\n\n## Role\nold role\n",
    "preferences": b"# Preferences\n\n## Style\nterse\n",
}
AFTER = {
    "profile": b"# Profile\n\n## Role\nnew role\n",
    "preferences": b"# Preferences\n\n## Style\nterse\n\n## Tests\npytest\n",
    "project:alpha": b"# Project\n\n## Goal\nship it\n",
}
REL = {"profile": "memory/profile.md", "preferences": "memory/preferences.md",
       "project:alpha": "memory/projects/alpha.md"}


def sha(data: bytes | None) -> str:
    return MISSING_HASH if data is None else hashlib.sha256(data).hexdigest()


def receipt_for(job: str = JOB) -> dict:
    return {
        "id": job, "jobId": job, "version": 2, "decisions": ["retain", "ignore"],
        "observationIds": [1, 2, 3], "promptDigest": "0" * 64, "timestamp": "2025-01-01T00:00:00Z",
        "documents": [{"target": t, "before": sha(BEFORE.get(t)), "after": sha(a)} for t, a in AFTER.items()],
        "associations": [{"target": "project:" + "a" * 128 + ":" + "f" * 64, "sourceIds": [1]}],
    }


def changes() -> list[FileChange]:
    return [FileChange(t, sha(BEFORE.get(t)), a) for t, a in AFTER.items()]


@pytest.fixture
def paths(tmp_path: Path) -> DataPaths:
    root = os.path.realpath(tmp_path / "data")
    os.makedirs(os.path.join(root, "memory"), mode=0o700)
    for target, data in BEFORE.items():
        path = os.path.join(root, REL[target])
        with open(path, "wb") as handle:
            handle.write(data)
        os.chmod(path, 0o600)
    return DataPaths(root)


def live(paths: DataPaths, rel: str) -> bytes | None:
    try:
        with open(os.path.join(paths.root, rel), "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def receipt_rel(job: str = JOB) -> str:
    return f"runtime/receipts/{job}.json"


def files_under(root: str) -> set[str]:
    found = set()
    for base, _dirs, names in os.walk(root):
        for name in names:
            found.add(os.path.relpath(os.path.join(base, name), root))
    return found


def tree(root: str) -> dict[str, tuple]:
    """Every entry under ``root`` with its kind, mode and content: proof that nothing was touched."""
    result: dict[str, tuple] = {}
    for base, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(base, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                result[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                result[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                with open(path, "rb") as handle:
                    result[rel] = ("file", stat.S_IMODE(st.st_mode), st.st_ino, handle.read())
    return result


def assert_all_before(paths: DataPaths) -> None:
    for target in AFTER:
        assert live(paths, REL[target]) == BEFORE.get(target), target
    assert live(paths, receipt_rel()) is None


def assert_all_after(paths: DataPaths, job: str = JOB) -> None:
    for target, data in AFTER.items():
        assert live(paths, REL[target]) == data, target
    assert live(paths, receipt_rel(job)) == canonical_json(receipt_for(job))


def assert_files_at(paths: DataPaths, expected: dict[str, bytes]) -> None:
    for target in AFTER:
        assert live(paths, REL[target]) == expected.get(target), target


def marked(paths: DataPaths) -> publish.Transaction:
    tx = stage(paths, JOB, changes(), receipt_for())
    tx.verify_before()
    tx.mark()
    return tx


# --- the happy path -------------------------------------------------------------------------------


def test_commit_publishes_every_file_and_the_receipt_privately_and_leaves_nothing(paths: DataPaths) -> None:
    tx = marked(paths)
    tx.publish()
    tx.cleanup()
    assert_all_after(paths)
    for rel in [*REL.values(), receipt_rel()]:
        assert stat.S_IMODE(os.stat(os.path.join(paths.root, rel)).st_mode) == 0o600, rel
    for directory in (paths.projects_dir, paths.receipts, paths.transactions):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory
    receipt_bytes = live(paths, receipt_rel())
    assert receipt_bytes is not None and receipt_bytes.count(b"\n") == 1 and receipt_bytes.endswith(b"\n")
    assert json.loads(receipt_bytes) == receipt_for()
    assert os.listdir(paths.transactions) == []
    assert files_under(paths.root) == {*REL.values(), receipt_rel()}


def test_stage_writes_private_stage_files_and_a_strict_journal_without_touching_live_files(
        paths: DataPaths) -> None:
    tx = stage(paths, JOB, changes(), receipt_for())
    assert os.path.dirname(tx.directory) == paths.transactions
    assert stat.S_IMODE(os.stat(tx.directory).st_mode) == 0o700
    copies = [f"publish-{n}" for n in range(4)]
    assert sorted(os.listdir(tx.directory)) == ["READY", "journal.json", *copies, "stage-0", "stage-1", "stage-2",
                                                 "stage-3"]
    for n, data in enumerate([*AFTER.values(), canonical_json(receipt_for())]):
        for name in (f"stage-{n}", f"publish-{n}"):
            with open(os.path.join(tx.directory, name), "rb") as handle:
                assert handle.read() == data, name
    with open(os.path.join(tx.directory, "READY"), "rb") as handle:
        assert handle.read() == b"v1\n"
    # The live directories exist before the lock, so that publishing is renames only.
    assert os.path.isdir(paths.projects_dir) and os.path.isdir(paths.receipts)
    with open(os.path.join(tx.directory, "journal.json"), "rb") as handle:
        journal = json.loads(handle.read())
    expected = [{"path": REL[t], "stage": f"stage-{n}", "before": sha(BEFORE.get(t)), "after": sha(a)}
                for n, (t, a) in enumerate(AFTER.items())]
    expected.append({"path": receipt_rel(), "stage": "stage-3", "before": MISSING_HASH,
                     "after": sha(canonical_json(receipt_for()))})
    assert journal == {"version": 1, "id": JOB, "files": expected}
    for name in os.listdir(tx.directory):
        assert stat.S_IMODE(os.stat(os.path.join(tx.directory, name)).st_mode) == 0o600
    assert_all_before(paths)


def test_inside_the_lock_only_renames_and_one_fsync_per_directory_happen(
        paths: DataPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    tx = stage(paths, JOB, changes(), receipt_for())
    synced: list[str] = []
    created: list[str] = []
    real_open = os.open

    def spy_open(path: str, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_CREAT:
            created.append(path)
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    def file_fsync(fd: int) -> None:
        raise AssertionError("no file is written or fsynced inside the lock")

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(publish, "fsync_dir", synced.append)
    monkeypatch.setattr(publish, "fsync_fd", file_fsync)
    tx.verify_before()
    tx.mark()
    tx.publish()
    monkeypatch.undo()
    assert created == []
    # The marker's rename, then each distinct parent of the documents, then the receipt's.
    assert synced == [tx.directory, os.path.join(paths.root, "memory"), paths.projects_dir, paths.receipts]
    tx.cleanup()
    assert_all_after(paths)


def test_publish_recreates_a_live_directory_removed_after_staging(paths: DataPaths) -> None:
    tx = stage(paths, JOB, changes(), receipt_for())
    os.rmdir(paths.projects_dir)
    tx.verify_before()
    tx.mark()
    tx.publish()
    tx.cleanup()
    assert_all_after(paths)
    assert stat.S_IMODE(os.stat(paths.projects_dir).st_mode) == 0o700


def test_publish_refuses_a_copy_altered_after_staging_and_recovery_publishes_the_staged_bytes(
        paths: DataPaths) -> None:
    tx = marked(paths)
    _write(os.path.join(tx.directory, "publish-1"), b"# Preferences\n\n## Evil\n")
    memory = tree(os.path.join(paths.root, "memory"))
    with pytest.raises(CmError) as err:
        tx.publish()
    assert err.value.code == "RECOVERY_CONFLICT" and "publish-1" in err.value.message
    assert tree(os.path.join(paths.root, "memory")) == memory  # refused before anything moved
    assert tx.abandon() is False  # marked: it is recovery's now
    [recovered] = recover(paths)
    recovered.cleanup()
    assert_all_after(paths)


def test_recover_discards_an_unmarked_transaction_with_torn_copies_and_a_torn_ready_file(paths: DataPaths) -> None:
    # What a crash in the middle of staging can leave: some files, torn or whole, and no journal.
    directory = os.path.join(paths.transactions, str(uuid.uuid4()))
    os.makedirs(directory)
    _write(os.path.join(directory, "stage-0"), AFTER["profile"])
    _write(os.path.join(directory, "publish-0"), AFTER["profile"][:5])
    _write(os.path.join(directory, "READY"), b"v")
    memory = tree(os.path.join(paths.root, "memory"))
    assert recover(paths) == []
    assert os.listdir(paths.transactions) == []
    assert tree(os.path.join(paths.root, "memory")) == memory


def test_publish_twice_rewrites_nothing(paths: DataPaths) -> None:
    tx = marked(paths)
    tx.publish()
    first = tree(paths.root)
    tx.publish()
    assert tree(paths.root) == first  # same inodes: no file was replaced again


def test_publish_falls_back_to_a_temp_file_beside_the_target_across_devices(
        paths: DataPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    real_rename = os.rename

    def cross_device(src: str, dst: str) -> None:
        if not dst.startswith(paths.transactions):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", cross_device)
    tx = marked(paths)
    tx.publish()
    assert not [n for n in os.listdir(tx.directory) if n.startswith("publish-")]
    tx.cleanup()
    assert_all_after(paths)
    assert files_under(paths.root) == {*REL.values(), receipt_rel()}


# --- refusals before anything is published -------------------------------------------------------


@pytest.mark.parametrize("edit", ["change", "delete", "create"])
def test_a_hand_edit_between_stage_and_mark_is_stale_and_publishes_nothing(paths: DataPaths, edit: str) -> None:
    tx = stage(paths, JOB, changes(), receipt_for())
    rel = {"change": REL["profile"], "delete": REL["preferences"], "create": REL["project:alpha"]}[edit]
    path = os.path.join(paths.root, rel)
    if edit == "delete":
        os.unlink(path)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(b"# Profile\n\n## Mine\nhand edit\n")
    hand = tree(os.path.join(paths.root, "memory"))
    with pytest.raises(CmError) as err:
        tx.verify_before()
    assert err.value.code == "STALE_REVISION" and rel in err.value.message
    with pytest.raises(CmError) as order:
        tx.publish()
    assert order.value.code == "TRANSACTION_ORDER"
    assert tx.abandon() is True
    assert tree(os.path.join(paths.root, "memory")) == hand
    assert live(paths, receipt_rel()) is None
    assert os.listdir(paths.transactions) == []


def test_a_fifo_in_place_of_a_live_document_is_refused_without_blocking(paths: DataPaths) -> None:
    """A named pipe where a document belongs (nobody writes to it) is UNSAFE_PATH at once: the
    check opens it without waiting for a writer, so a commit under the repository lock never
    hangs on it; nothing is published."""
    import threading

    tx = stage(paths, JOB, changes(), receipt_for())
    fifo = os.path.join(paths.root, REL["project:alpha"])  # absent at the snapshot
    os.makedirs(os.path.dirname(fifo), exist_ok=True)
    os.mkfifo(fifo, 0o600)
    caught: list[BaseException] = []

    def check() -> None:
        try:
            tx.verify_before()
        except BaseException as exc:  # handed to the test thread
            caught.append(exc)

    worker = threading.Thread(target=check, daemon=True)
    worker.start()
    worker.join(15)
    if worker.is_alive():  # blocked in open(): give it a writer so the thread can end, then fail
        with open(fifo, "wb"):
            pass
        worker.join(15)
        pytest.fail("verify_before blocked on a named pipe")
    assert len(caught) == 1 and isinstance(caught[0], CmError) and caught[0].code == "UNSAFE_PATH"
    assert tx.abandon() is True
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and live(paths, receipt_rel()) is None


def _receipt_of_size(size: int) -> dict:
    receipt = dict(receipt_for(), observationIds=[], fill="")
    receipt["observationIds"] = [7] * ((size - len(canonical_json(receipt)) - 100) // 2)
    receipt["fill"] = "a" * (size - len(canonical_json(receipt)))
    assert len(canonical_json(receipt)) == size
    return receipt


def test_a_receipt_up_to_its_limit_is_published_and_one_byte_more_is_refused(paths: DataPaths) -> None:
    """A batch's receipt may reach ``RECEIPT_LIMIT`` (4 MiB; far above the 1 MiB a document may
    have): staged, published and read back whole. One byte more is INVALID_TRANSACTION at
    staging, before anything is written."""
    big = _receipt_of_size(4 * 1024 * 1024)
    tx = stage(paths, JOB, changes(), big)
    tx.verify_before()
    tx.mark()
    tx.publish()
    tx.cleanup()
    assert live(paths, receipt_rel()) == canonical_json(big)
    assert live(paths, REL["profile"]) == AFTER["profile"]
    with pytest.raises(CmError) as caught:
        stage(paths, "job-0002", [], _receipt_of_size(4 * 1024 * 1024 + 1) | {"id": "job-0002", "jobId": "job-0002"})
    assert caught.value.code == "INVALID_TRANSACTION" and os.listdir(paths.transactions) == []
    assert live(paths, receipt_rel("job-0002")) is None


def test_a_receipt_that_appears_after_staging_stops_the_commit(paths: DataPaths) -> None:
    tx = stage(paths, JOB, changes(), receipt_for())
    os.makedirs(paths.receipts, exist_ok=True)
    with open(os.path.join(paths.root, receipt_rel()), "wb") as handle:
        handle.write(b"{}\n")
    with pytest.raises(CmError) as err:
        tx.verify_before()
    assert err.value.code == "RECEIPT_EXISTS"
    assert_files_at(paths, BEFORE)


def _existing_receipt(paths: DataPaths) -> tuple[str, list[FileChange], dict]:
    os.makedirs(paths.receipts, exist_ok=True)
    with open(os.path.join(paths.root, receipt_rel()), "wb") as handle:
        handle.write(b"{}\n")
    return JOB, changes(), receipt_for()


@pytest.mark.parametrize("case, code", [
    (lambda p: ("", changes(), receipt_for()), "INVALID_TRANSACTION"),
    (lambda p: ("a/b", changes(), receipt_for()), "INVALID_TRANSACTION"),
    (lambda p: ("x" * 129, changes(), receipt_for("x" * 129)), "INVALID_TRANSACTION"),
    (lambda p: ("caf\u00e9", changes(), receipt_for()), "INVALID_TRANSACTION"),
    (lambda p: (JOB, changes(), receipt_for("other")), "INVALID_TRANSACTION"),
    (lambda p: (JOB, changes() + changes()[:1], receipt_for()), "INVALID_TRANSACTION"),
    (lambda p: (JOB, [FileChange("profile", "abc", AFTER["profile"])], receipt_for()), "INVALID_TRANSACTION"),
    (lambda p: (JOB, [FileChange("profile", "A" * 64, AFTER["profile"])], receipt_for()), "INVALID_TRANSACTION"),
    (lambda p: (JOB, [FileChange("profile", MISSING_HASH, "# Profile\n")], receipt_for()), "INVALID_TRANSACTION"),
    (lambda p: (JOB, [FileChange("project:../x", MISSING_HASH, b"# Project\n")], receipt_for()),
     "INVALID_TARGET_REFERENCE"),
    # Text without a heading is a hand-written untitled part now; an unclosed fence is still unreadable.
        (lambda p: (JOB, [FileChange("profile", MISSING_HASH, b"# Profile\n\n```\nno closing fence\n")], receipt_for()),
         "INVALID_DOCUMENT"),
    (lambda p: (JOB, changes(), {**receipt_for(), "title": "Role"}), "UNSAFE_RECEIPT"),
    (_existing_receipt, "RECEIPT_EXISTS"),
], ids=["empty-id", "slash-id", "long-id", "non-ascii-id", "receipt-id-mismatch", "duplicate-target",
        "short-before", "uppercase-before", "text-after", "escaping-target", "invalid-document",
        "unsafe-receipt", "receipt-exists"])
def test_stage_refuses_bad_input_and_writes_nothing(paths: DataPaths, case: Callable, code: str) -> None:
    job, file_changes, receipt = case(paths)
    before = tree(paths.root)
    with pytest.raises(CmError) as err:
        stage(paths, job, file_changes, receipt)
    assert err.value.code == code
    assert tree(paths.root) == before


def test_stage_refuses_while_an_earlier_transaction_is_unfinished(paths: DataPaths) -> None:
    marked(paths)
    with pytest.raises(CmError) as err:
        stage(paths, "job-0002", changes(), receipt_for("job-0002"))
    assert err.value.code == "TRANSACTION_PENDING"
    assert len(os.listdir(paths.transactions)) == 1


def test_abandon_discards_only_an_unmarked_transaction(paths: DataPaths) -> None:
    tx = stage(paths, JOB, changes(), receipt_for())
    assert tx.abandon() is True
    assert os.listdir(paths.transactions) == []
    tx = marked(paths)
    tx.publish()
    # The DB side failed after publishing: the directory is what lets recovery replay the receipt.
    assert tx.abandon() is False
    assert os.path.isdir(tx.directory)
    assert [r.job_id for r in recover(paths)] == [JOB]


def test_lifecycle_order_is_enforced(paths: DataPaths) -> None:
    tx = stage(paths, JOB, changes(), receipt_for())
    tx.verify_before()
    tx.mark()
    for step in (tx.mark, tx.verify_before, tx.cleanup):
        with pytest.raises(CmError) as err:
            step()
        assert err.value.code == "TRANSACTION_ORDER"
    assert os.path.isdir(tx.directory)  # a marked transaction is never discarded unpublished
    assert_all_before(paths)


def test_publish_refuses_to_overwrite_a_hand_edit_made_after_the_marker(paths: DataPaths) -> None:
    tx = marked(paths)
    with open(os.path.join(paths.root, REL["preferences"]), "wb") as handle:
        handle.write(b"# Preferences\n\n## Mine\n")
    memory = tree(os.path.join(paths.root, "memory"))
    with pytest.raises(CmError) as err:
        tx.publish()
    assert err.value.code == "RECOVERY_CONFLICT" and REL["preferences"] in err.value.message
    assert tree(os.path.join(paths.root, "memory")) == memory  # not even the other documents moved
    assert live(paths, receipt_rel()) is None


# --- receipts never carry text ---------------------------------------------------------------------


def test_a_realistic_receipt_is_safe() -> None:
    assert_receipt_safe(receipt_for())
    assert_receipt_safe({"usage": {"inputTokens": 10, "cost": 0.5}, "editResult": None, "ok": True})


@pytest.mark.parametrize("receipt", [
    {"title": "x"}, {"documents": [{"target": "profile", "body": "x"}]}, {"Reason": "x"}, {"working_notes": "x"},
    {"markdown": "x"}, {"text": "x"}, {"id": "x" * 257}, {"id": "line one\nline two"}, {"by title": 1},
    {"x": b"bytes"}, {"x": float("nan")}, {1: 2}, ["not", "an", "object"],
], ids=["title", "nested-body", "reason-any-case", "working-notes", "markdown", "text", "long-string",
        "multi-line", "non-field-key", "bytes", "nan", "int-key", "list"])
def test_receipts_with_text_are_refused(receipt: object) -> None:
    with pytest.raises(CmError) as err:
        assert_receipt_safe(receipt)
    assert err.value.code == "UNSAFE_RECEIPT"


# --- recovery --------------------------------------------------------------------------------------


def test_recover_without_a_transactions_directory_is_a_no_op(paths: DataPaths) -> None:
    assert recover(paths) == []
    assert not os.path.exists(paths.transactions)


def test_recover_deletes_an_unmarked_transaction_and_leaves_live_files_alone(paths: DataPaths) -> None:
    stage(paths, JOB, changes(), receipt_for())
    memory = tree(os.path.join(paths.root, "memory"))
    assert recover(paths) == []
    assert os.listdir(paths.transactions) == []
    assert tree(os.path.join(paths.root, "memory")) == memory
    assert live(paths, receipt_rel()) is None


def test_recover_deletes_a_half_deleted_done_directory(paths: DataPaths) -> None:
    done = os.path.join(paths.transactions, "done." + str(uuid.uuid4()))
    os.makedirs(done)
    with open(os.path.join(done, "COMMITTING"), "wb") as handle:
        handle.write(b"v1\n")
    assert recover(paths) == []
    assert os.listdir(paths.transactions) == []


def test_recover_publishes_a_marked_transaction_forward_and_returns_it_for_replay(paths: DataPaths) -> None:
    tx = marked(paths)
    # A crash after the first file: profile is new, the others and the receipt are not...
    _write(os.path.join(paths.root, REL["profile"]), AFTER["profile"])
    # ...and mid-way through writing the next copy.
    with open(os.path.join(tx.directory, "publish-1"), "wb") as handle:
        handle.write(b"torn")
    recovered = recover(paths)
    assert recovered == [publish.Recovered(JOB, receipt_for(), tx.directory)]
    assert_all_after(paths)
    assert os.path.isdir(tx.directory)  # kept until the caller has replayed the DB side
    assert recover(paths) == recovered  # a crash before cleanup: recovery offers it again
    recovered[0].cleanup()
    assert os.listdir(paths.transactions) == []
    assert recover(paths) == []
    assert files_under(paths.root) == {*REL.values(), receipt_rel()}


def test_a_journal_up_to_its_limit_is_recovered_and_one_byte_more_is_refused(paths: DataPaths) -> None:
    """Recovery reads a committed transaction's journal up to ``JOURNAL_LIMIT`` (1 MiB): padded to
    exactly that it is still published forward; one byte more is RECOVERY_CONFLICT, nothing touched."""
    tx = marked(paths)
    journal_path = os.path.join(tx.directory, "journal.json")
    with open(journal_path, "rb") as handle:
        journal = handle.read()
    _write(journal_path, journal + b" " * (1024 * 1024 + 1 - len(journal)))
    before = tree(paths.root)
    with pytest.raises(CmError) as err:
        recover(paths)
    assert err.value.code == "RECOVERY_CONFLICT"
    assert tree(paths.root) == before
    _write(journal_path, journal + b" " * (1024 * 1024 - len(journal)))
    assert recover(paths) == [publish.Recovered(JOB, receipt_for(), tx.directory)]
    assert_all_after(paths)


def test_recovery_rewrites_a_longer_stray_copy_whole(paths: DataPaths) -> None:
    """A copy a crash left may be longer than the version it stands for (a torn write of another
    attempt): recovery writes each copy afresh, so no stray tail reaches a live file."""
    tx = marked(paths)
    copies = [n for n in os.listdir(tx.directory) if n.startswith("publish-")]
    assert copies
    for name in copies:
        _write(os.path.join(tx.directory, name), b"x" * (1 << 16))
    assert recover(paths) == [publish.Recovered(JOB, receipt_for(), tx.directory)]
    assert_all_after(paths)


@pytest.mark.parametrize("edit", ["hand-edit", "symlink", "receipt"])
def test_recover_fails_closed_when_a_live_file_is_at_neither_hash(paths: DataPaths, edit: str) -> None:
    tx = marked(paths)
    if edit == "hand-edit":
        rel = REL["profile"]
        with open(os.path.join(paths.root, rel), "wb") as handle:
            handle.write(b"# Profile\n\n## Mine\nkeep me\n")
    elif edit == "symlink":
        rel = REL["preferences"]
        outside = os.path.join(os.path.dirname(paths.root), "elsewhere.md")
        with open(outside, "wb") as handle:
            handle.write(AFTER["preferences"])
        os.unlink(os.path.join(paths.root, rel))
        os.symlink(outside, os.path.join(paths.root, rel))
    else:
        rel = receipt_rel()
        os.makedirs(paths.receipts, exist_ok=True)
        with open(os.path.join(paths.root, rel), "wb") as handle:
            handle.write(b"{}\n")
    before = tree(paths.root)
    with pytest.raises(CmError) as err:
        recover(paths)
    assert err.value.code == "RECOVERY_CONFLICT"
    assert rel in err.value.message and tx.directory in err.value.message
    assert tree(paths.root) == before


def test_recover_refuses_two_committed_transactions_of_one_document(paths: DataPaths, tmp_path: Path) -> None:
    first = marked(paths)
    parked = str(tmp_path / "parked")
    os.rename(first.directory, parked)
    second = stage(paths, "job-0002", [FileChange("profile", sha(BEFORE["profile"]), AFTER["profile"])],
                   receipt_for("job-0002"))
    second.mark()
    os.rename(parked, first.directory)
    os.mkdir(os.path.join(paths.transactions, "done." + str(uuid.uuid4())))  # must survive the refusal
    before = tree(paths.root)
    with pytest.raises(CmError) as err:
        recover(paths)
    assert err.value.code == "RECOVERY_CONFLICT" and REL["profile"] in err.value.message
    assert tree(paths.root) == before


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def _edit_journal(change: Callable[[dict], None]) -> Callable[[DataPaths, str], str]:
    def mutate(paths: DataPaths, directory: str) -> str:
        journal_path = os.path.join(directory, "journal.json")
        with open(journal_path, "rb") as handle:
            journal = json.loads(handle.read())
        change(journal)
        _write(journal_path, json.dumps(journal).encode())
        return os.path.basename(directory)
    return mutate


def _raw_journal(data: bytes) -> Callable[[DataPaths, str], str]:
    def mutate(paths: DataPaths, directory: str) -> str:
        _write(os.path.join(directory, "journal.json"), data)
        return os.path.basename(directory)
    return mutate


def _foreign_entry(make: Callable[[str, str], None], name: str) -> Callable[[DataPaths, str], str]:
    def mutate(paths: DataPaths, directory: str) -> str:
        make(os.path.join(paths.transactions, name), os.path.dirname(paths.root))
        return name
    return mutate


def _in_tx(action: Callable[[str, str], None]) -> Callable[[DataPaths, str], str]:
    def mutate(paths: DataPaths, directory: str) -> str:
        action(directory, os.path.dirname(paths.root))
        return os.path.basename(directory)
    return mutate


def _symlink_to_copy(name: str) -> Callable[[str, str], None]:
    def action(directory: str, outside: str) -> None:
        copy = os.path.join(outside, "copy-" + name)
        os.rename(os.path.join(directory, name), copy)
        os.symlink(copy, os.path.join(directory, name))
    return action


def _hardlink(directory: str, outside: str) -> None:
    os.link(os.path.join(directory, "stage-0"), os.path.join(outside, "second-link"))


def _uuid_symlink(path: str, outside: str) -> None:
    target = os.path.join(outside, "planted")
    os.makedirs(target)
    _write(os.path.join(target, "COMMITTING"), b"v1\n")
    os.symlink(target, path)


def _marker_dir(directory: str, outside: str) -> None:
    os.unlink(os.path.join(directory, "COMMITTING"))
    os.mkdir(os.path.join(directory, "COMMITTING"))


U = "abcdef01-2345-4678-9abc-def012345678"  # a canonical uuid4 with letters, so .upper() differs
CORRUPTIONS = {
    "foreign-name": _foreign_entry(lambda p, o: os.mkdir(p), "notes"),
    "uppercase-uuid": _foreign_entry(lambda p, o: os.mkdir(p), U.upper()),
    "file-with-uuid-name": _foreign_entry(lambda p, o: _write(p, b"x"), U),
    "symlink-with-uuid-name": _foreign_entry(_uuid_symlink, U),
    "done-file": _foreign_entry(lambda p, o: _write(p, b"x"), "done." + U),
    "marker-version": _in_tx(lambda d, o: _write(os.path.join(d, "COMMITTING"), b"v2\n")),
    "marker-directory": _in_tx(_marker_dir),
    "marker-symlink": _in_tx(_symlink_to_copy("COMMITTING")),
    "journal-missing": _in_tx(lambda d, o: os.unlink(os.path.join(d, "journal.json"))),
    "journal-symlink": _in_tx(_symlink_to_copy("journal.json")),
    "journal-malformed": _raw_journal(b"{not json"),
    "journal-duplicate-key": _raw_journal(b'{"version":1,"version":1,"id":"job-0001","files":[]}'),
    "journal-version": _edit_journal(lambda j: j.update(version=2)),
    "journal-extra-key": _edit_journal(lambda j: j.update(note="x")),
    "journal-bad-id": _edit_journal(lambda j: j.update(id="../x")),
    "journal-no-files": _edit_journal(lambda j: j.update(files=[])),
    "path-escape": _edit_journal(lambda j: j["files"][0].update(path="memory/../../outside.md")),
    "path-other-document": _edit_journal(lambda j: j["files"][0].update(path="memory/notes.md")),
    "receipt-of-another-job": _edit_journal(lambda j: j["files"][-1].update(path=receipt_rel("other"))),
    "receipt-not-last": _edit_journal(lambda j: j["files"].reverse()),
    "bad-before-hash": _edit_journal(lambda j: j["files"][0].update(before="abc")),
    "bad-after-hash": _edit_journal(lambda j: j["files"][0].update(after=MISSING_HASH)),
    "bad-stage-name": _edit_journal(lambda j: j["files"][0].update(stage="../stage-0")),
    "repeated-stage": _edit_journal(lambda j: j["files"][1].update(stage="stage-0")),
    "stage-tampered": _in_tx(lambda d, o: _write(os.path.join(d, "stage-0"), b"# Profile\n\n## Evil\n")),
    "stage-missing": _in_tx(lambda d, o: os.unlink(os.path.join(d, "stage-1"))),
    "stage-symlink": _in_tx(_symlink_to_copy("stage-0")),
    "stage-hardlink": _in_tx(_hardlink),
    "foreign-file-inside": _in_tx(lambda d, o: _write(os.path.join(d, "notes.txt"), b"x")),
    "ready-beside-the-marker": _in_tx(lambda d, o: _write(os.path.join(d, "READY"), b"v1\n")),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_recover_touches_nothing_when_anything_in_transactions_is_foreign_or_corrupt(
        paths: DataPaths, corruption: str) -> None:
    tx = marked(paths)
    # Siblings that a healthy recovery would delete: they must survive a refusal too.
    unmarked = os.path.join(paths.transactions, str(uuid.uuid4()))
    os.mkdir(unmarked)
    _write(os.path.join(unmarked, "stage-0"), b"partial")
    os.mkdir(os.path.join(paths.transactions, "done." + str(uuid.uuid4())))
    named = CORRUPTIONS[corruption](paths, tx.directory)
    before = tree(paths.root)
    with pytest.raises(CmError) as err:
        recover(paths)
    assert err.value.code == "RECOVERY_CONFLICT"
    assert repr(named) in err.value.message
    assert tree(paths.root) == before
    assert_all_before(paths)


def test_recover_refuses_a_transactions_path_that_is_not_a_directory(paths: DataPaths, tmp_path: Path) -> None:
    os.makedirs(paths.runtime)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, paths.transactions)
    with pytest.raises(CmError) as err:
        recover(paths)
    assert err.value.code == "RECOVERY_CONFLICT"
    assert os.path.islink(paths.transactions)


def test_recovery_never_lists_the_receipts_directory(paths: DataPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    os.makedirs(paths.receipts, exist_ok=True)
    for n in range(200):
        _write(os.path.join(paths.receipts, f"old-{n}.json"), b"{}\n")
    tx = marked(paths)
    listed: list[str] = []
    real_listdir, real_scandir = os.listdir, os.scandir

    def spy_listdir(path: object = ".") -> list[str]:
        listed.append(os.fspath(path) if isinstance(path, (str, os.PathLike)) else "<fd>")
        return real_listdir(path)  # type: ignore[arg-type]

    def spy_scandir(path: object = ".") -> object:
        listed.append(os.fspath(path) if isinstance(path, (str, os.PathLike)) else "<fd>")
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "listdir", spy_listdir)
    monkeypatch.setattr(os, "scandir", spy_scandir)
    recovered = recover(paths)
    recovered[0].cleanup()
    assert recovered[0].job_id == JOB
    assert paths.transactions in listed and tx.directory in listed  # the spy really saw recovery
    assert not [p for p in listed if p.startswith(paths.receipts)]


# --- real processes killed at every fault point ------------------------------------------------------

CHILD = r"""
import json, sys
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import publish

with open(sys.argv[1]) as handle:
    plan = json.load(handle)
paths = DataPaths(plan["root"])
if sys.argv[2] == "commit":
    changes = [publish.FileChange(c["target"], c["before"], c["after"].encode()) for c in plan["changes"]]
    tx = publish.stage(paths, plan["job"], changes, plan["receipt"])
    tx.verify_before()
    tx.mark()
    tx.publish()
    tx.cleanup()
else:
    for recovered in publish.recover(paths):
        recovered.cleanup()
"""

# fault spec -> (files at their after state when the child dies, of 3 documents + receipt; marker written)
CRASH_POINTS = {
    "before_stage": (0, False),
    "after_stage_file:1": (0, False),
    "after_stage_file:2": (0, False),
    "after_stage_file:3": (0, False),
    "after_stage_file:4": (0, False),
    "after_stage_copy:1": (0, False),
    "after_stage_copy:4": (0, False),
    "after_journal": (0, False),
    "after_marker": (0, True),
    "after_publish_file:1": (1, True),
    "after_publish_file:2": (2, True),
    "after_publish_file:3": (3, True),
    "after_publish_file:4": (4, True),
    "after_publish": (4, True),
}


def run_child(tmp_path: Path, paths: DataPaths, mode: str, spec: str | None) -> subprocess.CompletedProcess:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({
        "root": paths.root, "job": JOB, "receipt": receipt_for(),
        "changes": [{"target": c.target, "before": c.before, "after": c.after.decode()} for c in changes()],
    }))
    env = {k: v for k, v in os.environ.items() if k != seams.FAULT_ENV}
    if spec is not None:
        env[seams.FAULT_ENV] = spec
    # The overlay interpreter: its test seam replaces publish.fault when the child imports publish.
    return subprocess.run([OVERLAY.python, str(script), str(plan), mode], env=env, capture_output=True, timeout=30)


def files_at_after(paths: DataPaths) -> int:
    count = sum(live(paths, REL[t]) == a for t, a in AFTER.items())
    return count + (live(paths, receipt_rel()) == canonical_json(receipt_for()))


def test_the_crash_matrix_covers_every_fault_point() -> None:
    assert {spec.split(":")[0] for spec in CRASH_POINTS} == set(publish.FAULT_POINTS)


# The child SIGKILLs itself at the named fault point (no delay), so the kill is load-independent.
@pytest.mark.parametrize("spec", list(CRASH_POINTS))
def test_sigkill_at_each_fault_point_recovers_to_all_before_or_all_after(
        tmp_path: Path, paths: DataPaths, spec: str) -> None:
    published, marker_written = CRASH_POINTS[spec]
    proc = run_child(tmp_path, paths, "commit", spec)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert len(os.listdir(paths.transactions)) == 1  # the crash really left a transaction behind
    assert files_at_after(paths) == published
    # The receipt is published last, so its presence alone proves every document is published.
    assert (live(paths, receipt_rel()) is not None) == (published == 4)

    recovered = recover(paths)
    if marker_written:
        assert [(r.job_id, r.receipt) for r in recovered] == [(JOB, receipt_for())]
        assert_all_after(paths)
        recovered[0].cleanup()
        expected = {*REL.values(), receipt_rel()}
    else:
        assert recovered == []
        assert_all_before(paths)
        expected = {REL["profile"], REL["preferences"]}
    assert os.listdir(paths.transactions) == []
    assert files_under(paths.root) == expected  # no temp, copy or stage file anywhere
    assert recover(paths) == []


def test_a_fault_spec_for_a_later_occurrence_never_fires(tmp_path: Path, paths: DataPaths) -> None:
    proc = run_child(tmp_path, paths, "commit", "after_stage_file:99")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert_all_after(paths)
    assert os.listdir(paths.transactions) == []


def test_a_crash_during_recovery_is_itself_recovered(tmp_path: Path, paths: DataPaths) -> None:
    assert run_child(tmp_path, paths, "commit", "after_marker").returncode == -signal.SIGKILL
    proc = run_child(tmp_path, paths, "recover", "after_publish_file:2")
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert files_at_after(paths) == 2
    recovered = recover(paths)
    assert [r.job_id for r in recovered] == [JOB]
    recovered[0].cleanup()
    assert_all_after(paths)
    assert files_under(paths.root) == {*REL.values(), receipt_rel()}
