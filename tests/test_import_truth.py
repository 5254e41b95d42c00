"""A failed or dead import is not "imported": plans count only what committed.

Through the real CLI, the real Writer loop and the loopback fake model reached at a wrong URL (no
``/v1``: every request is a 404), then at the right one. The files are written here."""

from __future__ import annotations

import os

from agent_support import configure_remote, policy
from conftest import hook_env, run_cm
from mcp_support import rows

from cmrunner.core import config as config_mod
from cmrunner.synthetic import fakemodel


def _write(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _cm(args: list[str], home: str, user: str | None = None) -> tuple[int, str]:
    env = hook_env(COMMON_MEMORY_HOME=home, **({"HOME": user, "CODEX_HOME": ""} if user else {}))
    proc = run_cm(args, env=env, timeout=300)
    return proc.returncode, proc.stdout.decode() + proc.stderr.decode()


def _fix_url(home: str, base_url: str) -> None:
    data = config_mod.load(home).data
    data["remote"]["baseUrl"] = base_url
    config_mod.save(home, data)


def _dead_jobs(paths) -> list[str]:
    return [r[0] for r in rows(paths, "SELECT id FROM jobs WHERE state = 'dead' ORDER BY id")]


def test_a_dead_import_plans_as_failed_with_its_retry_and_importing_again_retries_it(home, tmp_path):
    path = _write(str(tmp_path / "notes.md"), "# Notes\n\n## Editor\n\nI use helix marker-a-\n")
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, _ = configure_remote(home, fm.base_url.removesuffix("/v1"))
        code, out = _cm(["import", path, "--yes"], home)
        assert code == 1 and "part 1/1: dead" in out and "complete: false" in out, out
        [job] = _dead_jobs(paths)
        code, plan = _cm(["import", path, "--dry-run"], home)
        assert code == 0, plan
        assert "unchanged" not in plan and "0 bytes to send" not in plan, plan
        assert plan.startswith("plan: nothing new to send, 42 bytes in the file; 1 failed part to retry"), plan
        assert f"last import: failed — run `cm retry {job}` (INVALID_RESPONSE); importing again retries it\n" in plan
        assert "no section changed since this file's last import (2 sections)\n" in plan, plan
        assert "~0 tokens" not in plan and "fixed instructions ~4,400 + your text with its framing ~" in plan, plan

        _fix_url(home, fm.base_url)
        queued = rows(paths, "SELECT COUNT(*) FROM observations")
        code, again = _cm(["import", path, "--yes"], home)
        assert code == 0 and "retried 1 failed part" in again and again.endswith("complete: true\n"), again
        assert rows(paths, "SELECT COUNT(*) FROM observations") == queued  # the same part, not a second copy
        assert _dead_jobs(paths) == []
        code, plan = _cm(["import", path, "--dry-run"], home)
        assert "0 of 2 sections (0 edited, 0 added, 2 unchanged); 0 bytes to send" in plan and "\nlast import: " not in plan
        assert "plan: nothing new to send, 42 bytes in the file; ~0 tokens to process" in plan, plan


def test_from_a_source_a_dead_file_is_failed_not_unchanged_and_the_result_names_it(home, tmp_path):
    user = str(tmp_path / "user")
    _write(os.path.join(user, ".codex", "memories", "MEMORY.md"), "# Tools\n\n## Shell\n\nI use zellij marker-b-\n")
    with fakemodel.running(str(tmp_path / "fm"), policy("ignore")) as fm:
        paths, _ = configure_remote(home, fm.base_url.removesuffix("/v1"))
        code, out = _cm(["import", "--from", "codex", "--yes"], home, user)
        [job] = _dead_jobs(paths)
        assert code == 1, out
        assert (f"codex:MEMORY -> global: failed — run `cm retry {job}` (INVALID_RESPONSE); see `cm status` "
                "(1 of 1 part)\n") in out, out
        code, plan = _cm(["import", "--from", "codex", "--dry-run"], home, user)
        assert "plan for codex: 1 file to import" in plan, plan
        assert (f"codex:MEMORY [personal] -> global: failed — run `cm retry {job}` (INVALID_RESPONSE); "
                "importing again retries it, 1 part to retry, ~") in plan, plan
        assert "unchanged" not in plan and "0 of " not in plan

        _fix_url(home, fm.base_url)
        code, out = _cm(["import", "--from", "codex", "--yes"], home, user)
        assert code == 0 and "codex:MEMORY -> global: processed; nothing was kept" in out, out
        code, plan = _cm(["import", "--from", "codex", "--dry-run"], home, user)
        assert "codex:MEMORY [personal] -> global: unchanged, nothing to send (" in plan and "plan for codex: 0 files" in plan, plan


def test_a_queued_import_not_yet_processed_is_not_unchanged(home, tmp_path):
    from mcp_support import configure

    configure(home)  # no model: what is queued stays queued
    user = str(tmp_path / "user")
    _write(os.path.join(user, ".codex", "memories", "MEMORY.md"), "# Tools\n\nI use zellij marker-c-\n")
    path = _write(str(tmp_path / "notes.md"), "# Notes\n\nI use helix marker-d-\n")
    code, out = _cm(["import", path, "--no-wait"], home)
    assert code == 0, out
    code, plan = _cm(["import", path, "--dry-run"], home)
    assert "last import: queued, not yet processed; importing again runs the Memory Agent on it\n" in plan, plan
    assert "unchanged" not in plan
    code, out = _cm(["import", "--from", "codex", "--no-wait", "--yes"], home, user)
    assert code == 0, out
    code, plan = _cm(["import", "--from", "codex", "--dry-run"], home, user)
    assert ("codex:MEMORY [personal] -> global: queued, not yet processed; importing again runs the Memory Agent "
            f"on it ({os.path.join(user, '.codex', 'memories', 'MEMORY.md')})\n") in plan, plan
    assert "plan for codex: 1 file to import" in plan and "unchanged" not in plan


POLICIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support", "import_policy.py")


def test_an_import_result_names_the_sections_and_a_file_line_only_the_files_own_tokens(home, tmp_path):
    """Issue 36: outcomes name documents *and sections* (capped with "and N more"), and a file's
    plan line counts only its own text: the fixed instructions are named once, in the total."""
    import re

    user = str(tmp_path / "user")
    facts = "".join(f"\n## {name}\n\nFACT-{name}: likes {name} a lot\n" for name in ("a", "b", "c", "d", "e"))
    memory = _write(os.path.join(user, ".codex", "memories", "MEMORY.md"), "# About me\n" + facts)
    with fakemodel.running(str(tmp_path / "fm"), policy(f"{POLICIES}:remember_facts")) as fm:
        configure_remote(home, fm.base_url)
        code, plan = _cm(["import", "--from", "codex", "--dry-run"], home, user)
        assert code == 0, plan
        [total] = re.findall(r"~([\d,]+) tokens to process: fixed instructions ~([\d,]+) \+ your text with its "
                             r"framing ~([\d,]+)", plan)
        tokens, fixed, text = (int(n.replace(",", "")) for n in total)
        assert tokens == fixed + text and text < fixed, plan
        size = os.path.getsize(memory)
        line = (f"  codex:MEMORY [personal] -> global: new, 1 part, {size:,} of {size:,} bytes to send, "
                f"~{text:,} tokens of text ({memory})\n")
        assert line in plan, plan  # the file's own tokens, not the ~4,400 every request carries
        assert f"~{tokens:,} tokens (" not in plan

        code, out = _cm(["import", "--from", "codex", "--yes"], home, user)
        assert code == 0, out
        [named] = re.findall(r"\ncodex:MEMORY -> global: profile / Fact (\w) added, profile / Fact (\w) added, "
                             r"profile / Fact (\w) added and 2 more \(`cm history`\)\n", out)
        assert len(set(named)) == 3 and set(named) <= set("abcde"), out  # commit order, three of the five
        assert "kept in" not in out

        single = _write(str(tmp_path / "more.md"), "# More\n\n## f\n\nFACT-f: likes f a lot\n")
        code, out = _cm(["import", single], home)
        assert code == 0 and "result: profile / Fact f added\n" in out, out
        code, out = _cm(["import", single], home)  # unchanged: nothing ran, so no result is claimed
        assert code == 0 and "result:" not in out, out
