"""`cm show`: the memory directory and exactly what consumers receive, without touching storage."""

from __future__ import annotations

import json
import os
import re

import anyio
from conftest import run_cm, run_cm_terminal
from mcp_support import allow, configure, register, session, write_doc

from cmrunner.core import config as config_mod

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
    assert [n for n in os.listdir(home) if n != config_mod.CACHE_NAME] == ["config.json"]


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
    assert "\x1b[1m" in run_cm_terminal(["show"])
    assert "\x1b[" not in run_cm_terminal(["show", "--plain"])


HOSTILE_DOC = ("# Profile\n\n## Prompt\nred \x1b[31mALERT\x1b]0;owned\x07 nul\x00 del\x7f csi\x9b2J\n"
               "## Order\nabc\u202edcba\u2066x\u2069 one\u2028two \u200fmark\tend\r\n")
SHOWN = ("red ^[[31mALERT^[]0;owned^G nul^@ del^? csi\\u009b2J\n"
         "## Order\nabc\\u202edcba\\u2066x\\u2069 one\\u2028two \u200fmark\tend\n")


def test_a_hand_edited_hostile_document_is_shown_escaped_in_a_terminal(home):
    paths = configure(home)
    write_doc(paths, "profile", HOSTILE_DOC)
    for args in (["show"], ["show", "--plain"]):
        out = run_cm_terminal(args).replace("\r\n", "\n")
        assert SHOWN in out, out
        assert not any(c in out for c in "\x00\x07\x7f\x9b\u202e\u2066\u2069\u2028\r"), "no raw control reaches the terminal"
        assert "\x1b" not in out.replace("\x1b[1m", "").replace("\x1b[0m", ""), "only cm's own styling is an escape"


def test_a_pipe_still_gets_exactly_what_consumers_receive(home):
    paths = configure(home)
    write_doc(paths, "profile", HOSTILE_DOC)
    out = run_cm(["show"]).stdout.decode()
    assert HOSTILE_DOC.split("## Prompt\n", 1)[1] in out, "a pipe gets the bytes unchanged (click strips nothing)"


def test_json_carries_the_same_text_and_the_notes(home, tmp_path):
    paths = configure(home, scopes=["global"])
    project = register(paths, str(tmp_path / "p"), "P")
    write_doc(paths, "preferences", "# Preferences\n\n## Editor\nVim.\n")
    plain = run_cm(["show", "--plain", "--workspace", project.path]).stdout.decode()
    proc = run_cm(["show", "--json", "--workspace", project.path])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["memoryDirectory"] == paths.memory and report["contexts"] == ["global"]
    assert report["empty"] is False and "Vim." in report["text"]
    assert report["notes"] == [f"{project.scope} (P) is not in disclosure.allowedScopes: consumers do not receive "
                               "its document"]
    assert _body(plain.split("\n\n", 1)[1]) == _body(report["text"])
