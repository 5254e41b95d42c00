"""The normalized git remote: every spelling of one repository collapses, different repositories never do."""

from __future__ import annotations

import os
import subprocess

import pytest

from cmrunner.core import gitremote

GITHUB = "github.com/owner/repo"


@pytest.mark.parametrize("url", [
    "https://github.com/owner/repo",
    "https://github.com/owner/repo.git",
    "https://github.com/owner/repo/",
    "https://github.com/owner/repo.git/",
    "https://GitHub.COM/owner/repo",
    "HTTPS://github.com/owner/repo",
    "http://github.com/owner/repo",
    "https://github.com:443/owner/repo",
    "https://user@github.com/owner/repo",
    "https://user:ghp_secretToken123@github.com/owner/repo.git",
    "https://github.com//owner//repo",
    "https://github.com/owner/re%70o",
    "git@github.com:owner/repo.git",
    "git@github.com:owner/repo",
    "git@GITHUB.com:owner/repo/",
    "github.com:owner/repo",
    "git@github.com:/owner/repo.git",
    "ssh://git@github.com/owner/repo.git",
    "ssh://git@github.com:22/owner/repo",
    "git+ssh://git@github.com/owner/repo",
    "ssh+git://github.com/owner/repo",
    "git://github.com/owner/repo.git",
    "  https://github.com/owner/repo  ",
])
def test_spellings_of_one_repository_collapse(url):
    assert gitremote.normalize(url) == GITHUB


@pytest.mark.parametrize("url", [
    "https://gitlab.com/owner/repo",             # another host
    "https://github.com/other/repo",             # another owner
    "https://github.com/owner/repo2",            # another repository
    "https://github.com/owner/repo/sub",         # a deeper path
    "https://github.com/Owner/Repo",             # case of the path is kept
    "https://github.com:8443/owner/repo",        # a non-default port is another server
    "git@github.example.com:owner/repo",         # a subdomain is another host
    "ssh://git@github.com:2222/owner/repo",
    "/srv/git/owner/repo.git",                   # a path on disk is not a hosted repository
])
def test_different_repositories_stay_apart(url):
    assert gitremote.normalize(url) != GITHUB


def test_credentials_never_survive():
    normal = gitremote.normalize("https://alice:s3cr3t-token@Example.org:8080/team/app.git")
    assert normal == "example.org:8080/team/app"
    assert "s3cr3t" not in normal and "alice" not in normal


@pytest.mark.parametrize(("url", "expected"), [
    ("/srv/git/repo.git", "file:///srv/git/repo"),
    ("/srv/git/repo", "file:///srv/git/repo"),
    ("/srv/git/repo/", "file:///srv/git/repo"),
    ("file:///srv/git/repo.git", "file:///srv/git/repo"),
    ("/srv/git/../git/repo.git", "file:///srv/git/repo"),
    ("../remote.git", "file:///home/me/remote"),
    ("./remote.git", "file:///home/me/work/remote"),
])
def test_local_paths_become_absolute_file_urls(url, expected):
    assert gitremote.normalize(url, "/home/me/work") == expected


@pytest.mark.parametrize("url", ["", "   ", "https://github.com/", "https://github.com", "git@github.com:",
                                 "git@github.com:.git", "https://github.com/owner/repo\n/x", "https://[::1/x",
                                 "relative/without/base", "https://h:99999/x"])
def test_what_is_not_a_remote_gives_none(url):
    assert gitremote.normalize(url) is None


def _git(cwd, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_origin_reads_the_real_repository(tmp_path):
    work = tmp_path / "work"
    (work / "services" / "api").mkdir(parents=True)
    _git(work, "init", "-q")
    assert gitremote.origin(str(work)) == gitremote.Origin(None, "", "the repository has no remote")
    _git(work, "remote", "add", "upstream", "git@github.com:owner/repo.git")
    assert gitremote.origin(str(work)).remote == GITHUB  # the only remote
    _git(work, "remote", "add", "fork", "https://github.com/me/repo")
    assert gitremote.origin(str(work)).why == "several remotes and none is named origin"
    _git(work, "remote", "add", "origin", "https://token@github.com/owner/repo")
    assert gitremote.origin(str(work)) == gitremote.Origin(GITHUB, "", "")
    assert gitremote.origin(str(work / "services" / "api")) == gitremote.Origin(GITHUB, "services/api", "")
    outside = tmp_path / "plain"
    outside.mkdir()
    assert gitremote.origin(str(outside)).remote is None
    assert gitremote.origin(str(outside)).why == "not inside a git work tree"


def test_origin_without_git_on_path_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    found = gitremote.origin(str(tmp_path))
    assert found == gitremote.Origin(None, "", "git is not on PATH")


def test_a_hosts_git_variables_do_not_steer_the_lookup(tmp_path, monkeypatch):
    work, other = tmp_path / "work", tmp_path / "other"
    for folder, url in ((work, "https://github.com/owner/repo"), (other, "https://github.com/other/thing")):
        folder.mkdir()
        _git(folder, "init", "-q")
        _git(folder, "remote", "add", "origin", url)
    monkeypatch.setenv("GIT_DIR", os.path.join(other, ".git"))
    assert gitremote.origin(str(work)).remote == GITHUB
