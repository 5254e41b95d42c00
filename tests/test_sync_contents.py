"""`cm sync` shares the memory documents and nothing else: not the store, not `.env`, not the
configuration, not other files that happen to sit in memory/ — neither in the remote nor in the
local git directory, at the tip or anywhere in their history."""

from __future__ import annotations

import os
import re
import subprocess

from sync_support import bare, edit, machine, ok, remote_log
from test_sync import A
from writer_support import admit

from cmrunner.core import syncstate

_SHARED = re.compile(r"\.cm-memory|profile\.md|preferences\.md|projects/[A-Za-z0-9_-]+\.md")


def _paths_ever(*git_args: str) -> set[str]:
    """Every file path any commit of any ref holds (``git_args`` say which repository)."""
    revs = subprocess.run(["git", *git_args, "rev-list", "--all"], capture_output=True, check=True).stdout.split()
    found: set[str] = set()
    for rev in revs:
        listed = subprocess.run(["git", *git_args, "ls-tree", "-r", "-z", "--name-only", rev.decode()],
                                capture_output=True, check=True).stdout.decode()
        found |= {p for p in listed.split("\0") if p}
    return found


def test_only_the_memory_documents_reach_the_remote_and_the_local_git(tmp_path):
    remote = bare(tmp_path)
    home, paths = machine(tmp_path, "a", A)
    # Everything else a home holds: config.json (machine wrote it), a .env with a key, the store
    # with a captured turn, runtime files, and files in memory/ that are not memory documents.
    key = "sk-" + "Zq9x" * 10
    with open(os.path.join(home, ".env"), "w", encoding="utf-8") as f:
        f.write(f"OPENAI_API_KEY={key}\n")
    said = "remember that the staging box is called quasar-kettle"
    admit(paths, said, "e1")
    os.makedirs(paths.projects_dir, mode=0o700, exist_ok=True)
    with open(os.path.join(paths.projects_dir, "app-0a1b2c.md"), "w", encoding="utf-8") as f:
        f.write("# Project\n\n## Build\nmake test\n")
    for stray in ("notes.txt", ".env", "projects/README.txt", "profile.md.bak"):
        with open(os.path.join(paths.memory, stray), "w", encoding="utf-8") as f:
            f.write(f"stray-{stray} {key}\n")
    ok(home, "sync", "init", remote)
    edit(paths, "vim", "neovim")
    ok(home, "sync")
    assert os.path.isfile(paths.db) and os.path.isfile(os.path.join(home, "config.json"))
    tip = subprocess.run(["git", "-C", remote, "ls-tree", "-r", "--name-only", "main"], capture_output=True,
                         check=True).stdout.decode().split()
    assert set(tip) == {".cm-memory", "profile.md", "projects/app-0a1b2c.md"}, tip
    for where in (["-C", remote], ["--git-dir", syncstate.git_dir(paths)]):
        ever = _paths_ever(*where)
        assert ever and all(_SHARED.fullmatch(p) for p in ever), (where, ever)
    everything = remote_log(remote)
    assert "neovim" in everything and "make test" in everything
    assert key not in everything and "quasar-kettle" not in everything and "stray-" not in everything
    assert "dataRoot" not in everything and "OPENAI_API_KEY" not in everything

