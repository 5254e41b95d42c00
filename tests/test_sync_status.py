"""`cm sync status` in words: the remote and this device, ahead/behind as of the last fetch, the
last sync with its outcome, and the last successful one — read only, no network."""

from __future__ import annotations

import os
import re
import subprocess

from sync_support import bare, cm, edit, machine, ok, profile, state
from test_sync import A

from cmrunner.core import syncstate

_WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"


def _shown(home: str) -> list[str]:
    return ok(home, "sync", "status").splitlines()


def _fetch_only(paths) -> None:
    """What a sync killed right after its fetch leaves: the remote's tip fetched, nothing merged."""
    subprocess.run(["git", "--git-dir", syncstate.git_dir(paths), "fetch", "--quiet", "origin",
                    "+refs/heads/main:refs/remotes/origin/main"], check=True, capture_output=True)


def test_status_says_ahead_behind_and_the_last_sync_in_words(tmp_path):
    remote = bare(tmp_path)
    home_a, paths_a = machine(tmp_path, "a", A)
    ok(home_a, "config", "set", "deviceName", "laptop")
    ok(home_a, "sync", "init", remote)
    home_b, paths_b = machine(tmp_path, "b")
    ok(home_b, "sync", "init", remote)
    ok(home_a, "sync")  # both machines at the same commit
    shown = _shown(home_a)
    assert shown[0] == f"remote: {remote} (branch main), this device: laptop", shown
    assert shown[1] == "ahead 0, behind 0 (as of the last fetch)", shown
    assert re.fullmatch(rf"last sync: {_WHEN} ok", shown[2]), shown
    assert re.fullmatch(rf"last successful sync: {_WHEN}", shown[3]) and len(shown) == 4, shown
    ok_at, ok_ms = shown[3], state(home_a)["lastOk"]

    # A push the remote refuses: committed here (ahead 1), the failure and its remedy shown.
    hook = os.path.join(remote, "hooks", "pre-receive")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\nexit 1\n")
    os.chmod(hook, 0o755)
    edit(paths_a, "vim", "neovim")
    assert ok(home_a, "sync", "status").splitlines()[1] == "ahead 0, behind 0 (as of the last fetch)"
    assert cm(home_a, "sync").returncode == 1
    shown = _shown(home_a)
    assert shown[1] == "ahead 1, behind 0 (as of the last fetch)", shown
    assert re.fullmatch(rf"last sync: {_WHEN} failed: SYNC_REMOTE_REJECTED", shown[2]), shown
    assert shown[3].startswith("  the remote refused") and "run `cm sync`" in shown[3], shown
    assert shown[4] == ok_at, shown  # the last success is still the earlier one
    os.unlink(hook)

    # The other machine pushes an edit of its own (one commit on the tip); once this one has
    # fetched it (a sync killed right after its fetch), it is behind by that commit and still
    # ahead by its own.
    edit(paths_b, "zsh", "fish")
    ok(home_b, "sync")
    _fetch_only(paths_a)
    assert _shown(home_a)[1] == "ahead 1, behind 1 (as of the last fetch)"
    assert state(home_a)["behind"] == 1 and state(home_a)["ahead"] == 1

    ok(home_a, "sync")
    shown = _shown(home_a)
    assert shown[1] == "ahead 0, behind 0 (as of the last fetch)", shown
    assert re.fullmatch(rf"last sync: {_WHEN} ok", shown[2]) and state(home_a)["lastOk"] > ok_ms, shown
    assert "neovim" in profile(paths_a) and "fish" in profile(paths_a)


def test_status_when_sync_is_not_set_up(tmp_path):
    home, _paths = machine(tmp_path, "a", A)
    assert _shown(home) == ["memory sync is not set up: `cm sync init <remote>` (a private repository you own)"]
