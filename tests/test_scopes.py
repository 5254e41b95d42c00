"""The scope grammar's project-id check, held equal to the pattern it documents."""

from __future__ import annotations

import random
import re

from cmrunner.core import scopes

_ALPHABET = "Aa0_-:/. \n\t\x00é٣ＡßK" + "xyz"  # id characters, separators, and look-alikes outside ASCII


def _samples() -> list[str]:
    rng = random.Random(35)
    fixed = ["", "a", "-", "_", "a" * 128, "a" * 129, "ok\n", "\nok", "ok ", "ok-1_B", "é", "٣", "Ａ", "K"]
    return fixed + ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 140))) for _ in range(3000)]


def test_the_project_id_check_accepts_exactly_the_documented_pattern():
    pattern = re.compile(scopes.PROJECT_ID)
    samples = _samples()
    accepted = [s for s in samples if scopes.is_project_id(s)]
    assert accepted and len(accepted) < len(samples)  # both sides of the rule were exercised
    for text in samples:
        assert scopes.is_project_id(text) == (pattern.fullmatch(text) is not None), repr(text)
        assert (scopes.project_id("project:" + text) == text) == (pattern.fullmatch(text) is not None)
    assert scopes.is_project_id(None) is False and scopes.project_id("global") is None


def test_scope_and_target_follow_the_id_check():
    assert scopes.is_scope("global") and scopes.is_scope("project:app-1")
    assert not scopes.is_scope("project:") and not scopes.is_scope("project:app\n")
    assert scopes.is_target("profile") and scopes.is_target("project:" + "a" * 128)
    assert not scopes.is_target("project:" + "a" * 129) and not scopes.is_target("global")
