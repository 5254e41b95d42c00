"""`cm sync init REMOTE`: which remotes it warns about, told apart by git's own rules, and a remote
given as a path relative to the current folder (real git, a bare repository on disk)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import CM, hook_env
from sync_support import machine, ok, profile

from cmrunner.core import syncstate
from cmrunner.sync import setup

QUIET = ["/srv/memory.git", "memory.git", "backups/memory.git", "./memory.git", "../memory.git", "~/memory.git",
         "file:///srv/memory.git", "git@github.com:me/memory.git", "github.com:me/memory.git",
         "ssh://git@host.example/me/memory.git", "git+ssh://host.example/memory.git",
         "https://host.example/me/memory.git", "HTTPS://host.example/memory.git", "dir/with:colon/memory.git"]
WARNED = ["http://host.example/memory.git", "git://host.example/memory.git", "ftp://host.example/memory.git",
          "persistent-http::http://host.example/memory.git"]


@pytest.mark.parametrize("remote", QUIET)
def test_a_local_path_an_ssh_or_an_https_remote_is_not_warned_about(remote):
    assert setup.warning(remote) is None


@pytest.mark.parametrize("remote", WARNED)
def test_a_remote_that_may_travel_unencrypted_is_warned_about(remote):
    said = setup.warning(remote)
    assert said is not None and "is not a local path, an ssh or an https URL" in said


def test_a_warning_never_shows_the_remotes_credentials():
    said = setup.warning("http://me:t0ken42@host.example/memory.git")
    assert said is not None and "t0ken42" not in said and "http://***@host.example/memory.git" in said


def test_a_remote_path_relative_to_the_current_folder_is_set_up_there(tmp_path):
    where = tmp_path / "work"
    (where / "backups").mkdir(parents=True)
    subprocess.run(["git", "init", "--quiet", "--bare", str(where / "backups" / "memory.git")], check=True)
    home, paths = machine(tmp_path, "a", "# Profile\n\n## Work\nI write Go.\n")
    proc = subprocess.run([CM, "sync", "init", "backups/memory.git", "--home", home], cwd=where, env=hook_env(),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "warning" not in proc.stderr.decode()
    state = json.loads(ok(home, "sync", "status", "--json"))
    assert state["remote"] == str(where / "backups" / "memory.git")  # absolute: git runs from /
    shown = subprocess.run(["git", "-C", str(where / "backups" / "memory.git"), "show", "main:profile.md"],
                           capture_output=True, check=True).stdout.decode()
    assert shown == profile(paths)
    assert syncstate.configured(paths) and os.path.isdir(syncstate.git_dir(paths))


def test_an_unreachable_remote_at_init_says_nothing_was_set_up(tmp_path):
    home, paths = machine(tmp_path, "a", "# Profile\n\n## Work\nI write Go.\n")
    proc = subprocess.run([CM, "sync", "init", "missing.git", "--home", home], cwd=tmp_path, env=hook_env(),
                          capture_output=True, timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "cm: SYNC_REMOTE_UNREACHABLE: " in err
    assert "nothing was set up" in err and "cm sync init" in err and "retries later" not in err
    assert not syncstate.configured(paths) and not os.path.exists(syncstate.git_dir(paths))
