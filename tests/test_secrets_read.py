"""No memory text that looks like a secret leaves cm: hook injection, `cm show`, MCP reads and
resources deliver placeholders instead; `cm import` and `cm flush` never send a planted secret to
the (fake) model. Real subprocesses, real files, the SDK's MCP client, the loopback fake model."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import anyio
from agent_support import configure_remote, policy
from conftest import CM, Transcript, event, hook_env, run_cm, run_hook
from mcp_support import configure, session, write_doc
from writer_support import admit

from cmrunner.secrets import _cache, withhold
from cmrunner.synthetic import fakemodel

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiLEAKBARE22"
AWS_ID = "AK" + "IA" + "IOSFODNN7" + "EXAMPLE"
OPENAI = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
DOCUMENT = ("# Preferences\n\n## Editor\nVim with tabs.\n\n"
            f"## Cloud\nmy AWS secret is {AWS_SECRET} keep it handy\n\n"
            f"## Region {AWS_ID}\nthat is the key id\n\n"
            f"## Tokens\nthe key is {OPENAI[:9]}\u200b{OPENAI[9:]}\n\n"
            "## Tests\nRun pytest -q before each commit.\n")
PIECES = [AWS_SECRET, AWS_SECRET[:16], AWS_SECRET[-16:], AWS_ID, AWS_ID[:10], OPENAI[9:], OPENAI[-16:]]


def assert_clean(output: str | bytes) -> None:
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    for piece in PIECES:
        assert piece not in text, f"a secret piece leaked: {piece[:4]}…"


def assert_withheld(text: str) -> None:
    assert "Vim with tabs." in text and "Run pytest -q before each commit." in text  # the rest is delivered
    assert "[cm withheld section 'Cloud' of preferences.md" in text
    assert "[cm withheld section 'Tokens' of preferences.md" in text
    assert "[cm withheld section 3 (its heading is withheld too) of preferences.md" in text
    assert "cm secrets allow" in text


def _planted(home: str):
    paths = configure(home)
    write_doc(paths, "preferences", DOCUMENT)
    return paths


def _start(home: str, tmp_path, workdir: str) -> dict:
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    proc = run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m"))
    assert proc.returncode == 0, proc.stderr.decode()
    assert_clean(proc.stdout + proc.stderr)
    return json.loads(proc.stdout)


def test_session_start_injection_withholds_secret_sections(home, tmp_path, workdir):
    paths = _planted(home)
    out = _start(home, tmp_path, workdir)
    assert_withheld(out["hookSpecificOutput"]["additionalContext"])
    assert "withheld 3 memory section(s)" in out["systemMessage"]
    assert open(paths.document("preferences"), encoding="utf-8").read() == DOCUMENT  # never rewritten


def test_the_hook_uses_the_deep_findings_cache_and_stays_light(home, tmp_path, workdir):
    paths = _planted(home)
    os.makedirs(paths.runtime, mode=0o700, exist_ok=True)
    # "artifactory" style value: only the maintained detector (deep scan) knows it
    write_doc(paths, "profile", "# Profile\n\n## Repo\nartifactory password AP6" + "Lx9qZk2mW\n\n## Name\nAda\n")
    report = withhold.refresh(paths)
    assert {t for t, _, found in report if found} == {"profile", "preferences"}
    cache = open(_cache.path(paths), encoding="utf-8").read()
    assert "Lx9qZk2mW" not in cache and "Repo" not in cache and AWS_SECRET not in cache
    transcript = Transcript(str(tmp_path / "t.jsonl"), "s-1")
    proc = subprocess.run([sys.executable, "-X", "importtime", CM, "hook", "codex", "--home", home],
                          input=json.dumps(event("SessionStart", transcript, workdir, source="startup")).encode(),
                          capture_output=True, env=hook_env(), timeout=30)
    assert proc.returncode == 0
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.decode().splitlines()
               if line.startswith("import time:") and "|" in line}
    assert "cmrunner.secrets.withhold" in modules
    assert not modules & {"detect_secrets", "yaml", "requests", "cmrunner.secrets._deepscan"}
    assert "cmrunner.secrets.safety" not in modules  # a cache hit needs no rule at all
    block = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Lx9qZk2mW" not in block and "[cm withheld section 'Repo' of profile.md" in block and "Ada" in block
    assert_withheld(block)


def test_an_allowed_fingerprint_is_delivered(home, tmp_path, workdir):
    _planted(home)
    listing = run_cm(["secrets", "list"], env=hook_env(COMMON_MEMORY_HOME=home))
    assert listing.returncode == 0, listing.stderr
    assert_clean(listing.stdout + listing.stderr)
    line = next(line for line in listing.stdout.decode().splitlines() if "'Cloud'" in line)
    fingerprint = line.split()[-1]
    allowed = run_cm(["secrets", "allow", fingerprint], env=hook_env(COMMON_MEMORY_HOME=home))
    assert allowed.returncode == 0, allowed.stderr
    block = _out_block(home, tmp_path, workdir)
    assert "my AWS secret is" in block and "[cm withheld section 'Tokens'" in block


def _out_block(home: str, tmp_path, workdir: str) -> str:
    transcript = Transcript(str(tmp_path / "t2.jsonl"), "s-2")
    proc = run_hook(home, event("SessionStart", transcript, workdir, source="startup", model="m"))
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_cm_show_withholds_and_names_the_sections(home):
    _planted(home)
    proc = run_cm(["show"], env=hook_env(COMMON_MEMORY_HOME=home))
    assert proc.returncode == 0, proc.stderr
    assert_clean(proc.stdout + proc.stderr)
    out = proc.stdout.decode()
    assert_withheld(out)
    assert "section 'Cloud' of preferences was withheld (secret.credential)" in out


def test_mcp_memory_read_and_resources_withhold(home):
    _planted(home)

    async def reads() -> tuple[str, str, dict]:
        async with session(home, ["--capability", "read", "--global"]) as client:
            tool = await client.call_tool("memory_read", {})
            resource = await client.read_resource("common-memory://memory/global")
            return tool.content[0].text, resource.contents[0].text, tool.structured_content

    text, resource, structured = anyio.run(reads)
    for delivered in (text, resource, json.dumps(structured)):
        assert_clean(delivered)
        assert_withheld(delivered)


def test_import_and_flush_never_send_a_planted_secret(home, tmp_path):
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        paths, _ = configure_remote(home, fm.base_url)
        env = hook_env(COMMON_MEMORY_HOME=home)
        notes = tmp_path / "notes.md"
        notes.write_text(f"# Notes\n\nremember the staging secret key {AWS_SECRET}\n")
        imported = run_cm(["import", str(notes), "--no-wait"], env=env)
        assert imported.returncode == 1 and b"SENSITIVE_CONTENT_REJECTED" in imported.stderr
        assert_clean(imported.stdout + imported.stderr)
        # the user turn, and a harmless one
        admit(paths, f"my AWS secret is {AWS_SECRET} keep it handy", "e1")
        admit(paths, "I prefer tabs in Go.", "e2", batch="batch-2")
        flushed = run_cm(["flush"], env=env, timeout=120)
        assert_clean(flushed.stdout + flushed.stderr)
        received = open(fm.log_path, "rb").read() if os.path.exists(fm.log_path) else b""
        assert fm.model_requests(), "the harmless turn reached the model"
        # a hand-edited secret in memory: the Writer sends the document with that section withheld
        write_doc(paths, "preferences", DOCUMENT)
        admit(paths, "I like short answers.", "e3", batch="batch-3")
        again = run_cm(["flush"], env=env, timeout=120)
        assert_clean(again.stdout + again.stderr)
        received = open(fm.log_path, "rb").read()
    assert_clean(received)
    assert "tabs in Go" in received.decode()
    db = b"".join(open(p, "rb").read() for p in (paths.db, paths.db + "-wal") if os.path.exists(p))
    state = subprocess.run([CM, "status"], capture_output=True, env=env, timeout=60)
    assert_clean(state.stdout + state.stderr)
    assert hashlib.sha256(AWS_SECRET.encode()).hexdigest() not in received.decode()
    assert AWS_SECRET.encode() in db  # quarantined, kept until purged (see test_secrets_cli.py)
    preferences = open(paths.document("preferences"), encoding="utf-8").read()
    assert preferences == DOCUMENT
