"""The Writer is a guard of its own: a decision that would commit a secret is rejected, whatever
the Memory Agent says, including a key spelled with invisible characters or inside markup."""

from __future__ import annotations

import os

import pytest
from writer_support import admit, all_evidence, configure, decision, put, read, retain, rows, writer

from cmrunner.secrets import safety

OPENAI = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
AWS_ID = "AK" + "IA" + "IOSFODNN7" + "EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiLEAKBARE22"


@pytest.fixture
def env(home):
    return configure(home)


@pytest.mark.parametrize("operations", [
    # the two hostile decisions
    [("Keys", f"the key is {OPENAI[:9]}\u200b{OPENAI[9:20]}\u200b{OPENAI[20:]}\n")],
    # and their relatives
    [("Keys", f"**{AWS_ID[:6]}**{AWS_ID[6:]}\n")],
    [("Cloud " + AWS_ID, "the key id is in the title\n")],
    [("Secrets", f"my AWS secret is {AWS_SECRET} keep it handy\n")],
    [("Router", "my password is Tr0ub4dor&3\n")],
], ids=["zero-width", "emphasis", "key-in-title", "bare-aws-secret", "prose-password"])
def test_a_decision_that_would_commit_a_secret_is_rejected(env, operations):
    paths, cfg = env
    admit(paths, "note about my setup", "e1")
    w, port = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), *[put("preferences", title, body) for title, body in operations])))
    outcome = w.run_once()
    assert outcome.code == "SENSITIVE_CONTENT_REJECTED"
    assert "SENSITIVE_CONTENT_REJECTED" in port.rejections
    assert read(paths, "preferences") is None
    assert rows(paths, "SELECT state FROM observations") != [("processed",)]
    w.close()


def test_an_allowed_fingerprint_is_committed(env, home):
    paths, cfg = env
    body = f"deploy with the secret key {AWS_SECRET}\n"
    found = safety.scan_text(body)
    assert found
    from cmrunner.secrets import allowlist

    allowlist.add(home, found[0].fingerprint, found[0].rule_id)
    safety.configure(home, deep=False)
    try:
        admit(paths, "note", "e1")
        w, _ = writer(paths, cfg, lambda task, reads: decision(
            task, retain(all_evidence(reads), put("preferences", "Deploy", body))))
        assert w.run_once().state == "committed"
        w.close()
    finally:
        safety.configure(None, deep=False)
    assert AWS_SECRET in read(paths, "preferences")


def test_the_job_records_the_fingerprint_of_the_first_finding(env):
    """With several secrets in what a decision writes, the job's record names the first finding's
    fingerprint (the one `cm secrets allow` takes first), with the document and the clean title."""
    import json

    paths, cfg = env
    body = f"my AWS key id is {AWS_ID} and the secret is {AWS_SECRET}\n"
    found = safety.scan_text(body)
    assert len({v.fingerprint for v in found}) >= 2
    admit(paths, "note about my setup", "e1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("preferences", "Cloud", body))))
    assert w.run_once().code == "SENSITIVE_CONTENT_REJECTED"
    (rejection,), = rows(paths, "SELECT rejection FROM jobs")
    record = json.loads(rejection)
    assert (record["code"], record["fingerprint"], record["target"], record["section"]) == (
        "SENSITIVE_CONTENT_REJECTED", found[0].fingerprint, "preferences", "Cloud")
    w.close()


def test_a_secret_after_a_removal_in_the_same_decision_is_still_rejected(env):
    """Every section a decision writes is scanned, also when an operation that writes nothing (a
    removal) comes before it."""
    paths, cfg = env
    os.makedirs(paths.memory, exist_ok=True)
    with open(paths.document("preferences"), "w") as handle:
        handle.write("# Preferences\n\n## Editor\nvim\n")
    admit(paths, "note about my setup", "e1")

    def script(task, reads):
        docs = reads.inspect_memory(task["snapshot"]["handle"])["documents"]
        [ref] = [s["ref"] for d in docs for s in d["sections"] if s["title"] == "Editor"]
        return decision(task, retain(all_evidence(reads), {"op": "remove_section", "target": "preferences", "section": ref},
                                     put("preferences", "Secrets", f"my AWS secret is {AWS_SECRET} keep it handy\n")))

    w, port = writer(paths, cfg, script)
    assert w.run_once().code == "SENSITIVE_CONTENT_REJECTED"
    assert read(paths, "preferences") == "# Preferences\n\n## Editor\nvim\n"
    w.close()
