"""`cm eval` checks on a world's resulting memory: what passes, what fails, and what a failure quotes."""

from __future__ import annotations

from cmrunner.evals import checks, world as world_mod
from cmrunner.evals.checks import Memory, Section

MEMORY = Memory([Section("preferences", "Editor", "Switched from Vim to Helix as their editor."),
                 Section("profile", "Location", "Lives in Porto.\nUsed to live in Lisbon."),
                 Section("project:web", "Package manager", "Uses pnpm.")], changed_documents=2)


def check(**fields: object) -> world_mod.Check:
    return world_mod.World.model_validate({
        "id": "w", "title": "t", "classes": [fields["class"]], "sessions": [{"turns": [{"user": "x"}]}],
        "projects": [{"id": "web", "name": "Web"}], "checks": [fields]}).checks[0]


def test_a_value_kept_as_history_is_not_stated_as_current():
    stated = Memory([Section("preferences", "Editor", "Replaced Vim with Helix.\nUses Emacs, no longer Vim.\n"
                                                          "Nano until May. Now uses Zed.")], 1)
    for pattern, current in (("Vim", False), ("Helix", True), ("Emacs", True), ("Nano", False), ("Zed", True)):
        outcome = checks.evaluate(check(kind="not_current", **{"class": "obsolete_as_current"}, pattern=pattern),
                                  stated, {})
        assert outcome.passed is not current, pattern
    assert checks.evaluate(check(kind="not_current", **{"class": "obsolete_as_current"}, pattern=r"\bVim\b"),
                           MEMORY, {}).passed
    assert checks.evaluate(check(kind="not_current", **{"class": "obsolete_as_current"}, pattern="Lisbon"),
                           MEMORY, {}).passed
    current = checks.evaluate(check(kind="not_current", **{"class": "obsolete_as_current"}, pattern="Helix"),
                              MEMORY, {})
    assert not current.passed and current.quote == "preferences › Editor: Switched from Vim to Helix as their editor."


def test_present_wants_the_pattern_under_a_matching_heading_and_quotes_what_is_there():
    found = checks.evaluate(check(kind="present", **{"class": "remember"}, where="profile", heading="location",
                                  pattern="Porto"), MEMORY, {})
    assert found.passed
    missing = checks.evaluate(check(kind="present", **{"class": "remember"}, where="profile", heading="location",
                                    pattern="Berlin"), MEMORY, {})
    assert not missing.passed and missing.quote == "profile › Location: Lives in Porto. Used to live in Lisbon."
    elsewhere = checks.evaluate(check(kind="present", **{"class": "remember"}, where="preferences", pattern="pnpm"),
                                MEMORY, {})
    assert not elsewhere.passed and elsewhere.quote == "holds: preferences › Editor"


def test_absent_and_not_global_quote_the_offending_section():
    leaked = checks.evaluate(check(kind="not_global", **{"class": "local_as_global"}, pattern="Helix"), MEMORY, {})
    assert not leaked.passed and leaked.quote.startswith("preferences › Editor:")
    assert checks.evaluate(check(kind="not_global", **{"class": "local_as_global"}, pattern="pnpm"), MEMORY, {}).passed
    assert not checks.evaluate(check(kind="absent", **{"class": "isolation"}, where="project:web", pattern="PNPM"),
                               MEMORY, {}).passed


def test_nothing_written_counts_committed_document_changes():
    spec = check(kind="nothing_written", **{"class": "irrelevant_leakage"})
    assert not checks.evaluate(spec, MEMORY, {}).passed
    assert checks.evaluate(spec, Memory([], changed_documents=0), {}).passed


def test_injection_checks_read_what_a_new_session_received():
    received = {"web": "<<<data>>>\n## Package manager\nUses pnpm.\n<<<end>>>", None: "<<<data>>>\n<<<end>>>"}
    assert checks.evaluate(check(kind="injected", **{"class": "isolation"}, project="web", pattern="pnpm"),
                           MEMORY, received).passed
    outside = checks.evaluate(check(kind="not_injected", **{"class": "local_as_global"}, pattern="pnpm"),
                              MEMORY, received)
    assert outside.passed
    inside = checks.evaluate(check(kind="not_injected", **{"class": "local_as_global"}, project="web",
                                   pattern="pnpm"), MEMORY, received)
    assert not inside.passed and inside.quote == "Uses pnpm."
