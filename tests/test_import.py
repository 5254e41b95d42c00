"""`cm import <file.md>`: every admission rule, identity, the Writer loop and the import guard."""

from __future__ import annotations

import json
import os

import pytest
from conftest import hook_env, run_cm, wait_no_drain
from mcp_support import allow, configure, register, retain_template, rows, script_file
from writer_support import check_import_guard, read, user_said_diet

from cmrunner.core import config as config_mod

NOTES = "\ufeff# Notes\r\n\r\nI write Rust.\r\n\r\n## Tools\r\n\r\n- neovim\r\n- tmux\r\n\r\n```sh\r\nmake\r\n```\r\n"


def _file(tmp_path, name: str = "notes.md", data: bytes | str = NOTES) -> str:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return str(path)


def _observations(paths) -> list[tuple]:
    return rows(paths, "SELECT namespace, entry_id, text, scope, source, state FROM observations ORDER BY id")


def _fails(args: list[str], code: str) -> str:
    proc = run_cm(["import", *args])
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith(f"cm: {code}: "), (code, err)
    return err


def test_every_refusal_has_its_code_and_queues_nothing(home, tmp_path):
    good = _file(tmp_path)
    _fails([good], "IMPORT_DISABLED")  # the default configuration allows user turns only
    paths = configure(home, maxTotalBytes=900)
    project = register(paths, str(tmp_path / "proj"), "Proj")  # registered, not allowed
    os.symlink(good, tmp_path / "link.md")
    os.mkdir(tmp_path / "folder.md")
    os.mkfifo(tmp_path / "pipe.md")
    cases = [
        ([str(tmp_path / "missing.md")], "FILE_NOT_FOUND"),
        ([_file(tmp_path, "notes.txt")], "UNSUPPORTED_FILE_TYPE"),
        ([str(tmp_path / "link.md")], "UNSUPPORTED_FILE_TYPE"),
        ([str(tmp_path / "folder.md")], "UNSUPPORTED_FILE_TYPE"),
        ([str(tmp_path / "pipe.md")], "UNSUPPORTED_FILE_TYPE"),
        ([_file(tmp_path, "latin.md", "caf\xe9".encode("latin-1"))], "INVALID_ENCODING"),
        ([_file(tmp_path, "nul.md", b"# a\x00b\n")], "INVALID_ENCODING"),
        ([_file(tmp_path, "empty.md", " \r\n\t\n")], "EMPTY_DOCUMENT"),
        ([good, "--author", "robot"], "INVALID_IMPORT_AUTHOR"),
        ([good, "--label", "x" * 65], "INVALID_IMPORT_LABEL"),
        ([good, "--label", "bad\nlabel"], "INVALID_IMPORT_LABEL"),
        ([good, "--workspace", str(tmp_path / "elsewhere")], "UNREGISTERED_WORKSPACE"),
        ([good, "--workspace", "C:\\Users\\me\\proj"], "INVALID_WORKSPACE_PATH"),
        ([good, "--workspace", project.path], "UNAUTHORIZED_SCOPE"),
        ([_file(tmp_path, "big.md", "# Big\n\n" + "word " * 200)], "IMPORT_CHUNK_TOO_LARGE"),
    ]
    for args, code in cases:
        _fails(args + ["--no-wait"], code)
    secret = _file(tmp_path, "secret.md", "# Keys\n\nmy password: hunter2xyz\n")
    err = _fails([secret, "--no-wait"], "SENSITIVE_CONTENT_REJECTED")
    # Under the 900-byte cap this file is two parts; the refusal names the part that holds the secret.
    assert "part 2/2: secret.credential" in err and "hunter2" not in err
    assert _observations(paths) == []


def test_one_observation_with_envelope_and_block_index(home, tmp_path):
    paths = configure(home)
    proc = run_cm(["import", _file(tmp_path), "--no-wait", "--author", "agent", "--label", "ChatGPT visible memory"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "into global: queued" in out and "part 1/1: pending" in out and out.endswith("complete: false\n")
    (namespace, entry, text, scope, source, state), = _observations(paths)
    envelope = json.loads(text)
    assert (entry, scope, source, state) == ("part-1", "global", "document_import", "pending")
    assert list(envelope) == ["kind", "importId", "sourceLabel", "declaredAuthor", "fileName", "contentDigest",
                              "part", "headingPath", "blocks", "text"]
    expected_text = NOTES.lstrip("\ufeff").replace("\r\n", "\n")
    assert envelope["text"] == expected_text  # BOM dropped, CRLF normalised, nothing else changed
    assert envelope["importId"] == "md-" + envelope["contentDigest"].split(":")[1]
    assert namespace == json.dumps(["markdown", "v2", envelope["importId"], "global"], separators=(",", ":")).join(
        ["import:", ""])
    assert (envelope["sourceLabel"], envelope["declaredAuthor"], envelope["fileName"]) == \
        ("ChatGPT visible memory", "agent", "notes.md")
    assert envelope["part"] == {"index": 1, "count": 1}
    assert envelope["blocks"] == [
        {"kind": "heading", "lines": [1, 1], "level": 1, "headingPath": []},
        {"kind": "paragraph", "lines": [3, 3], "headingPath": ["Notes"]},
        {"kind": "heading", "lines": [5, 5], "level": 2, "headingPath": ["Notes"]},
        {"kind": "list", "lines": [7, 9], "headingPath": ["Notes", "Tools"]},
        {"kind": "code", "lines": [10, 12], "headingPath": ["Notes", "Tools"]},
    ]
    lines = expected_text.splitlines()
    assert lines[6:8] == ["- neovim", "- tmux"] and lines[9] == "```sh"


def test_identity_is_the_content_digest_within_the_context(home, tmp_path):
    paths = configure(home)
    project = register(paths, str(tmp_path / "proj"), "Proj")
    allow(home, project.scope)
    first = run_cm(["import", _file(tmp_path, "a.md"), "--no-wait", "--label", "first"])
    assert first.returncode == 0
    copy = run_cm(["import", _file(tmp_path, "b.markdown"), "--no-wait", "--label", "second", "--author", "user"])
    assert copy.returncode == 0 and "duplicate of an earlier import" in copy.stdout.decode()
    assert len(_observations(paths)) == 1
    assert json.loads(_observations(paths)[0][2])["sourceLabel"] == "first"  # the original metadata stays
    changed = run_cm(["import", _file(tmp_path, "c.md", NOTES + "\nOne more line.\n"), "--no-wait"])
    assert "queued" in changed.stdout.decode()
    in_project = run_cm(["import", _file(tmp_path, "a.md"), "--no-wait", "--workspace", project.path])
    assert "into " + project.scope + ": queued" in in_project.stdout.decode()
    assert [r[3] for r in _observations(paths)] == ["global", "global", project.scope]


def test_waits_for_the_writer_and_reports_each_part(home, tmp_path):
    paths = configure(home)
    env = hook_env(CM_TEST_AGENT_SCRIPT=script_file(str(tmp_path), [retain_template("Imported note {first}")]))
    proc = run_cm(["import", _file(tmp_path)], env=env)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert "part 1/1: processed; retained in profile" in out and out.endswith("complete: true\n")
    assert "Imported note" in read(paths, "profile")
    again = run_cm(["import", _file(tmp_path, "renamed.md")], env=env)
    assert again.returncode == 0 and "duplicate" in again.stdout.decode() and "complete: true" in again.stdout.decode()
    assert len(_observations(paths)) == 1


def test_without_a_model_the_import_stays_queued_and_exits_1(home, tmp_path):
    paths = configure(home)
    proc = run_cm(["import", _file(tmp_path)])
    assert proc.returncode == 1
    assert "part 1/1: pending" in proc.stdout.decode() and "no model is configured" in proc.stderr.decode()
    assert [r[5] for r in _observations(paths)] == ["pending"]


def test_a_quarantined_part_is_final_and_exits_1(home, tmp_path):
    paths = configure(home)
    assert run_cm(["import", _file(tmp_path), "--no-wait"]).returncode == 0
    cfg = config_mod.load(home)
    cfg.data["disclosure"]["allowedProvenance"] = ["user_explicit"]
    config_mod.save(home, cfg.data)
    env = hook_env(CM_TEST_AGENT_SCRIPT=script_file(str(tmp_path), [retain_template("never {first}")]))
    wait_no_drain(home)  # the --no-wait drain had no model; a flush would only follow it
    # The Writer quarantines the unauthorised provenance before any model call.
    assert run_cm(["flush"], env=env).returncode == 1
    configure(home)
    proc = run_cm(["import", _file(tmp_path)], env=env)
    out = proc.stdout.decode()
    assert proc.returncode == 1
    assert "part 1/1: quarantined (UNAUTHORIZED_PROVENANCE)" in out and "change the file" in out
    assert read(paths, "profile") is None


@pytest.mark.parametrize("overwrite", [True, False])
def test_import_guard_appends_but_never_replaces_user_sections(home, tmp_path, overwrite):
    paths = configure(home)
    cfg = config_mod.load(home)
    before = user_said_diet(paths, cfg)
    proc = run_cm(["import", _file(tmp_path, data="# Notes\n\nThe user eats fish.\n"), "--no-wait"])
    assert proc.returncode == 0
    check_import_guard(paths, cfg, before, "Imported from notes.md", overwrite)
