"""The characters memory text may never hold, and how a terminal front end shows them.

Contract:
- ``unsafe_class(ch)`` names the class of a character that memory text may not hold, else None:
  ``NUL``; ``C0 control`` (U+0001–U+001F except tab and line feed, carriage return aside);
  ``carriage return``; ``DEL``; ``C1 control`` (U+0080–U+009F); ``bidirectional control`` (the
  embeddings and overrides U+202A–U+202E and the isolates U+2066–U+2069); ``line or paragraph
  separator`` (U+2028/U+2029); ``surrogate`` (a lone UTF-16 half, never valid text).
- ``find_unsafe(text)`` returns ``(index, class)`` of the first such character, or None.
- ``for_terminal(text)`` makes every such character visible instead of letting a terminal act on
  it: C0 controls and DEL in caret notation as ``cat -v`` shows them (``^@`` NUL, ``^G`` BEL,
  ``^[`` ESC, ``^M`` a lone CR, ``^?`` DEL); every other class as ``\\u`` plus four hex digits
  (``\\u009b``, ``\\u202e``, ``\\u2028``). A CR that ends a line (CRLF, valid in a hand-edited
  document) shows as the plain line break it is. Tab and line feed pass unchanged, and so does
  every other character. ``cat -v``'s ``M-`` form is not used for C1: it describes bytes, and in
  UTF-8 a C1 character is two bytes, so the code point form is the one that names it.

Decisions:
- A carriage return is refused in new text: cm writes LF only, the section model already refuses a
  CR that does not end a line (a line-based reader would not see the heading it hides), and on a
  terminal a CR moves the cursor back so later text overwrites what came before.
- The bidirectional marks U+200E/U+200F/U+061C are allowed: they are how right-to-left prose places
  punctuation, and they only affect neighbouring neutral characters, so they cannot reorder the
  visible text the way overrides and isolates can (the "Trojan Source" set refused above).
- U+2028/U+2029 are refused: some readers break lines on them and others do not, so they could
  hide a line from the line-based section model or shift what a person sees.
Stdlib only, no state (hook and read path).
"""

from __future__ import annotations

import re

_UNSAFE_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
_SHOW_RE = re.compile("\r\n|" + _UNSAFE_RE.pattern)


def unsafe_class(ch: str) -> str | None:
    """The class of ``ch`` when memory text may not hold it (see module contract), else None."""
    if not _UNSAFE_RE.fullmatch(ch):
        return None
    code = ord(ch)
    if code == 0:
        return "NUL"
    if code == 0x0D:
        return "carriage return"
    if code < 0x20:
        return "C0 control"
    if code == 0x7F:
        return "DEL"
    if code <= 0x9F:
        return "C1 control"
    if code in (0x2028, 0x2029):
        return "line or paragraph separator"
    if 0xD800 <= code <= 0xDFFF:
        return "surrogate"
    return "bidirectional control"


def find_unsafe(text: str) -> tuple[int, str] | None:
    """``(index, class)`` of the first character memory text may not hold, or None."""
    match = _UNSAFE_RE.search(text)
    if match is None:
        return None
    return match.start(), unsafe_class(match.group()) or "control"


def _visible(match: re.Match[str]) -> str:
    found = match.group()
    if found == "\r\n":
        return "\n"
    code = ord(found)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"\\u{code:04x}"


def for_terminal(text: str) -> str:
    """``text`` with every character a terminal could act on shown visibly (see module contract)."""
    if _UNSAFE_RE.search(text) is None:
        return text
    return _SHOW_RE.sub(_visible, text)
