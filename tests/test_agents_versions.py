"""`cm agents` asks a host's binary for its version once per install: the answer is cached by the
binary's resolved path, size and mtime, so listing does not wait for Node hosts on every call.

The stand-in binaries are shell scripts that count their own runs in a file, so the test sees
exactly how often cm ran ``--version``.
"""

from __future__ import annotations

import json
import os

from conftest import hook_env, run_cm


def _stand_in(bin_dir, name: str, version: str, runs) -> str:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\necho run >> {runs}\necho '{name} {version}'\n")
    path.chmod(0o755)
    return str(path)


def _listing(user, home: str, bin_dir) -> dict[str, dict]:
    env = hook_env(HOME=str(user), PATH=f"{bin_dir}:/usr/bin:/bin")
    for name in ("CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "CODEX_HOME", "PI_CODING_AGENT_DIR"):
        env.pop(name, None)
    proc = run_cm(["--home", home, "agents", "--json"], env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {row["id"]: row for row in json.loads(proc.stdout)}


def _runs(path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_version_is_asked_once_until_the_binary_changes(tmp_path, home):
    user, bin_dir = tmp_path / "user", tmp_path / "bin"
    user.mkdir()
    os.mkdir(home, 0o700)
    bin_dir.mkdir()
    gemini_runs, codex_runs = tmp_path / "gemini.runs", tmp_path / "codex.runs"
    gemini = _stand_in(bin_dir, "gemini", "0.61.0", gemini_runs)
    _stand_in(bin_dir, "codex", "0.169.0", codex_runs)

    first = _listing(user, home, bin_dir)
    assert first["gemini"]["version"] == "0.61.0" and first["codex"]["version"] == "0.169.0"
    assert (_runs(gemini_runs), _runs(codex_runs)) == (1, 1)

    again = _listing(user, home, bin_dir)
    assert again["gemini"]["version"] == "0.61.0" and again["codex"]["version"] == "0.169.0"
    assert (_runs(gemini_runs), _runs(codex_runs)) == (1, 1), "an unchanged binary must not be run again"

    # An upgrade rewrites the file: a new size and mtime make cm ask again, for that host alone.
    _stand_in(bin_dir, "gemini", "0.62.10", gemini_runs)
    st = os.stat(gemini)
    os.utime(gemini, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    upgraded = _listing(user, home, bin_dir)
    assert upgraded["gemini"]["version"] == "0.62.10"
    assert (_runs(gemini_runs), _runs(codex_runs)) == (2, 1)

    cache = tmp_path / "cmhome" / "cache" / "host-versions.json"
    assert oct(os.stat(cache).st_mode & 0o777) == "0o600"


def test_a_binary_that_does_not_answer_is_asked_again(tmp_path, home):
    user, bin_dir = tmp_path / "user", tmp_path / "bin"
    user.mkdir()
    os.mkdir(home, 0o700)
    bin_dir.mkdir()
    runs = tmp_path / "claude.runs"
    broken = bin_dir / "claude"
    broken.write_text(f"#!/bin/sh\necho run >> {runs}\nexit 3\n")
    broken.chmod(0o755)
    assert _listing(user, home, bin_dir)["claude-code"]["version"] is None
    assert _listing(user, home, bin_dir)["claude-code"]["version"] is None
    assert _runs(runs) == 2, "a failed answer is never cached"
