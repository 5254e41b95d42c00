"""Helpers for memory-sync tests: homes of their own ("machines"), a bare repository on disk, real git."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import run_cm
from writer_support import configure

from cmrunner.core.home import DataPaths


def machine(tmp_path, name: str, profile: str | None = None) -> tuple[str, DataPaths]:
    """A configured home of its own, with ``profile`` as its profile.md when given."""
    home = str(tmp_path / name)
    paths, _cfg = configure(home)
    if profile is not None:
        for folder in (paths.root, paths.memory):  # private, as cm makes them (makedirs would not)
            os.makedirs(folder, mode=0o700, exist_ok=True)
        with open(paths.document("profile"), "w", encoding="utf-8") as f:
            f.write(profile)
    return home, paths


def bare(tmp_path, name: str = "remote.git") -> str:
    path = str(tmp_path / name)
    subprocess.run(["git", "init", "--quiet", "--bare", path], check=True)
    return path


def cm(home: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_cm([*args, "--home", home], env=env, timeout=timeout)


def ok(home: str, *args: str) -> str:
    proc = cm(home, *args)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def profile(paths: DataPaths) -> str:
    return open(paths.document("profile"), encoding="utf-8").read()


def edit(paths: DataPaths, old: str, new: str) -> None:
    text = profile(paths)
    assert old in text
    with open(paths.document("profile"), "w", encoding="utf-8") as f:
        f.write(text.replace(old, new))


def remote_log(remote: str) -> str:
    """Everything the remote holds, every version of every file of every ref."""
    return subprocess.run(["git", "-C", remote, "log", "-p", "--all"], capture_output=True, check=True).stdout.decode()


def trash(home: str) -> list[dict]:
    return json.loads(ok(home, "trash", "--json"))


def history(home: str) -> list[dict]:
    return json.loads(ok(home, "history", "--json"))


def state(home: str) -> dict:
    return json.loads(ok(home, "sync", "status", "--json"))
