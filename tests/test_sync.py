"""`cm sync`: one memory on two machines (two homes) through a bare repository on disk, real git."""

from __future__ import annotations

import os
import subprocess

from sync_support import bare, cm, edit, history, machine, ok, profile, remote_log, state, trash

from cmrunner.core import syncstate

A = "# Profile\n\n## Work\nI write Go.\n\n## Editor\nvim\n\n## Shell\nzsh\n"


def _two(tmp_path, b_profile: str | None = None):
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", A)
    ok(home_a, "sync", "init", remote)
    home_b, paths_b = machine(tmp_path, "b", b_profile)
    ok(home_b, "sync", "init", remote)
    return remote, (home_a, paths_a), (home_b, paths_b)


def test_a_second_machine_adopts_the_memory_and_edits_of_different_sections_merge(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    assert profile(paths_b) == A
    edit(paths_a, "vim", "neovim")
    edit(paths_b, "zsh", "fish")
    ok(home_a, "sync")
    said = ok(home_b, "sync")
    assert "1 document(s) updated from the remote" in said and "pushed" in said
    ok(home_a, "sync")
    assert profile(paths_a) == profile(paths_b)
    text = profile(paths_a)
    assert "neovim" in text and "fish" in text and "I write Go." in text
    assert "<<<<<<<" not in text and ">>>>>>>" not in text
    assert trash(home_a) == [] and trash(home_b) == []
    # The pulled change is in history, attributed to the machine it came from.
    pulled = [v for v in history(home_b) if v["kind"] == "sync"]
    assert pulled and all(v["client"].startswith("sync from ") for v in pulled)
    assert state(home_b)["last"]["outcome"] == "ok" and state(home_b)["ahead"] == 0


def test_the_same_section_changed_on_both_keeps_the_remote_one_and_trashes_ours(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    edit(paths_a, "I write Go.", "I write Go and Zig.")
    edit(paths_b, "I write Go.", "I write Rust.")
    ok(home_a, "sync")
    said = ok(home_b, "sync")
    assert "1 section(s) changed on both machines" in said
    assert "I write Go and Zig." in profile(paths_b) and "I write Rust." not in profile(paths_b)
    [entry] = trash(home_b)
    assert entry["section"] == "Work" and entry["reason"] == "sync conflict"
    assert "sync conflict" in ok(home_b, "trash")
    texts = [v["diff"] for v in history(home_b) if v["section"] == "Work"]
    assert any("+I write Go and Zig." in d for d in texts) and any("-I write Rust." in d for d in texts)
    # Restorable: ours comes back in place of the remote's text, which stays in history.
    assert "restored profile / Work" in ok(home_b, "restore", entry["id"])
    assert "I write Rust." in profile(paths_b) and "I write Go and Zig." not in profile(paths_b)
    assert trash(home_b) == []
    ok(home_b, "sync")
    ok(home_a, "sync")
    assert "I write Rust." in profile(paths_a)


def test_a_memory_on_both_machines_is_merged_not_overwritten_at_init(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path, "# Profile\n\n## Work\nI write Rust.\n\n## Pets\nA cat.\n")
    text = profile(paths_b)
    assert "I write Go." in text and "## Pets\nA cat." in text and "## Editor\nvim" in text
    [entry] = trash(home_b)
    assert entry["section"] == "Work" and entry["reason"] == "sync conflict"
    ok(home_a, "sync")
    assert "A cat." in profile(paths_a)


def test_a_section_the_secret_net_withholds_never_reaches_the_remote(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    token = "ghp_" + "Q7f" * 12
    edit(paths_a, "## Shell\nzsh\n", f"## Shell\nzsh\n\n## Keys\nmy token is {token}\n")
    edit(paths_a, "vim", "neovim")
    proc = cm(home_a, "sync")
    assert proc.returncode == 0, proc.stderr.decode()
    assert "SYNC_SECTION_KEPT_LOCAL" in proc.stderr.decode() and token not in proc.stderr.decode()
    assert token not in remote_log(remote)
    assert state(home_a)["last"]["code"] == "SYNC_SECTION_KEPT_LOCAL"
    # The other machine's edits still arrive here, and the secret stays in the local file.
    edit(paths_b, "zsh", "fish")
    ok(home_b, "sync")
    ok(home_a, "sync")
    assert token in profile(paths_a) and "fish" in profile(paths_a)
    assert token not in remote_log(remote) and token not in profile(paths_b)
    # Once the secret is gone, the document's local edits are pushed, and the pulled ones are not undone.
    edit(paths_a, f"\n## Keys\nmy token is {token}\n", "")
    ok(home_a, "sync")
    ok(home_b, "sync")
    assert "neovim" in profile(paths_b) and "fish" in profile(paths_b)
    assert token not in remote_log(remote)


def test_a_remote_that_is_not_a_cm_memory_or_unreachable_is_refused_and_nothing_changes(tmp_path):
    home, paths = machine(tmp_path, "a", A)
    other = str(tmp_path / "other")
    subprocess.run(["git", "init", "--quiet", "-b", "main", other], check=True)
    open(os.path.join(other, "README"), "w").write("code\n")
    subprocess.run(["git", "-C", other, "add", "README"], check=True)
    subprocess.run(["git", "-C", other, "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qm", "x"], check=True)
    proc = cm(home, "sync", "init", other)
    assert proc.returncode == 1 and "cm: SYNC_NOT_CM_MEMORY: " in proc.stderr.decode()
    assert not os.path.exists(syncstate.git_dir(paths)) and not syncstate.configured(paths)
    proc = cm(home, "sync", "init", str(tmp_path / "missing.git"))
    assert proc.returncode == 1 and "cm: SYNC_REMOTE_UNREACHABLE: " in proc.stderr.decode()
    proc = cm(home, "sync", "init", "https://me:s3cretTOKEN@127.0.0.1:9/memory.git")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "SYNC_REMOTE_UNREACHABLE" in err and "s3cretTOKEN" not in err
    assert profile(paths) == A
    proc = cm(home, "sync")
    assert proc.returncode == 1 and "cm: SYNC_NOT_SET_UP: " in proc.stderr.decode()


def test_plain_http_remote_is_warned_about(tmp_path):
    home, _paths = machine(tmp_path, "a", A)
    proc = cm(home, "sync", "init", "http://me:tok99@127.0.0.1:9/m.git")
    err = proc.stderr.decode()
    assert "warning: the remote http://***@127.0.0.1:9/m.git is not a local path" in err and "tok99" not in err


def test_no_git_on_path_is_git_not_found(tmp_path):
    home, paths = machine(tmp_path, "a", A)
    proc = cm(home, "sync", "init", bare(tmp_path), env={**os.environ, "PATH": str(tmp_path / "empty")})
    assert proc.returncode == 1 and "cm: GIT_NOT_FOUND: " in proc.stderr.decode()
    assert profile(paths) == A and not syncstate.configured(paths)


def test_a_hand_made_merge_or_a_corrupt_repository_is_refused_then_repaired(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    git_dir = syncstate.git_dir(paths_a)
    head = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "HEAD"], capture_output=True).stdout
    open(os.path.join(git_dir, "MERGE_HEAD"), "wb").write(head)
    edit(paths_a, "vim", "emacs")
    before = profile(paths_a)
    proc = cm(home_a, "sync")
    assert proc.returncode == 1 and "cm: SYNC_MERGE_IN_PROGRESS: " in proc.stderr.decode()
    assert profile(paths_a) == before and state(home_a)["last"]["code"] == "SYNC_MERGE_IN_PROGRESS"
    assert "ended the unfinished MERGE_HEAD" in ok(home_a, "sync", "repair")
    ok(home_b, "sync")
    assert "emacs" in profile(paths_b)
    # Conflict markers written into a memory file by hand: refused, the file untouched.
    edit(paths_b, "## Shell\nfish\n" if "fish" in profile(paths_b) else "## Shell\nzsh\n",
         "## Shell\n<<<<<<< HEAD\nzsh\n=======\nfish\n>>>>>>> other\n")
    marked = profile(paths_b)
    proc = cm(home_b, "sync")
    assert proc.returncode == 1 and "cm: SYNC_CONFLICT_MARKERS: " in proc.stderr.decode()
    assert profile(paths_b) == marked
    # A damaged repository: refused, then rebuilt from the files and the remote.
    for folder, _dirs, files in os.walk(os.path.join(git_dir, "objects")):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o600)
            open(os.path.join(folder, name), "wb").write(b"garbage")
    edit(paths_a, "emacs", "helix")
    proc = cm(home_a, "sync")
    assert proc.returncode == 1 and "cm: SYNC_REPO_CORRUPT: " in proc.stderr.decode()
    assert "helix" in profile(paths_a)
    assert "rebuilt the sync repository" in ok(home_a, "sync", "repair")
    # Rebuilt on the last commit synced here (tests/test_sync_repair.py): the edit made here since
    # is pushed, not a conflict.
    assert trash(home_a) == [] and "helix" in profile(paths_a)
    assert "helix" in remote_log(remote)


def _tip(remote: str, path: str = "profile.md") -> str:
    return subprocess.run(["git", "-C", remote, "show", f"main:{path}"], capture_output=True, check=True).stdout.decode()


def test_a_purge_reaches_the_remotes_tip_and_purge_history_rewrites_it(tmp_path):
    import time

    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    edit(paths_a, "## Shell\nzsh\n", "## Shell\nzsh\n\n## Old address\nI lived at 12 Elm Street.\n")
    ok(home_a, "sync")
    ok(home_b, "sync")
    assert "12 Elm Street" in _tip(remote)
    before = state(home_a)["last"]["at"]
    ok(home_a, "purge", "profile", "Old address", "--yes")
    # The user's commit starts a drain; the drain starts the background sync that pushes it.
    deadline = time.monotonic() + 60
    while state(home_a)["last"]["at"] == before:
        assert time.monotonic() < deadline, "no background sync after the purge"
        time.sleep(0.2)
    assert "12 Elm Street" not in _tip(remote) and "12 Elm Street" in remote_log(remote)  # the past keeps it
    ok(home_b, "sync")
    assert "12 Elm Street" not in profile(paths_b)
    # History and trash are each machine's own: b keeps what it saw, in its trash, as pulled.
    [pulled] = trash(home_b)
    assert pulled["section"] == "Old address" and pulled["reason"] == "removed on another machine"
    assert "on another machine (brought by `cm sync`)" in ok(home_b, "trash")
    said = ok(home_a, "sync", "purge-history", "--yes")
    assert "other clones, forks and the hosting service may still hold the old commits" in said
    assert "12 Elm Street" not in remote_log(remote)
    # The other machine's next sync keeps its own edit and does not push the old history back.
    edit(paths_b, "vim", "nano")
    ok(home_b, "sync")
    ok(home_a, "sync")
    assert "nano" in profile(paths_a) and "12 Elm Street" not in remote_log(remote)
    count = subprocess.run(["git", "-C", remote, "rev-list", "--count", "main"], capture_output=True, check=True)
    assert int(count.stdout) <= 3


def test_a_remote_that_rejects_the_push_is_a_code_and_a_remedy_and_nothing_is_lost(tmp_path):
    remote, (home_a, paths_a), (home_b, paths_b) = _two(tmp_path)
    hook = os.path.join(remote, "hooks", "pre-receive")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\necho 'protected branch' >&2\nexit 1\n")
    os.chmod(hook, 0o755)
    edit(paths_a, "vim", "kakoune")
    proc = cm(home_a, "sync")
    assert proc.returncode == 1 and "cm: SYNC_REMOTE_REJECTED: " in proc.stderr.decode()
    assert "kakoune" in profile(paths_a)
    assert state(home_a)["last"]["code"] == "SYNC_REMOTE_REJECTED" and state(home_a)["ahead"] >= 1  # committed here
    proc = cm(home_a, "status")
    shown = proc.stdout.decode()
    assert proc.returncode == 0, shown
    assert "FAILED SYNC_REMOTE_REJECTED" in shown and "check your access to the remote" in shown
    os.unlink(hook)
    ok(home_a, "sync")
    ok(home_b, "sync")
    assert "kakoune" in profile(paths_b)
