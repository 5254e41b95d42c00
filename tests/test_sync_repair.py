"""`cm sync repair` rebuilds a damaged sync repository on the last commit this machine synced, so the
sync that follows merges by section from that base; without one it says so (two homes, a bare
repository on disk, real git)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from sync_support import bare, cm, edit, machine, ok, profile, remote_log, state, trash

from cmrunner.core import syncstate
from cmrunner.core.errors import CmError

A = "# Profile\n\n## Work\nI write Go.\n\n## Editor\nvim\n\n## Shell\nzsh\n"


def _two(tmp_path):
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", A)
    ok(home_a, "sync", "init", remote)
    home_b, paths_b = machine(tmp_path, "b")
    ok(home_b, "sync", "init", remote)
    ok(home_a, "sync")
    return remote, (home_a, paths_a), (home_b, paths_b)


def _corrupt(paths) -> None:
    """Every object of the git directory overwritten: HEAD's commit no longer reads back."""
    for folder, _dirs, files in os.walk(os.path.join(syncstate.git_dir(paths), "objects")):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o600)
            with open(os.path.join(folder, name), "wb") as f:
                f.write(b"garbage")


def _refused(home: str) -> str:
    proc = cm(home, "sync")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "cm: SYNC_REPO_CORRUPT: " in err and "`cm sync repair`" in err
    return err


def test_repair_merges_from_the_last_synced_commit_so_edits_of_different_sections_both_stay(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    synced = json.load(open(syncstate.state_path(paths_a)))["synced"]
    assert synced == subprocess.run(["git", "-C", remote, "rev-parse", "main"], capture_output=True,
                                    check=True).stdout.decode().strip()
    _corrupt(paths_a)
    edit(paths_b, "zsh", "fish")
    ok(home_b, "sync")
    edit(paths_a, "vim", "helix")
    before = profile(paths_a)
    _refused(home_a)
    assert profile(paths_a) == before  # refused, the file untouched
    said = ok(home_a, "sync", "repair")
    assert "rebuilt the sync repository" in said
    assert f"merging from the last commit this machine synced ({synced[:12]})" in said
    assert "1 document(s) updated from the remote" in said and "section(s) changed on both machines" not in said
    ok(home_a, "sync")
    ok(home_b, "sync")
    for paths in (paths_a, paths_b):
        text = profile(paths)
        assert "helix" in text and "fish" in text and "I write Go." in text and "vim" not in text
    assert trash(home_a) == [] and trash(home_b) == []
    assert "helix" in remote_log(remote)
    assert not os.path.exists(syncstate.git_dir(paths_a) + ".broken")
    assert not os.path.exists(syncstate.git_dir(paths_a) + ".new")


def test_a_section_changed_on_both_since_the_last_sync_is_still_the_one_conflict(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    _corrupt(paths_a)
    edit(paths_b, "I write Go.", "I write Rust.")
    edit(paths_b, "zsh", "fish")
    ok(home_b, "sync")
    edit(paths_a, "I write Go.", "I write Zig.")
    said = ok(home_a, "sync", "repair")
    assert "1 section(s) changed on both machines" in said
    [entry] = trash(home_a)
    assert entry["section"] == "Work" and entry["reason"] == "sync conflict"
    assert "I write Rust." in profile(paths_a) and "fish" in profile(paths_a)


def test_without_a_known_base_repair_falls_back_and_says_so(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    # A state from before the last synced commit was kept: no base known.
    kept = json.load(open(syncstate.state_path(paths_a)))
    del kept["synced"]
    syncstate.write(paths_a, kept)
    _corrupt(paths_a)
    edit(paths_b, "zsh", "fish")
    ok(home_b, "sync")
    edit(paths_a, "vim", "helix")
    said = ok(home_a, "sync", "repair")
    assert "no record of the last sync is kept here: without a merge base, every section that differs" in said
    # Today's behaviour: every section that differs is a conflict (the one edited here and the one
    # edited there alike), this machine's text restorable.
    entries = trash(home_a)
    assert sorted(e["section"] for e in entries) == ["Editor", "Shell"]
    assert {e["reason"] for e in entries} == {"sync conflict"}
    assert "fish" in profile(paths_a) and "helix" not in profile(paths_a)
    # The remote's history rewritten since the last sync: the base is gone, and it says that.
    ok(home_a, "sync")
    ok(home_b, "sync", "purge-history", "--yes")
    purged = json.load(open(syncstate.state_path(paths_b)))["synced"]
    assert purged == subprocess.run(["git", "-C", remote, "rev-parse", "main"], capture_output=True,
                                    check=True).stdout.decode().strip()
    _corrupt(paths_a)
    said = ok(home_a, "sync", "repair")
    assert "is no longer on the remote (its history was rewritten)" in said


def test_an_unreachable_remote_keeps_the_damaged_repository_and_the_files(tmp_path):
    remote, (home_a, paths_a), _b = _two(tmp_path)
    _corrupt(paths_a)
    edit(paths_a, "vim", "helix")
    before = profile(paths_a)
    moved = remote + ".away"
    os.rename(remote, moved)
    proc = cm(home_a, "sync", "repair")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "cm: SYNC_REMOTE_UNREACHABLE: " in err
    assert "the damaged sync repository is kept as it was" in err and remote not in err
    assert profile(paths_a) == before and not os.path.exists(syncstate.git_dir(paths_a) + ".new")
    assert state(home_a)["configured"]
    shutil.move(moved, remote)
    said = ok(home_a, "sync", "repair")
    assert "merging from the last commit this machine synced" in said
    assert trash(home_a) == [] and "helix" in remote_log(remote)


def test_a_repair_killed_between_its_two_renames_is_completed_by_the_next(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    git_dir = syncstate.git_dir(paths_a)
    _corrupt(paths_a)
    edit(paths_b, "zsh", "fish")
    ok(home_b, "sync")
    edit(paths_a, "vim", "helix")
    # The state a kill leaves after the damaged directory was set aside and before the rebuilt one
    # took its place: no repo.git, the damaged copy and the fresh one (which knows the remote) beside it.
    os.rename(git_dir, git_dir + ".broken")
    subprocess.run(["git", "init", "--quiet", "--bare", git_dir + ".new"], check=True)
    subprocess.run(["git", "--git-dir", git_dir + ".new", "remote", "add", "origin", remote], check=True)
    _refused(home_a)
    said = ok(home_a, "sync", "repair")
    assert "merging from the last commit this machine synced" in said
    assert not os.path.exists(git_dir + ".new") and not os.path.exists(git_dir + ".broken")
    assert "helix" in profile(paths_a) and "fish" in profile(paths_a) and trash(home_a) == []


def _corrupt_blobs(paths) -> int:
    """Only the file contents' objects overwritten: HEAD's commit and tree still read back, so the
    sync's quick check at its start passes, and the damage shows when git needs the objects."""
    git_dir = syncstate.git_dir(paths)
    listed = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch-all-objects", "--batch-check"],
                            capture_output=True, check=True, text=True).stdout.split("\n")
    count = 0
    for line in filter(None, listed):
        name, kind, _size = line.split(" ")
        if kind == "blob":
            path = os.path.join(git_dir, "objects", name[:2], name[2:])
            if os.path.exists(path):
                os.chmod(path, 0o600)
                with open(path, "wb") as f:
                    f.write(b"garbage")
                count += 1
    return count


def test_damage_below_the_tip_is_named_as_such_and_repair_rebuilds_it(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    assert _corrupt_blobs(paths_a) >= 1
    edit(paths_b, "zsh", "fish")
    ok(home_b, "sync")
    edit(paths_a, "vim", "helix")
    before = profile(paths_a)
    proc = cm(home_a, "sync")
    err = proc.stderr.decode()
    # Not the network: the repository's own object does not read, and repair is the remedy.
    assert proc.returncode == 1 and "cm: SYNC_REPO_CORRUPT: " in err and "`cm sync repair`" in err, err
    assert profile(paths_a) == before and state(home_a)["last"]["code"] == "SYNC_REPO_CORRUPT"
    said = ok(home_a, "sync", "repair")
    assert "rebuilt the sync repository" in said and "merging from the last commit this machine synced" in said
    text = profile(paths_a)
    assert "helix" in text and "fish" in text and trash(home_a) == []
    ok(home_b, "sync")
    assert "helix" in profile(paths_b)
    # A sound repository is left as it is: repair has nothing to rebuild.
    assert "rebuilt" not in ok(home_a, "sync", "repair")


def test_a_copy_that_does_not_read_is_corrupt_not_absent(tmp_path):
    from cmrunner.sync.git import Git

    _remote, (_home_a, paths_a), _b = _two(tmp_path)
    git = Git(paths_a)
    head = git.rev("HEAD")
    assert git.blob(head, "profile.md") == profile(paths_a).encode() and git.blob(head, "nothing.md") is None
    name = subprocess.run(["git", "--git-dir", git.git_dir, "rev-parse", f"{head}:profile.md"], capture_output=True,
                          check=True, text=True).stdout.strip()
    path = os.path.join(git.git_dir, "objects", name[:2], name[2:])
    os.chmod(path, 0o600)
    with open(path, "wb") as f:
        f.write(b"garbage")
    with pytest.raises(CmError) as caught:  # not taken for an absent copy
        git.blob(head, "profile.md")
    assert caught.value.code == "SYNC_REPO_CORRUPT" and "`cm sync repair`" in caught.value.message
    assert git.blob(head, "nothing.md") is None
