"""Memory Control · Secrets (textual pilot on a real temporary home): findings without their value,
"not a secret" and back with a one-line confirmation, checked against the real `cm show` and
`cm secrets list` subprocesses; the purge of quarantined secret text in the real SQLite store."""

from __future__ import annotations

import os
import sys

from conftest import hook_env, run_cm
from tui_support import configure_model, drive, flat, open_action, screen_text, wait_for
from writer_support import admit, all_evidence, configure, decision, rows, writer

from cmrunner.manage import setupstate
from cmrunner.secrets import allowlist
from cmrunner.tui.app import CmApp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fixtures"))
from secrets_corpus import SECRETS

GITHUB = next(text for fmt, text in SECRETS if fmt == "github").split()[-1]
STRIPE = next(text for fmt, text in SECRETS if fmt == "stripe").split()[-1]
IGNORE = {"kind": "ignore", "applicability": "uncertain", "confidence": 1, "evidence": [], "reason": "r"}


def _home_with_memory(home: str, document: str | None):
    paths, cfg = configure(home)
    configure_model(home, "http://127.0.0.1:9/v1")
    setupstate.finish(home)
    if document is not None:
        os.makedirs(paths.memory, exist_ok=True)
        with open(paths.document("preferences"), "w", encoding="utf-8") as handle:
            handle.write(document)
    return paths, cfg


def _cm(home: str, *args: str) -> str:
    proc = run_cm(list(args), env=hook_env(COMMON_MEMORY_HOME=home))
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def _open_secrets(then):
    async def steps(pilot):
        await wait_for(pilot, "Memory Control · Secrets")
        await then(pilot)

    return open_action("secrets", steps)


def _no_value(pilot) -> str:
    raw = screen_text(pilot.app)
    for value in (GITHUB, STRIPE):
        assert value not in raw and value[:12] not in raw and value[-12:] not in raw
    return flat(raw)


def test_findings_are_listed_without_value_and_allowing_delivers_the_section_again(home, tmp_path):
    document = (f"# Preferences\n\n## Editor\nVim with tabs.\n\n## Cloud\ndeploy with {GITHUB} on Fridays\n\n"
                f"## Key {STRIPE}\nthe billing key\n")
    paths, cfg = _home_with_memory(home, document)
    admit(paths, f"my token is {GITHUB} keep it handy", "e1")
    admit(paths, "I like tea.", "e2")
    w, _ = writer(paths, cfg, lambda task, reads: decision(task, dict(IGNORE, evidence=all_evidence(reads))))
    assert w.run_once().state == "ignored"
    w.close()
    assert rows(paths, "SELECT issue FROM observations WHERE state = 'quarantined'") == [("SENSITIVE_INPUT",)]
    cli = [line for line in _cm(home, "secrets", "list").splitlines() if "withheld  " in line]
    assert len(cli) == 2 and any("section 'Cloud'" in line for line in cli)
    cloud = next(line for line in cli if "section 'Cloud'" in line)
    fingerprint = cloud.split()[-1]
    assert GITHUB not in _cm(home, "show") and "Vim with tabs." in _cm(home, "show")

    async def steps(pilot):
        text = await wait_for(pilot, "2 withheld, 0 allowed")
        for line in cli:  # every finding exactly as `cm secrets list` prints it
            assert flat(line) in text
        assert "section 3 (heading withheld)" in text and "1 quarantined observation(s)" in text
        _no_value(pilot)

        await pilot.press("enter")  # the first row: section 'Cloud'
        text = await wait_for(pilot, "as not a secret, so agents receive it? y yes · n no")
        assert "preferences section 'Cloud'" in text and allowlist.load(home) == frozenset()
        await pilot.press("n")
        await wait_for(pilot, "Nothing was changed.")
        assert allowlist.load(home) == frozenset()

        await pilot.press("enter", "y")
        await wait_for(pilot, "is marked as not a secret: agents receive it again.")
        text = await wait_for(pilot, "1 withheld, 1 allowed")
        assert flat(cloud.replace("withheld", "allowed")) in text
        _no_value(pilot)
        assert allowlist.load(home) == frozenset({fingerprint})
        shown = _cm(home, "show")
        assert f"deploy with {GITHUB} on Fridays" in shown and STRIPE not in shown

        await pilot.press("enter")
        await wait_for(pilot, "Withhold preferences section 'Cloud' again")
        await pilot.press("y")
        await wait_for(pilot, "is withheld again.")
        await wait_for(pilot, "2 withheld, 0 allowed")
        assert allowlist.load(home) == frozenset()
        shown = _cm(home, "show")
        assert GITHUB not in shown and "[cm withheld section 'Cloud' of preferences.md" in shown

        await pilot.press("p")
        await wait_for(pilot, "Delete now the text of 1 quarantined observation(s) that looked like a secret? y yes")
        await pilot.press("escape")  # Esc cancels the question first, and leaves only afterwards
        await wait_for(pilot, "Nothing was changed.")
        assert rows(paths, "SELECT COUNT(*) FROM observations WHERE text IS NOT NULL AND issue IS NOT NULL") == [(1,)]
        await pilot.press("p", "y")
        await wait_for(pilot, "Deleted the text of 1 quarantined observation(s).")
        await wait_for(pilot, "No quarantined observation keeps text that looked like a secret.")
        await pilot.press("escape")
        await wait_for(pilot, "cm · Common Memory")
        await pilot.press("escape")

    drive(CmApp(home), _open_secrets(steps))
    assert rows(paths, "SELECT text, issue FROM observations WHERE entry_id = 'e1'") == [(None, "SENSITIVE_INPUT")]
    assert open(paths.document("preferences"), encoding="utf-8").read() == document  # never rewritten


def test_empty_memory_has_its_own_message(home):
    _home_with_memory(home, "# Preferences\n\n## Editor\nVim with tabs.\n")

    async def steps(pilot):
        text = await wait_for(pilot, "No memory section looks like a secret.")
        assert "No quarantined observation keeps text that looked like a secret." in text
        await pilot.press("p")
        await wait_for(pilot, "No quarantined observation keeps text")
        await pilot.press("escape", "escape")

    drive(CmApp(home), _open_secrets(steps))


def test_a_failure_is_shown_as_a_coded_error_and_changes_nothing(home):
    _home_with_memory(home, f"# Preferences\n\n## Cloud\ndeploy with {GITHUB}\n")
    config = os.path.join(home, "config.json")

    async def steps(pilot):
        await wait_for(pilot, "1 withheld, 0 allowed")
        await pilot.press("enter")
        await wait_for(pilot, "as not a secret, so agents receive it?")
        with open(config, "w", encoding="utf-8") as handle:  # edited by hand while the screen is open
            handle.write('{"version": 1, broken')
        await pilot.press("y")
        text = await wait_for(pilot, "CONFIG_INVALID: ")
        assert "fix it or rerun `cm config init --force` (nothing was changed)" in text and "Traceback" not in text
        _no_value(pilot)
        await pilot.press("escape", "escape")

    drive(CmApp(home), _open_secrets(steps))
    assert allowlist.entries(home) == {} and not os.path.exists(allowlist.path(home))
