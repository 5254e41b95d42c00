"""`cm secrets`, the quarantine's retention and purge, and the reports of `cm status` / `cm doctor`."""

from __future__ import annotations

import json
import time

from conftest import hook_env, run_cm
from mcp_support import write_doc
from writer_support import admit, all_evidence, configure, decision, rows, writer

from cmrunner.writer_proc import housekeeping

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiLEAKBARE22"
IGNORE = {"kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": [], "reason": "r"}


def _cm(home: str, *args: str):
    proc = run_cm(list(args), env=hook_env(COMMON_MEMORY_HOME=home))
    out = (proc.stdout + proc.stderr).decode()
    assert AWS_SECRET not in out and AWS_SECRET[:12] not in out
    return proc, out


def _quarantine_a_secret(home: str):
    paths, cfg = configure(home)
    admit(paths, f"my AWS secret is {AWS_SECRET} keep it handy", "e1")
    admit(paths, "I like tea.", "e2")
    w, port = writer(paths, cfg, lambda task, reads: decision(task, dict(IGNORE, evidence=all_evidence(reads))))
    assert w.run_once().state == "ignored"
    assert rows(paths, "SELECT issue FROM observations WHERE text LIKE 'my AWS%'") == [("SENSITIVE_INPUT",)]
    return paths, cfg, w


def test_quarantined_secret_text_follows_the_seven_day_retention(home):
    paths, _, w = _quarantine_a_secret(home)
    housekeeping.at_drain_start(paths, w.conn, w.cfg, w.now)
    assert rows(paths, "SELECT COUNT(*) FROM observations WHERE text IS NOT NULL AND state = 'quarantined'") == [(1,)]
    w.now = lambda: int(time.time() * 1000) + 7 * 24 * 3600 * 1000 + 1000
    housekeeping.at_drain_start(paths, w.conn, w.cfg, w.now)
    assert rows(paths, "SELECT text, state, issue FROM observations WHERE id = 1") == [(None, "quarantined",
                                                                                        "SENSITIVE_INPUT")]
    w.close()


def test_purge_quarantine_deletes_the_text_now(home):
    paths, _, w = _quarantine_a_secret(home)
    w.close()
    proc, out = _cm(home, "secrets", "list")
    assert proc.returncode == 0 and "1 quarantined observation(s)" in out
    proc, out = _cm(home, "secrets", "purge-quarantine")
    assert proc.returncode == 0 and "deleted the text of 1 quarantined observation(s)" in out
    assert rows(paths, "SELECT text, issue FROM observations WHERE id = 1") == [(None, "SENSITIVE_INPUT")]
    assert rows(paths, "SELECT text FROM observations WHERE id = 2") == [("I like tea.",)]  # not quarantined
    proc, out = _cm(home, "secrets", "purge-quarantine")
    assert "deleted the text of 0" in out


def test_list_allow_disallow_and_bad_fingerprints(home):
    paths, _ = configure(home)
    write_doc(paths, "preferences", f"# Preferences\n\n## Cloud\ndeploy with the secret key {AWS_SECRET}\n\n## Tea\nGreen.\n")
    proc, out = _cm(home, "secrets", "list")
    assert proc.returncode == 0
    line = next(line for line in out.splitlines() if "section 'Cloud'" in line)
    assert "preferences" in line and "secret.high_entropy" in line and "withheld" in line
    assert f"  {AWS_SECRET[0]}…{AWS_SECRET[-1]} ({len(AWS_SECRET)})  " in line  # the masked matched span
    fingerprint = line.split()[-1]
    proc, out = _cm(home, "secrets", "allow", fingerprint)
    assert proc.returncode == 0 and "allowed" in out
    proc, out = _cm(home, "secrets", "list")
    assert "allowed" in next(line for line in out.splitlines() if "section 'Cloud'" in line)
    proc, out = _cm(home, "secrets", "disallow", fingerprint)
    assert proc.returncode == 0 and "no longer allowed" in out
    proc, out = _cm(home, "secrets", "allow", "nope")
    assert proc.returncode == 1 and out.startswith("cm: INVALID_FINGERPRINT: ") and "Traceback" not in out


def test_list_json_names_rule_preview_and_fingerprint_and_allow_keeps_working(home):
    paths, _ = configure(home)
    write_doc(paths, "preferences", f"# Preferences\n\n## Cloud\ndeploy with the secret key {AWS_SECRET}\n\n"
                                    "## Router\nmy password is Tr0ub4dor&3\n\n## Tea\nGreen.\n")
    proc, out = _cm(home, "secrets", "list", "--json")
    assert proc.returncode == 0 and "Tr0ub4dor" not in out
    report = json.loads(out)
    found = {row["section"]: row for row in report["findings"]}
    assert set(found) == {"section 'Cloud'", "section 'Router'"}
    cloud, router = found["section 'Cloud'"], found["section 'Router'"]
    assert (cloud["rule"], cloud["preview"], cloud["allowed"]) == ("secret.high_entropy", "w…2 (38)", False)
    assert (router["rule"], router["preview"]) == ("secret.credential", "T…3 (11)")
    assert len(router["fingerprint"]) == 16 and report["quarantinedSecrets"] is None
    assert _cm(home, "secrets", "allow", router["fingerprint"])[0].returncode == 0
    report = json.loads(_cm(home, "secrets", "list", "--json")[1])
    assert [row["allowed"] for row in report["findings"] if row["section"] == "section 'Router'"] == [True]
    shown = run_cm(["show"], env=hook_env(COMMON_MEMORY_HOME=home)).stdout.decode()
    assert "my password is Tr0ub4dor&3" in shown and "withheld section 'Cloud'" in shown


def test_status_and_doctor_report_withheld_sections(home):
    paths, _ = configure(home)
    write_doc(paths, "preferences", f"# Preferences\n\n## Cloud\ndeploy with the secret key {AWS_SECRET}\n\n## Tea\nGreen.\n")
    proc, out = _cm(home, "status")
    assert "withheld" in out and "preferences section 'Cloud' (secret.high_entropy)" in out
    proc, out = _cm(home, "doctor")
    assert "preferences section 'Cloud' (secret.high_entropy)" in out
