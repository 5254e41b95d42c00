"""Which typed prompts name a host command: the name parser, held equal to the pattern it replaced."""

from __future__ import annotations

import random
import re

from cmrunner.hooks import slashcommands

# The pattern `command_name` implemented before it dropped `re` from the hook path (issue 35).
_NAME = re.compile(r"\s*/([^\s/]+)(?:\s|$)")
_ALPHABET = "/ \t\n\u00a0\u2003ab:.?-_é٣x"


def _expected(prompt: str) -> str | None:
    match = _NAME.match(prompt)
    return match.group(1) if match else None


def test_command_name_matches_the_pattern_on_every_shape():
    rng = random.Random(36)
    fixed = ["/help", "  /help me", "/home is full, clean it", "/a/b", "/", "/ x", "x /help", "\u2003/memo\u00a0x",
             "/plugin:cmd args", "/help\n", "/help/", "\n/x", "//", "/é"]
    samples = fixed + ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12))) for _ in range(5000)]
    names = [slashcommands.command_name(s) for s in samples]
    assert any(names) and None in names  # both sides were exercised
    for prompt, name in zip(samples, names):
        assert name == _expected(prompt), repr(prompt)


def test_a_name_with_other_characters_is_never_a_command(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert slashcommands.is_command("claude-code", "/help", str(tmp_path), env)
    assert not slashcommands.is_command("claude-code", "/hélp", str(tmp_path), env)
    assert not slashcommands.is_command("gemini", "/he*lp", str(tmp_path), env)
