"""The reader of instructions to an agent (``cmrunner.core.directives``), measured on both sides.

The labelled corpus (``tests/fixtures/import_kinds/``, written for these tests) holds facts about
a user as a Memory Agent writes them into the Profile, and instructions to an agent as CLAUDE.md,
AGENTS.md, Cursor rules and auto memory feedback files hold them. ``facts.txt`` and
``instructions.txt`` were written before the rules and the rules were then tuned on them (a
second round added verbs that also open noun phrases); ``heldout_*.txt`` were written after the
first version of the rules and never used to tune them. A false
refusal keeps a fact out of memory, so the thresholds favour precision: they sit just below what
``bench/import_kinds.py`` measured (docs/benchmarks.md, "Instructions kept out of the Profile").
"""

from __future__ import annotations

import os

import pytest

from cmrunner.core import directives

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "import_kinds")


def corpus(name: str) -> list[str]:
    with open(os.path.join(CORPUS, f"{name}.txt"), encoding="utf-8") as handle:
        lines = [line for line in handle.read().split("\n") if line.strip() and not line.startswith("# ")]
    assert len(lines) >= 40, f"{name}: too few labelled lines to measure anything"
    return lines


# (set, at most this share of facts refused, at least this share of instructions recognised)
THRESHOLDS = [("", 0.01, 0.92), ("heldout_", 0.05, 0.75)]


@pytest.mark.parametrize(("prefix", "max_refused", "min_recall"), THRESHOLDS)
def test_facts_pass_and_instructions_are_recognised(prefix, max_refused, min_recall):
    facts, instructions = corpus(f"{prefix}facts"), corpus(f"{prefix}instructions")
    if not prefix:
        assert len(facts) >= 100 and len(instructions) >= 100
    refused = [f for f in facts if directives.find(f) is not None]
    recognised = [i for i in instructions if directives.find(i) is not None]
    assert len(refused) <= max_refused * len(facts), refused
    assert len(recognised) >= min_recall * len(instructions), sorted(set(instructions) - set(recognised))


def test_a_document_is_judged_line_by_line_and_only_outside_code():
    text = "Works in Go.\n\n```sh\nrun make check\n```\n- Use pnpm, not npm.\nLives in Oslo. Never push on Fridays.\n"
    assert directives.lines(text) == [5, 6]
    assert directives.find(text, directives.known_lines("* Use pnpm, not npm.\n")) == 6
    assert directives.find("**Why:** a broken build cost a day.\n") is None
    assert directives.find("**How to apply:** run `make it` before `git commit`.\n") == 0
