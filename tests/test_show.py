"""`cm show`: the memory directory and exactly what consumers receive, without touching storage."""

from __future__ import annotations

import os
import pty
import re
import subprocess

import anyio
from conftest import CM, hook_env, run_cm
from mcp_support import allow, configure, register, session, write_doc

TOKEN = re.compile(r"common-memory-data [0-9a-f]+>>>")


def _body(text: str) -> str:
    """The consumer block with its random delimiter token neutralised."""
    return TOKEN.sub("common-memory-data TOKEN>>>", text)


def test_plain_output_is_what_memory_read_returns(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "proj"), "Proj")
    allow(home, project.scope)
    write_doc(paths, "profile", "# Profile\n\n## Name\nAda.\n")
    write_doc(paths, project.scope, "# Project\n\n## Build\nUse make.\n")
    proc = run_cm(["show", "--workspace", project.path])
    assert proc.returncode == 0, proc.stderr
    head, block = proc.stdout.decode().split("\n\n", 1)
    assert head == f"memory directory: {paths.memory}\ncontexts: global, {project.scope}"
    assert "\x1b[" not in proc.stdout.decode()

    async def memory_read() -> str:
        args = ["--capability", "read", "--global", "--workspace", project.path]
        async with session(home, args) as client:
            return (await client.call_tool("memory_read", {})).content[0].text

    assert _body(block) == _body(anyio.run(memory_read))
    assert "Ada." in block and "Use make." in block


def test_absent_storage_is_shown_empty_and_not_created(home):
    configure(home)
    proc = run_cm(["show"])
    assert proc.returncode == 0
    assert "(no memory is stored yet for these scopes)" in proc.stdout.decode()
    assert os.listdir(home) == ["config.json"]


def test_scopes_left_out_are_explained(home, tmp_path):
    paths = configure(home, scopes=["global"])
    project = register(paths, str(tmp_path / "p"), "P")
    write_doc(paths, project.scope, "# Project\n\n## Hidden\nNOT-DISCLOSED\n")
    proc = run_cm(["show", "--workspace", project.path])
    out = proc.stdout.decode()
    assert proc.returncode == 0 and "NOT-DISCLOSED" not in out
    assert f"note: {project.scope} (P) is not in disclosure.allowedScopes" in out
    configure(home, scopes=[project.scope])
    out = run_cm(["show"]).stdout.decode()
    assert "contexts: none" in out and "note: global is not in disclosure.allowedScopes" in out


def test_workspace_errors(home, tmp_path):
    configure(home)
    for path, code in ((str(tmp_path), "UNREGISTERED_WORKSPACE"), ("D:\\work", "INVALID_WORKSPACE_PATH"),
                       ("relative/dir", "INVALID_WORKSPACE_PATH")):
        proc = run_cm(["show", "--workspace", path])
        assert proc.returncode == 1 and proc.stderr.decode().startswith(f"cm: {code}: ")


def test_terminal_output_is_styled_unless_plain(home):
    configure(home)

    def in_terminal(args: list[str]) -> str:
        leader, follower = pty.openpty()
        try:
            proc = subprocess.run([CM, *args], stdout=follower, stderr=subprocess.PIPE, env=hook_env(), timeout=30)
            assert proc.returncode == 0, proc.stderr
            os.close(follower)
            follower = -1
            chunks = []
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode()
        finally:
            os.close(leader)
            if follower >= 0:
                os.close(follower)

    assert "\x1b[1m" in in_terminal(["show"])
    assert "\x1b[" not in in_terminal(["show", "--plain"])
