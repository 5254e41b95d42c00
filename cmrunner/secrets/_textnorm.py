"""Text views the secret scanner reads: invisible and confusable characters folded, markup dropped.

Contract
- ``fold(text)`` returns the text a reader would see, for matching: format characters (Unicode
  category Cf: zero-width space/joiners, word joiner, soft hyphen, BOM, bidi controls, invisible
  operators) and a few other invisibles (combining grapheme joiner, Hangul fillers, variation
  selectors) are removed; every other character is NFKC-folded (fullwidth ``ｓｋ－`` becomes
  ``sk-``, NBSP a space), dashes become ``-``, and Cyrillic/Greek letters that look like Latin ones
  become those Latin letters. Line breaks are kept, so line ``i`` of the result is line ``i`` of the
  input. ASCII text is returned as is (the common case costs one ``str.isascii``).
- ``unmarked(text)`` is the markup-insensitive view used by token rules, one line at a time: each
  (folded) line that holds inline emphasis/code marks (``*``, `````, ``~~``) or an HTML comment is
  given again without them (and without its leading Markdown markup), so ``AKIA**…**`` is one
  token. Lines are never joined (issue 23): gluing the end of one line or section to the start of
  the next made "tokens" of ordinary ids (``fact2x0d6789fact2x0d6789Note``), and a secret is stopped
  on the way in, before any model could split one.
Stdlib only (``unicodedata``, ``re``): the read path uses it.
"""

from __future__ import annotations

import re
import unicodedata

_EXTRA_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0\u180e\u2800") | frozenset(
    chr(c) for c in range(0xFE00, 0xFE10))
_DASHES: dict[str | int, str] = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"), "-")
# Letters that render like Latin ones (Unicode confusables.txt, the common Cyrillic and Greek subset).
_CONFUSABLE_MAP: dict[str | int, str] = {
    "а": "a", "в": "B", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "һ": "h", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "А": "A", "В": "B", "Е": "E", "К": "K",
    "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X", "І": "I", "Ј": "J", "Ѕ": "S",
    "Ү": "Y", "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W", "α": "a", "ο": "o", "ρ": "p", "ν": "v", "τ": "t", "ι": "i",
    "κ": "k", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    **_DASHES,
}
_CONFUSABLE = str.maketrans(_CONFUSABLE_MAP)
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")
_LEADING_MARKUP = re.compile(r"[ \t]*(?:(?:#{1,6}|>|[-*+]|\d{1,9}[.)])(?=[ \t]|$)[ \t]*)*")
_INLINE_MARKUP = re.compile(r"<!--.*?-->|~~|[*`]")
_LINE = re.compile(r"[^\n]*\n|[^\n]+")


def _fold_char(char: str) -> str:
    if char in _EXTRA_INVISIBLE or unicodedata.category(char) == "Cf":
        return ""
    return unicodedata.normalize("NFKC", char).translate(_CONFUSABLE)


def _fold_run(match: re.Match[str]) -> str:
    run = match.group()
    return "".join(_fold_char(char) for char in run)


def fold(text: str) -> str:
    """``text`` with invisibles removed and confusables folded (see the module contract)."""
    if text.isascii():
        return text
    return _NON_ASCII_RUN.sub(_fold_run, text)


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each with its ``\\n`` (the last may have none)."""
    return _LINE.findall(text)


def unmarked(text: str) -> list[tuple[int, str]]:
    """``(offset, line)`` for each line of already folded ``text`` that holds inline markup, without it.

    A line loses its leading Markdown markup (heading hashes, quote markers, list bullets,
    indentation) and the inline emphasis/code marks (``*``, `````, ``~~``) and HTML comments inside
    it, so ``AKIA**…**`` reads as one token. Lines are never joined: a token ends at its line break.
    """
    out: list[tuple[int, str]] = []
    offset = 0
    for line in split_lines(text):
        body = line.rstrip("\r\n")
        if "*" in body or "`" in body or "~" in body or "<!--" in body:
            body = body[_LEADING_MARKUP.match(body).end():]  # type: ignore[union-attr]  # matches the empty string
            stripped = _INLINE_MARKUP.sub("", body)
            if stripped != body:
                out.append((offset, stripped))
        offset += len(line)
    return out
