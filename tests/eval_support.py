"""Running `cm eval` in a test: a private home and temporary folder per run."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import run_cm
from support import seams


def eval_env(tmp: str) -> dict[str, str]:
    """``COMMON_MEMORY_HOME`` and ``TMPDIR`` under ``tmp`` (the worlds' homes go to ``tmp/tmp``); drains
    linger 0 ms, and no other test seam acts."""
    os.makedirs(os.path.join(tmp, "tmp"), exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in seams.VARIABLES}
    env.update(COMMON_MEMORY_HOME=os.path.join(tmp, "home"), TMPDIR=os.path.join(tmp, "tmp"),
               **{seams.LINGER_ENV: "0"})
    return env


def cm_eval(tmp: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
    return run_cm(["eval", *args], env=eval_env(tmp), timeout=timeout)


def eval_json(tmp: str, *args: str) -> tuple[int, dict, str]:
    """`cm eval --json --jobs 2 …`: exit code, the report (``{}`` without one) and stderr."""
    proc = cm_eval(tmp, "--json", "--jobs", "2", *args)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr.decode()
