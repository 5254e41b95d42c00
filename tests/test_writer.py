"""The Writer with a scripted Memory Agent: commits, rejections, fencing, outcomes, forget."""

from __future__ import annotations

import json
import os

import pytest
from writer_support import admit, all_evidence, configure, decision, put, read, retain, rows, writer

from cmrunner.agentrt.interface import AgentError
from cmrunner.capture import observations
from cmrunner.core import store
from cmrunner.core.errors import CmError
from cmrunner.writer_proc import jobs


@pytest.fixture
def env(home):
    return configure(home)


def test_retain_commits_markdown_receipt_and_links(env):
    paths, cfg = env
    oid = admit(paths, "I prefer tabs over spaces in Go.", "e1")
    w, port = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("preferences", "Indentation", "Tabs in Go.\n"))))
    outcome = w.run_once()
    assert outcome.state == "committed"
    assert read(paths, "preferences") == "# Preferences\n\n## Indentation\nTabs in Go.\n"
    assert rows(paths, "SELECT state FROM observations") == [("processed",)]
    assert rows(paths, "SELECT state FROM jobs") == [("done",)]
    assert rows(paths, "SELECT source_id FROM associations WHERE target = 'preferences'") == [(oid,)]
    receipt_path = os.path.join(paths.receipts, f"{outcome.job_id}.json")
    receipt = open(receipt_path).read()
    assert "Tabs" not in receipt and "Indentation" not in receipt and "I prefer" not in receipt
    assert json.loads(receipt)["observationIds"] == [oid]
    assert os.listdir(paths.transactions) == []
    assert w.run_once() is None
    w.close()


def test_ignore_commits_only_the_database_side(env):
    paths, cfg = env
    admit(paths, "what time is it?", "e1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, {
        "kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": all_evidence(reads), "reason": "r"}))
    assert w.run_once().state == "ignored"
    assert read(paths, "profile") is None and read(paths, "preferences") is None
    assert rows(paths, "SELECT COUNT(*) FROM receipts") == [(1,)]
    w.close()


def test_rejected_decision_retries_with_backoff_and_keeps_the_batch(env):
    paths, cfg = env
    admit(paths, "remember this", "e1")
    w, port = writer(paths, cfg, lambda task, reads: decision(task, retain(["ev_999"], put("profile", "X", "y\n"))))
    outcome = w.run_once()
    assert (outcome.state, outcome.code) == ("retry", "INVALID_EVIDENCE_REFERENCE")
    assert port.rejections == ["INVALID_EVIDENCE_REFERENCE"]
    (state, retries, available, updated), = rows(paths, "SELECT state, retries, available, updated_at FROM jobs")
    assert (state, retries) == ("retry", 1) and available - updated == 1000
    assert rows(paths, "SELECT state FROM observations") == [("claimed",)]
    assert read(paths, "profile") is None
    assert w.run_once() is None  # backoff is not bypassed
    w.close()


@pytest.mark.parametrize(("body", "code"), [
    ("text\n## Smuggled\nmore\n", "INVALID_SECTION_BODY"),
    ("my api_key = sk-abcdefghijklmnopqrstuvwx\n", "SENSITIVE_CONTENT_REJECTED"),
])
def test_result_checks_reject_the_whole_decision(env, body, code):
    paths, cfg = env
    admit(paths, "note", "e1")
    w, port = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("profile", "Good", "fine\n"), put("profile", "Bad", body))))
    assert w.run_once().code == code
    assert read(paths, "profile") is None
    w.close()


@pytest.mark.parametrize("hostile", ["\x00", "\x1b]0;owned\x07", "\r", "\x9b", "\u202e", "\u2066", "\u2028"])
def test_a_hostile_character_rejects_the_decision_and_commits_nothing(env, hostile):
    paths, cfg = env
    admit(paths, "note", "e1")
    w, port = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("profile", "Good", "fine\n"), put("preferences", "Bad", f"x{hostile}y\n"))))
    outcome = w.run_once()
    assert (outcome.state, outcome.code) == ("retry", "UNSAFE_CHARACTER")
    assert port.rejections == ["UNSAFE_CHARACTER"]
    assert read(paths, "profile") is None and read(paths, "preferences") is None
    assert rows(paths, "SELECT COUNT(*) FROM receipts") == [(0,)]
    assert rows(paths, "SELECT state FROM observations") == [("claimed",)]
    assert not os.path.isdir(paths.transactions) or os.listdir(paths.transactions) == []
    w.close()


def test_hand_edit_between_read_and_commit_is_stale_revision(env):
    paths, cfg = env
    admit(paths, "note", "e1")
    os.makedirs(paths.memory, exist_ok=True)

    def script(task, reads):
        with open(paths.document("profile"), "w") as handle:  # the user edits while the model thinks
            handle.write("# Profile\n\n## Mine\nhand written\n")
        return decision(task, retain(all_evidence(reads), put("profile", "Agent", "text\n")))

    w, _ = writer(paths, cfg, script)
    assert w.run_once().code == "STALE_REVISION"
    assert read(paths, "profile") == "# Profile\n\n## Mine\nhand written\n"
    assert os.listdir(paths.transactions) == []
    w.close()


def test_late_answer_after_lease_loss_never_commits(env):
    paths, cfg = env
    admit(paths, "note", "e1")

    def script(task, reads):
        conn = store.connect(paths.db, 1000)
        with store.immediate(conn):  # another drain took the job over while the model ran
            conn.execute("UPDATE jobs SET token = 'other', generation = generation + 1")
        conn.close()
        return decision(task, retain(all_evidence(reads), put("profile", "Late", "text\n")))

    w, _ = writer(paths, cfg, script)
    outcome = w.run_once()
    assert (outcome.state, outcome.code) == ("stale", "STALE_LEASE")
    assert read(paths, "profile") is None
    assert rows(paths, "SELECT state FROM jobs") == [("running",)]  # the new holder's, untouched
    w.close()


class _Failing:
    def __init__(self, code: str, retryable: bool = True) -> None:
        self.code, self.retryable, self.calls = code, retryable, 0

    def decide(self, task, reads, meter):
        self.calls += 1
        raise AgentError(self.code, "failed", retryable=self.retryable,
                         diagnostic={"stage": "http", "reason": "provider_unavailable", "retryable": self.retryable})


def test_recovery_budget_is_first_attempt_plus_five(env):
    paths, cfg = env
    admit(paths, "note", "e1")
    clock = [1_800_000_000_000]
    from cmrunner.writer_proc.writer import Writer

    port = _Failing("UNAVAILABLE")
    w = Writer(paths, cfg, port, now=lambda: clock[0])
    states = []
    for _ in range(8):
        outcome = w.run_once()
        if outcome is None:
            break
        states.append(outcome.state)
        clock[0] += 601_000
    assert states == ["retry"] * 5 + ["dead"]
    assert port.calls == 6
    # The job dies with the real cause of its last failure, not a code that only says the budget ran out.
    assert rows(paths, "SELECT state, issue, failure, attempts FROM jobs") == [("dead", "UNAVAILABLE", "UNAVAILABLE", 6)]
    assert rows(paths, "SELECT state FROM observations") == [("dead",)]
    diag = json.loads(rows(paths, "SELECT diagnostic FROM jobs")[0][0])
    assert diag == {"stage": "http", "reason": "provider_unavailable", "retryable": True}
    w.close()


def test_authentication_failure_is_dead_at_once_and_retry_revives(env):
    paths, cfg = env
    admit(paths, "note", "e1")
    from cmrunner.writer_proc.writer import Writer

    w = Writer(paths, cfg, _Failing("AUTHENTICATION", retryable=False))
    assert w.run_once().state == "dead"
    job_id = rows(paths, "SELECT id FROM jobs")[0][0]
    conn = store.open_store(paths)
    with store.immediate(conn):
        jobs.retry(conn, job_id, 0)
    conn.close()
    w2, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "A", "b\n"))))
    assert w2.run_once().state == "committed"
    assert rows(paths, "SELECT id, state, attempts FROM jobs") == [(job_id, "done", 2)]
    w.close()
    w2.close()


def test_backoff_doubles_and_caps():
    assert [jobs.backoff_ms(n) for n in (0, 1, 4, 9, 10, 20)] == [1000, 2000, 16000, 512000, 600000, 600000]


@pytest.mark.parametrize(("setup", "code"), [
    ({"allowedProvenance": ["agent_observation"]}, "UNAUTHORIZED_PROVENANCE"),
    ({"allowedScopes": ["project:abc"]}, "UNAUTHORIZED_SOURCE"),
    ({"maxExcerptBytes": 40}, "OVERSIZED_COMPLETE_SOURCE"),
])
def test_prechecks_quarantine_before_any_model_call(home, setup, code):
    paths, cfg = configure(home, **setup)
    admit(paths, "a note that is a little longer than forty bytes", "e1")
    w, port = writer(paths, cfg, lambda task, reads: pytest.fail("the model must not be called"))
    assert w.run_once().code == code
    assert port.calls == 0
    assert rows(paths, "SELECT state, issue FROM observations") == [("quarantined", code)]
    w.close()


def test_sensitive_input_is_quarantined_locally(env):
    paths, cfg = env
    admit(paths, "my password: hunter2-is-secret", "e1")
    w, port = writer(paths, cfg, lambda task, reads: pytest.fail("the model must not be called"))
    assert w.run_once().code == "SENSITIVE_INPUT"
    assert port.calls == 0
    w.close()


def test_unregistered_project_is_quarantined(home):
    paths, cfg = configure(home, allowedScopes=["global", "project:gone-123456"])
    admit(paths, "note", "e1", scope="project:gone-123456")
    w, _ = writer(paths, cfg, lambda task, reads: pytest.fail("no model call"))
    assert w.run_once().code == "UNREGISTERED_PROJECT"
    w.close()


def test_forget_clears_state_bodies_and_tombstones_exact_text(env):
    paths, cfg = env
    first = admit(paths, "My cat is called Miso.", "e1", batch="b1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Pets", "Cat: Miso.\n"))))
    assert w.run_once().state == "committed"
    w.close()
    admit(paths, "Please forget my cat's name.", "e2", batch="b2")

    def forget(task, reads):
        ref = reads.inspect_memory(task["snapshot"]["handle"])["documents"][0]["sections"][0]["ref"]
        return decision(task, {"kind": "forget", "applicability": "global", "confidence": 1,
                               "evidence": all_evidence(reads), "reason": "r",
                               "operations": [{"op": "remove_section", "target": "profile", "section": ref}]})

    w, _ = writer(paths, cfg, forget)
    assert w.run_once().state == "committed"
    assert read(paths, "profile") == "# Profile\n\n"
    assert rows(paths, "SELECT text FROM observations WHERE id = ?", (first,)) == [(None,)]
    assert rows(paths, "SELECT COUNT(*) FROM forgotten_sources") == [(2,)]
    assert rows(paths, "SELECT COUNT(*) FROM correction_watermarks WHERE target = 'profile'") == [(1,)]
    conn = store.open_store(paths)
    with store.immediate(conn):
        again = observations.admit(conn, agent="codex", namespace="test", entry_id="e3", text="My cat is called Miso.",
                                   scope="global", source="codex_user_delivery", observed_at="2026-11-30T00:00:01Z")
    conn.close()
    assert (again.state, rows(paths, "SELECT issue FROM observations WHERE id = ?", (again.id,))[0][0]) == (
        "quarantined", "FORGOTTEN_SOURCE")
    w.close()


def test_an_update_keeps_the_replaced_sections_sources_unforgotten(env):
    """Only a forget tombstones the sources of the sections it touches: an update that replaces a
    section keeps the old turn's text and links it beside the new evidence."""
    paths, cfg = env
    first = admit(paths, "I use vim", "e1", batch="b1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Editor", "vim\n"))))
    assert w.run_once().state == "committed"
    w.close()
    second = admit(paths, "I switched to helix", "e2", batch="b2")

    def update(task, reads):
        ref = reads.inspect_memory(task["snapshot"]["handle"])["documents"][0]["sections"][0]["ref"]
        return decision(task, retain(all_evidence(reads), put("profile", "Editor", "helix\n", section=ref),
                                     admission="update"))

    w, _ = writer(paths, cfg, update)
    assert w.run_once().state == "committed"
    assert read(paths, "profile") == "# Profile\n\n## Editor\nhelix\n"
    assert rows(paths, "SELECT COUNT(*) FROM forgotten_sources") == [(0,)]
    assert rows(paths, "SELECT text FROM observations WHERE id = ?", (first,)) == [("I use vim",)]
    assert sorted(r[0] for r in rows(paths, "SELECT source_id FROM associations")) == [first, second]
    w.close()


def test_an_edit_task_sets_a_correction_watermark_even_for_a_plain_remember(env):
    """What the user asks for by hand (an edit task) is a correction whatever admission the agent
    gives it: the commit sets the target's watermark, so older evidence cannot undo it."""
    paths, cfg = env
    admit(paths, "note that I prefer tabs", "e1", batch=None, source="interactive", task_kind="edit", agent="cm-adjust")
    w, _ = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("preferences", "Indent", "tabs\n")), edit_result="modified"))
    assert w.run_once().state == "committed"
    assert rows(paths, "SELECT COUNT(*) FROM correction_watermarks WHERE target = 'preferences'") == [(1,)]
    w.close()


def test_only_an_edit_task_states_the_edit_result_rule_and_the_instructions_do_not(env):
    """The edit-result rule is the one rule only an edit task can use, so it travels in that task
    (issue 35: the instructions every request repeats stay byte-identical for every job kind, and
    ordinary jobs stop paying for it); the Writer enforces it either way (INVALID_EDIT_RESULT)."""
    from cmrunner.agentrt.agent import system_prompt
    from cmrunner.writer_proc.port import EDIT_RESULT_RULE

    paths, cfg = env
    seen: list[dict] = []

    def script(task, reads):
        seen.append(task)
        edit = task["task_kind"] == "edit"
        return decision(task, retain(all_evidence(reads), put("preferences", "Indent" if edit else "Shell", "x\n")),
                        edit_result="modified" if edit else None)

    admit(paths, "I use fish", "e1")
    w, _ = writer(paths, cfg, script)
    assert w.run_once().state == "committed"
    admit(paths, "note that I prefer tabs", "e2", batch=None, source="interactive", task_kind="edit", agent="cm-adjust")
    assert w.run_once().state == "committed"
    w.close()
    assert len(seen) == 2 and seen[0]["task_kind"] != "edit" and seen[1]["task_kind"] == "edit"
    assert "edit_result" not in seen[0] and seen[1]["edit_result"] == EDIT_RESULT_RULE
    assert "edit_result" not in system_prompt()


def test_replacing_the_second_of_two_sections_of_one_title_links_that_section(env):
    """A hand edit can leave two sections of one title; a put that replaces the second under its
    own title keeps that unit's key, so the evidence is linked to it, not to its namesake."""
    from cmrunner.core import sections

    paths, cfg = env
    os.makedirs(paths.memory, exist_ok=True)
    with open(paths.document("preferences"), "w") as handle:
        handle.write("# Preferences\n\n## Notes\na\n\n## Notes\nb\n")
    admit(paths, "note c", "e1")

    def script(task, reads):
        docs = reads.inspect_memory(task["snapshot"]["handle"])["documents"]
        refs = [s["ref"] for d in docs for s in d["sections"] if s["title"] == "Notes"]
        return decision(task, retain(all_evidence(reads), put("preferences", "Notes", "c\n", section=refs[1])))

    w, _ = writer(paths, cfg, script)
    assert w.run_once().state == "committed"
    assert read(paths, "preferences") == "# Preferences\n\n## Notes\na\n\n## Notes\nc\n"
    first, second = sections.parse("preferences", read(paths, "preferences").encode()).sections[-2:]
    assert sections.unit_key("preferences", first) != sections.unit_key("preferences", second)
    assert rows(paths, "SELECT DISTINCT section_key FROM associations WHERE target = 'preferences'") == [
        (sections.unit_key("preferences", second),)]
    w.close()


def test_a_removed_section_donates_its_sources_to_what_the_decision_writes(env):
    """Sections a decision removes donate their sources to every section it writes; a section it
    merely replaces keeps its own."""
    paths, cfg = env
    first = admit(paths, "I use vim", "e1", batch="b1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Editor", "vim\n"))))
    assert w.run_once().state == "committed"
    w.close()
    second = admit(paths, "call it Tools", "e2", batch="b2")

    def merge(task, reads):
        ref = reads.inspect_memory(task["snapshot"]["handle"])["documents"][0]["sections"][0]["ref"]
        return decision(task, retain(all_evidence(reads), {"op": "remove_section", "target": "profile", "section": ref},
                                     put("profile", "Tools", "vim\n"), admission="update"))

    w, _ = writer(paths, cfg, merge)
    assert w.run_once().state == "committed"
    assert read(paths, "profile") == "# Profile\n\n## Tools\nvim\n"
    assert sorted(r[0] for r in rows(paths, "SELECT source_id FROM associations")) == [first, second]
    w.close()


def test_a_source_both_donated_and_already_linked_stays_linked(env):
    """One turn wrote two sections; a decision removes one and replaces the other: that turn is
    the kept section's own source and a donated one, and it stays linked (a union, never a
    symmetric difference)."""
    paths, cfg = env
    first = admit(paths, "I use vim and fish", "e1", batch="b1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("profile", "Editor", "vim\n"), put("profile", "Shell", "fish\n"))))
    assert w.run_once().state == "committed"
    w.close()
    second = admit(paths, "fold them together", "e2", batch="b2")

    def fold(task, reads):
        refs = [s["ref"] for s in reads.inspect_memory(task["snapshot"]["handle"])["documents"][0]["sections"]]
        return decision(task, retain(all_evidence(reads), {"op": "remove_section", "target": "profile", "section": refs[1]},
                                     put("profile", "Editor", "vim, fish\n", section=refs[0]), admission="update"))

    w, _ = writer(paths, cfg, fold)
    assert w.run_once().state == "committed"
    assert read(paths, "profile") == "# Profile\n\n## Editor\nvim, fish\n"
    assert sorted(r[0] for r in rows(paths, "SELECT source_id FROM associations")) == [first, second]
    w.close()


def test_stale_source_after_a_correction(env):
    paths, cfg = env
    admit(paths, "I live in Oslo", "e1", batch="b1", observed_at="2026-11-30T10:00:00Z")
    w, _ = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("profile", "Home", "Oslo\n"), admission="correct")))
    assert w.run_once().state == "committed"
    w.close()
    admit(paths, "I live in Bergen (said earlier)", "e2", batch="b2", observed_at="2026-11-30T09:00:00Z")

    def late(task, reads):
        ref = reads.inspect_memory(task["snapshot"]["handle"])["documents"][0]["sections"][0]["ref"]
        return decision(task, retain(all_evidence(reads), put("profile", "Home", "Bergen\n", section=ref), admission="update"))

    w, _ = writer(paths, cfg, late)
    assert w.run_once().code == "STALE_SOURCE"
    assert "Oslo" in read(paths, "profile")
    w.close()


@pytest.mark.parametrize("first", ["remember", "correct with an offset"])
def test_older_evidence_may_still_update_after_a_remember_or_an_earlier_correction(env, first):
    """Only a correction (update, correct, forget) sets a watermark, and it is an instant: a plain
    remember never blocks older evidence, and a correction observed at 12:00+02:00 (10:00 UTC) does
    not block evidence observed at 10:30 UTC."""
    paths, cfg = env
    at, admission = (("2026-11-30T10:00:00Z", "remember") if first == "remember"
                     else ("2026-11-30T12:00:00+02:00", "correct"))
    admit(paths, "I live in Oslo", "e1", batch="b1", observed_at=at)
    w, _ = writer(paths, cfg, lambda task, reads: decision(
        task, retain(all_evidence(reads), put("profile", "Home", "Oslo\n"), admission=admission)))
    assert w.run_once().state == "committed"
    w.close()
    admit(paths, "I moved to Bergen", "e2", batch="b2",
          observed_at="2026-11-30T09:00:00Z" if first == "remember" else "2026-11-30T10:30:00Z")

    def update(task, reads):
        ref = reads.inspect_memory(task["snapshot"]["handle"])["documents"][0]["sections"][0]["ref"]
        return decision(task, retain(all_evidence(reads), put("profile", "Home", "Bergen\n", section=ref), admission="update"))

    w, _ = writer(paths, cfg, update)
    assert w.run_once().state == "committed"
    assert "Bergen" in read(paths, "profile") and "Oslo" not in read(paths, "profile")
    w.close()


def test_relay_work_waits_for_thresholds_unless_flushed(env):
    paths, cfg = env
    for i in range(3):
        admit(paths, f"relay {i}", f"r{i}", source="mcp_user_submission", batch=None)
    w, port = writer(paths, cfg, lambda task, reads: decision(task, {
        "kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": all_evidence(reads), "reason": "r"}))
    assert w.run_once() is None  # 3 < 6 expressions, fresh, small
    w.force = True
    assert w.run_once().state == "ignored"
    assert rows(paths, "SELECT COUNT(*) FROM observations WHERE state = 'processed'") == [(3,)]
    w.close()


def test_batches_never_mix_scope_or_provenance(env):
    paths, cfg = env
    admit(paths, "a", "r1", source="mcp_user_submission", batch=None)
    admit(paths, "b", "r2", source="document_import", batch=None)
    admit(paths, "c", "r3", source="mcp_user_submission", batch=None)
    seen = []
    w, _ = writer(paths, cfg, lambda task, reads: seen.append(sorted(s.provenance for s in reads.sources.values()))
                  or decision(task, {"kind": "ignore", "applicability": "uncertain", "confidence": 1,
                                     "evidence": all_evidence(reads), "reason": "r"}))
    w.force = True
    while w.run_once() is not None:
        pass
    assert seen == [["user_explicit"], ["document_import"], ["user_explicit"]]
    w.close()


def test_reads_are_paged_contiguous_and_utf8_safe(env, monkeypatch):
    from cmrunner.writer_proc import reads as reads_mod

    monkeypatch.setattr(reads_mod, "BULK_PAGE", 8193)  # pages are job-sized (64 KiB): one page a byte too long
    paths, cfg = env
    admit(paths, "é" * 6000, "e1")  # 12,000 bytes: two pages, the cut inside no character
    pages = []

    def script(task, reads):
        handle = task["bundles"][0]["ingest_id"]
        with pytest.raises(Exception) as caught:
            reads.read_ingest(handle, "b1", 8193)
        assert caught.value.code in ("NONCONTIGUOUS_READ", "INVALID_PAGE_OFFSET")
        return decision(task, retain(all_evidence(reads), put("profile", "Accent", "é\n")))

    class Paging:
        calls = 0

        def decide(self, task, tools, meter):
            reads = tools.reads  # the Writer hands every port its Toolbox over the job's read port
            handle = task["bundles"][0]["ingest_id"]
            offset = 0
            with pytest.raises(Exception) as caught:
                reads.read_ingest(handle, "b1", 1)  # inside a character
            assert caught.value.code == "INVALID_PAGE_OFFSET"
            with pytest.raises(Exception) as caught:
                reads.submit(decision(task, retain(all_evidence(reads), put("profile", "A", "b\n"))))
            assert caught.value.code == "INCOMPLETE_INGEST_COVERAGE"
            while offset is not None:
                page = reads.read_ingest(handle, "b1", offset)
                pages.append(page["bytes"])
                offset = page["next"]
            from cmrunner.writer_proc.port import ScriptedPort

            return ScriptedPort(script).decide(task, tools, meter)

    from cmrunner.writer_proc.writer import Writer

    w = Writer(paths, cfg, Paging())
    assert w.run_once().state == "committed"
    assert pages == [8192, 12000 - 8192] and all(p % 2 == 0 for p in pages)
    w.close()


@pytest.mark.parametrize("edit", ["vim", "zed", "past the hard budget"])
def test_hand_edit_of_a_read_document_the_decision_leaves_alone_is_stale_revision(env, edit):
    """The commit's CAS covers every document the agent read, not only those it changes: a
    decision made on an old view of preferences must not land beside a newer hand edit of it.
    (The two short edits hash above and below the original, so no ordering of hashes can pass;
    the long one is one byte over the hard budget, which the CAS still reads and hashes.)"""
    from cmrunner.core import sections

    head = "# Preferences\n\n## Editor\n"
    edit = head + (f"{edit}\n" if len(edit) < 4 else "x" * (sections.MAX_HARD_BUDGET + 1 - len(head) - 1) + "\n")
    paths, cfg = env
    os.makedirs(paths.memory, exist_ok=True)
    with open(paths.document("preferences"), "w") as handle:
        handle.write("# Preferences\n\n## Editor\nhelix\n")
    admit(paths, "note", "e1")

    def script(task, reads):
        with open(paths.document("preferences"), "w") as handle:  # the user edits while the model thinks
            handle.write(edit)
        return decision(task, retain(all_evidence(reads), put("profile", "Agent", "text\n")))

    w, _ = writer(paths, cfg, script)
    assert w.run_once().code == "STALE_REVISION"
    assert read(paths, "profile") is None and read(paths, "preferences") == edit
    assert rows(paths, "SELECT state FROM jobs") == [("retry",)]
    assert os.listdir(paths.transactions) == []
    w.close()


def test_a_hand_edit_past_the_cas_read_bound_is_refused_unread(env):
    """The CAS reads a document it was shown only up to one byte past the largest hard budget (the
    "past the hard budget" edit above is exactly that): a hand edit one byte bigger is refused as
    FILE_TOO_LARGE (nothing published, the job waits) rather than read under the repository lock."""
    from cmrunner.core import sections

    paths, cfg = env
    os.makedirs(paths.memory, exist_ok=True)
    with open(paths.document("preferences"), "w") as handle:
        handle.write("# Preferences\n\n## Editor\nhelix\n")
    admit(paths, "note", "e1")
    head = "# Preferences\n\n## Editor\n"
    edit = head + "x" * (sections.MAX_HARD_BUDGET + 2 - len(head) - 1) + "\n"

    def script(task, reads):
        with open(paths.document("preferences"), "w") as handle:  # the user edits while the model thinks
            handle.write(edit)
        return decision(task, retain(all_evidence(reads), put("profile", "Agent", "text\n")))

    w, _ = writer(paths, cfg, script)
    assert w.run_once().code == "FILE_TOO_LARGE"
    assert read(paths, "profile") is None and read(paths, "preferences") == edit
    assert os.listdir(paths.transactions) == []
    w.close()


def test_recovery_counts_the_commits_it_replays(env, monkeypatch):
    """``commit.recover`` returns how many interrupted commits it replayed (the drain logs it): one
    for a commit that crashed after publishing, none when nothing is left to finish."""
    from cmrunner.writer_proc import commit, publish

    class Crash(Exception):
        pass

    def crash(point):
        if point == "after_publish":
            raise Crash(point)

    paths, cfg = env
    admit(paths, "I use vim", "e1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Editor", "vim\n"))))
    monkeypatch.setattr(publish, "fault", crash)
    assert w.run_once().state != "committed"  # the Writer records the crash as the attempt's failure
    monkeypatch.setattr(publish, "fault", lambda point: None)
    assert rows(paths, "SELECT COUNT(*) FROM receipts") == [(0,)]  # the database side did not happen
    conn = store.connect(paths.db, 1000)
    try:
        with commit.repository_lock(paths):
            assert commit.recover(paths, conn, lambda: 1) == 1
            assert commit.recover(paths, conn, lambda: 2) == 0
    finally:
        conn.close()
    assert rows(paths, "SELECT COUNT(*) FROM receipts") == [(1,)]
    assert read(paths, "profile") == "# Profile\n\n## Editor\nvim\n"
    w.close()


def test_a_commit_beside_an_unchanged_document_it_read_publishes(env):
    """The CAS reads each unchanged document it was shown in full (up to the hard budget), so a
    large existing preferences file does not stop a commit to profile."""
    paths, cfg = env
    os.makedirs(paths.memory, exist_ok=True)
    prefs = "# Preferences\n\n## Editor\n" + "vim everywhere.\n" * 500
    with open(paths.document("preferences"), "w") as handle:
        handle.write(prefs)
    admit(paths, "note", "e1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Agent", "text\n"))))
    assert w.run_once().state == "committed"
    assert read(paths, "profile") == "# Profile\n\n## Agent\ntext\n" and read(paths, "preferences") == prefs
    w.close()


def test_the_repository_lock_never_falls_back_to_a_soft_lock(env, monkeypatch):
    """On a file system without ``flock`` the repository lock fails (ENOSYS) instead of falling back
    to a marker file, which a crashed holder would leave behind for every later commit to wait on."""
    import errno
    import fcntl

    from cmrunner.writer_proc import commit

    paths, _cfg = env
    os.makedirs(os.path.dirname(paths.repo_lock), exist_ok=True)

    def no_flock(fd, operation):
        raise OSError(errno.ENOSYS, "flock is not supported here")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    with pytest.raises(OSError) as caught:
        with commit.repository_lock(paths):
            pass
    assert caught.value.errno == errno.ENOSYS


def test_the_repository_lock_is_private_and_a_held_lock_times_out_without_publishing(env, monkeypatch):
    """Another process holding the repository lock makes the attempt give up with
    REPOSITORY_LOCK_TIMEOUT (the job retries; nothing is published, no transaction is left);
    the lock file cm creates is readable by the user only."""
    import subprocess
    import sys

    from cmrunner.writer_proc import commit

    paths, cfg = env
    admit(paths, "I use vim", "e1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Editor", "vim\n"))))
    os.makedirs(os.path.dirname(paths.repo_lock), exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from filelock import FileLock\n"
                               "lock = FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True); sys.stdin.read()",
                               paths.repo_lock], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        monkeypatch.setattr(commit, "REPO_LOCK_SECONDS", 0.2)
        outcome = w.run_once()
        assert (outcome.state, outcome.code) == ("retry", "REPOSITORY_LOCK_TIMEOUT")
        assert read(paths, "profile") is None and os.listdir(paths.transactions) == []
        assert rows(paths, "SELECT state FROM observations") != [("processed",)]
    finally:
        holder.communicate("", timeout=10)
    os.unlink(paths.repo_lock)  # the holder created it; cm creates its own below
    monkeypatch.setattr(commit, "REPO_LOCK_SECONDS", 30.0)
    conn = store.connect(paths.db, 1000)
    with store.immediate(conn):
        conn.execute("UPDATE jobs SET available = 0")  # due now, instead of after the backoff
    conn.close()
    assert w.run_once().state == "committed"
    assert os.stat(paths.repo_lock).st_mode & 0o777 == 0o600
    w.close()


def test_a_hand_edit_drops_the_documents_old_source_links_at_the_next_commit(env):
    """Once the user has edited a document by hand, its sections are the user's words: the next
    commit to it keeps no link from them to the turns cm wrote them from (and drops those turns'
    kept text); only what that commit writes is linked, to its own evidence."""
    paths, cfg = env
    first = admit(paths, "I am a vegetarian", "e1", batch="b1")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Diet", "vegetarian\n"))))
    assert w.run_once().state == "committed"
    w.close()
    assert rows(paths, "SELECT source_id FROM associations WHERE target = 'profile'") == [(first,)]
    with open(paths.document("profile"), "a", encoding="utf-8") as handle:
        handle.write("but I eat fish on Fridays\n")
    second = admit(paths, "I have a cat", "e2", batch="b2")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, retain(all_evidence(reads), put("profile", "Pets", "a cat\n"))))
    assert w.run_once().state == "committed"
    w.close()
    assert rows(paths, "SELECT source_id FROM associations WHERE target = 'profile'") == [(second,)]
    assert rows(paths, "SELECT text FROM observations WHERE id = ?", (first,)) == [(None,)]
    assert "fish on Fridays" in read(paths, "profile")


@pytest.mark.parametrize("body", ["helix\n", "vim\n"])
def test_an_edit_that_says_modified_must_change_the_document(env, body):
    """A user's edit request (cm adjust) answered ``modified`` commits when its decision changes
    bytes, and is rejected (INVALID_EDIT_RESULT, nothing written) when it rewrites a section
    exactly as it was."""
    paths, cfg = env
    os.makedirs(paths.memory, exist_ok=True)
    with open(paths.document("preferences"), "w") as handle:
        handle.write("# Preferences\n\n## Editor\nvim\n")
    admit(paths, "I switched from vim to helix", "e1", batch=None, source="interactive", task_kind="edit",
          agent="cm-adjust")

    def script(task, reads):
        ref = reads.inspect_memory(task["snapshot"]["handle"])["documents"][1]["sections"][0]["ref"]
        return decision(task, retain(all_evidence(reads), put("preferences", "Editor", body, section=ref), admission="update"),
                        edit_result="modified")

    w, port = writer(paths, cfg, script)
    outcome = w.run_once()
    if body == "helix\n":
        assert outcome.state == "committed" and read(paths, "preferences") == "# Preferences\n\n## Editor\nhelix\n"
    else:
        assert outcome.code == "INVALID_EDIT_RESULT" and "INVALID_EDIT_RESULT" in port.rejections
        assert read(paths, "preferences") == "# Preferences\n\n## Editor\nvim\n"
    w.close()


def test_a_blocked_decisions_evidence_holds_back_every_changing_decision_that_cites_it():
    """``split_blocked``: evidence is never split between a commit and a wait. A decision writing a
    blocked document is held with its evidence, and so is any other retain or forget citing that
    evidence; only an unrelated decision (other evidence) is kept."""
    from cmrunner.writer_proc import apply, contract

    forget = {"kind": "forget", "applicability": "global", "confidence": 1, "evidence": ["ev_1"], "reason": "r",
              "operations": [put("preferences", "Old", "x\n")]}
    payload = {"version": "memory_maintenance_v2", "request_id": "j", "decisions": [
        retain(["ev_1"], put("profile", "Home", "Bergen\n")),          # writes the blocked document
        retain(["ev_1"], put("preferences", "City", "Bergen\n")),      # the same evidence: held too
        forget,                                                          # the same evidence: held too
        retain(["ev_2"], put("preferences", "Editor", "vim\n"))]}      # other evidence: written now
    accepted = contract.ValidatedDecision(contract.MaintenanceDecision.model_validate(payload),
                                          frozenset({"profile", "preferences"}))
    narrowed, held = apply.split_blocked(accepted, frozenset({"profile"}), [1, 2])
    assert [d.operations[0].title for d in narrowed.decision.decisions] == ["Editor"]
    assert held is not None and held.observation_ids == {1} and held.targets == {"profile"}


@pytest.mark.parametrize(("observed_ms", "source_id", "stale"), [
    (999, 9, True),     # observed before the correction
    (1000, 5, True),    # the same instant, admitted before (or as) the correction's source
    (1000, 9, False),   # the same instant, admitted after it
    (2000, 3, False),   # observed after the correction, whatever its admission order
])
def test_a_correction_watermark_orders_by_instant_then_admission(observed_ms, source_id, stale):
    """``check_watermarks``: evidence is older than a correction (7 at 1000 ms) when observed
    earlier, or at the same instant and admitted no later than the correction's source."""
    from cmrunner.writer_proc import apply, contract

    payload = {"version": "memory_maintenance_v2", "request_id": "j", "decisions": [
        retain([f"ev_{source_id}"], put("profile", "Home", "Bergen\n"), admission="update")]}
    accepted = contract.ValidatedDecision(contract.MaintenanceDecision.model_validate(payload), frozenset({"profile"}))
    facts = apply.BatchFacts([source_id], {source_id: "global"}, {source_id: observed_ms}, {}, frozenset(), False)
    if stale:
        with pytest.raises(contract.DecisionRejected) as caught:
            apply.check_watermarks(accepted, {"profile": (1000, 7)}, facts)
        assert caught.value.code == "STALE_SOURCE"
    else:
        apply.check_watermarks(accepted, {"profile": (1000, 7)}, facts)
    apply.check_watermarks(accepted, {"preferences": (10**15, 10**9)}, facts)  # another target's mark: no effect


def test_renewing_a_held_lease_moves_its_expiry_and_a_lost_lease_stays_lost(env):
    """The Writer's renewer keeps a slow attempt's lease: each renewal sets the expiry to now +
    leaseMs; once the lease has expired (or the job is taken over), renewal fails and the holder
    must stop, so its late result can never commit."""
    paths, cfg = env
    admit(paths, "I use vim", "e1")
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            job = jobs.claim(conn, cfg.scheduler, 1_000)
            assert job is not None and job.expires == 1_000 + cfg.scheduler["leaseMs"]
            assert jobs.renew(conn, job, 2_000, 60_000) is True
        assert rows(paths, "SELECT expires FROM jobs WHERE id = ?", (job.id,)) == [(62_000,)]
        listed, total = jobs.unfinished(conn)
        assert total == 1 and listed[0]["state"] == "running"
        assert listed[0]["leaseExpiresAt"] == 62_000 and listed[0]["nextAttemptAt"] is None  # what `cm status` shows
        with store.immediate(conn):
            jobs.assert_lease(conn, job, 61_999)
            assert jobs.renew(conn, job, 62_000, 60_000) is False  # expired at 62 000: lost
            with pytest.raises(CmError) as caught:
                jobs.assert_lease(conn, job, 62_000)
            assert caught.value.code == "STALE_LEASE"
    finally:
        conn.close()


def test_a_claim_of_unbatched_work_takes_at_most_turn_threshold_observations(env):
    """Work outside a session batch (relay, import) is claimed ``turnThreshold`` observations per
    job: three pending under a threshold of two make a job of two and leave one."""
    paths, cfg = env
    for n in range(3):
        admit(paths, f"note {n}", f"e{n}", batch=None)
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            job = jobs.claim(conn, {**cfg.scheduler, "turnThreshold": 2}, 1_000)
            assert job is not None and len(job.observation_ids) == 2
    finally:
        conn.close()
    assert rows(paths, "SELECT COUNT(*) FROM observations WHERE state = 'pending'") == [(1,)]


def test_a_flush_request_stands_until_a_claim_leaves_nothing_pending(env):
    """A flush asks for everything pending: a claim that leaves work behind keeps the request for
    the next claim; the claim that takes the last pending observation clears it."""
    from cmrunner.core import jobstore

    paths, cfg = env
    admit(paths, "I use vim", "e1", batch="batch-1")
    admit(paths, "I use fish", "e2", batch="batch-2")
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            jobstore.request_flush(conn)
            first = jobs.claim(conn, cfg.scheduler, 1_000)
            assert first is not None and len(first.observation_ids) == 1
            assert jobs.flush_requested(conn) is True  # batch-2 still waits
            jobstore.finish(conn, first.id, None, 1_001)
            observations.mark_processed(conn, first.id, 1_001)
            second = jobs.claim(conn, cfg.scheduler, 1_002)
            assert second is not None and second.observation_ids != first.observation_ids
            assert jobs.flush_requested(conn) is False
    finally:
        conn.close()


@pytest.mark.parametrize("count", [5, 7])
def test_an_ambiguous_job_id_prefix_lists_at_most_five_candidates(env, count):
    """``cm retry``/``cm cancel`` with a prefix that fits several jobs name them, at most five,
    and say when there are more."""
    from cmrunner.core import jobstore

    paths, _cfg = env
    ids = [f"abcdef01{n:024x}" for n in range(count)]
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            for job_id in ids:
                jobstore.create(conn, job_id, "t" * 32, "global", "user_explicit", "observation", 0, 0)
        with pytest.raises(CmError) as caught:
            jobs.resolve_id(conn, "ABCDEF01")
    finally:
        conn.close()
    assert caught.value.code == "AMBIGUOUS_JOB_ID"
    assert sum(job_id in caught.value.message for job_id in ids) == 5
    assert ("and more" in caught.value.message) == (count > 5)
