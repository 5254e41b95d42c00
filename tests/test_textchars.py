"""The one set of characters memory text may not hold, and how terminals are shown them."""

from __future__ import annotations

import unicodedata

import pytest

from cmrunner.core import textchars


def test_the_class_set_is_exactly_the_documented_one():
    refused = {chr(c) for c in range(0x110000) if textchars.unsafe_class(chr(c)) is not None}
    expected = ({chr(c) for c in range(0x20)} - {"\t", "\n"}) | {chr(c) for c in range(0x7F, 0xA0)} \
        | set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029") \
        | {chr(c) for c in range(0xD800, 0xE000)}
    assert refused == expected
    # Every Cc, Zl, Zp and Cs character but tab and newline is in it; the bidi marks are not.
    assert all(unicodedata.category(ch) in ("Cc", "Zl", "Zp", "Cs", "Cf") for ch in refused)
    assert not refused & set("\u200e\u200f\u061c\u200b\u200d\ufeff")


@pytest.mark.parametrize(("text", "shown"), [
    ("\x00", "^@"), ("\x07", "^G"), ("\x1b[2J", "^[[2J"), ("\x1f", "^_"), ("\x7f", "^?"), ("a\rb", "a^Mb"),
    ("a\r\nb", "a\nb"), ("\r", "^M"), ("\x85", "\\u0085"), ("\x9b", "\\u009b"), ("\u202e", "\\u202e"),
    ("\u2069", "\\u2069"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\ud83d", "\\ud83d"),
    ("tab\tnl\n\u200fok \U0001f469\u200d\U0001f4bb", "tab\tnl\n\u200fok \U0001f469\u200d\U0001f4bb"),
])
def test_for_terminal_shows_each_class_visibly(text, shown):
    assert textchars.for_terminal(text) == shown
    assert textchars.find_unsafe(textchars.for_terminal(text).replace("\n", "")) is None


def test_find_unsafe_names_the_first_one():
    assert textchars.find_unsafe("ok\u202ex\x00") == (2, "bidirectional control")
    assert textchars.find_unsafe("line\r\n") == (4, "carriage return")
    assert textchars.find_unsafe("fine\ttext\n") is None
