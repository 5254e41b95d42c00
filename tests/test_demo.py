"""`cm demo`: the README's main job runs the whole loop on a fresh temporary home and shows real memory."""

from __future__ import annotations

import os
import re

from conftest import run_cm


def _printed(out: str, name: str, text: str, start: int = 0) -> bool:
    """Whether the demo printed document ``name`` holding exactly ``text`` (after ``start``)."""
    pattern = re.compile(rf"^----- \S+/{re.escape(name)}\n{re.escape(text)}\n(?:-----|\n)", re.M)
    return pattern.search(out, start) is not None


def test_demo_shows_memory_filed_by_topic_then_a_correction_and_a_forget(home):
    proc = run_cm(["demo"], timeout=180)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert "SYNTHETIC" in out and "127.0.0.1" in out and "not a language model" in out
    for name in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        assert f"  {name:<17} exit 0" in out
    assert "drain:       consumed the inbox, ran the Memory Agent and committed" in out
    # each statement under a topic heading in its own document, in the user's terms; the colleague's habit left out
    second = out.index("session 2:")
    assert _printed(out[:second], "preferences.md", "# Preferences\n\n## Indentation\nPrefers tabs over spaces in Go code.")
    assert _printed(out[:second], "profile.md", "# Profile\n\n## Location\nLives in Lisbon.")
    assert re.search(r"^----- \S+/projects/tidewatch-[0-9a-f]+\.md\n# Project\n\n## Database\nUses SQLite for storage\.\n\n",
                     out, re.M)
    assert "User turn" not in out and out.count("Emacs") == 1  # only where the user said it
    # what consumers receive, and the receipt
    assert "cm show --plain" in out and "<<<common-memory-data" in out
    assert '"observationIds"' in out and '"documents"' in out
    # the next session receives it, then corrects the preference and forgets a fact
    assert "injection:   session 2's memory carried what session 1 said" in out
    assert "drain:       committed the correction and the forget" in out
    assert _printed(out, "preferences.md", "# Preferences\n\n## Indentation\nNow prefers spaces over tabs in Go code.", second)
    assert _printed(out, "profile.md", "# Profile", second)
    assert "correction:  the old preference was replaced; forget: Lisbon is gone" in out
    # what it cost, from the ledger: every request the two drains made (they print their own counts)
    made = sum(int(n) for n in re.findall(r"the Memory Agent made (\d+) model requests", out))
    spend = re.search(r"^spend:       (\d+) request\(s\), [\d,]+ tokens", out, re.M)
    assert made > 0 and spend and int(spend.group(1)) == made, out[-600:]
    assert not os.path.exists(home), "the demo never touches the configured home"
    # without --keep it says the home is gone, and suggests no command on it
    removed = re.search(r"^removed:     (\S+) \(the demo's temporary home\)", out, re.M)
    assert removed and not os.path.exists(removed.group(1)) and "`cm demo --keep`" in out
    assert "cm --home" not in out and "cm trash" not in out and "cm restore" not in out


def test_demo_refuses_a_home_that_is_not_empty(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "config.json").write_text("{}")
    proc = run_cm(["demo", "--home", str(full)])
    assert proc.returncode == 1 and proc.stderr.decode().startswith("cm: DEMO_HOME_NOT_EMPTY: ")
    assert os.listdir(full) == ["config.json"] and (full / "config.json").read_text() == "{}"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert run_cm(["demo", "--home", str(a_file)]).stderr.decode().startswith("cm: DEMO_HOME_NOT_EMPTY: ")
