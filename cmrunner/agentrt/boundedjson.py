"""JSON from a provider, parsed only within a size and a nesting-depth bound.

Contract:
- ``loads(data, max_bytes, max_depth=MAX_DEPTH)`` parses one JSON text (``str`` or UTF-8
  ``bytes``) or raises ``JsonRejected`` (a ``ValueError``) whose ``reason`` is ``too_large``
  (more than ``max_bytes`` UTF-8 bytes), ``too_deep`` (arrays/objects nested deeper than
  ``max_depth``) or ``invalid`` (not JSON, not UTF-8, or brackets that do not balance).
- The depth is checked before the parser runs, so a hostile text never reaches the recursive C
  scanner of ``json`` (which raises ``RecursionError`` near depth 1000, not ``ValueError``).
  The check is cheap: when the text holds no more than ``max_depth`` opening brackets it cannot be
  too deep; otherwise string literals are cut out and innermost ``[]``/``{}`` pairs are removed
  one level per pass (C-speed regex passes, at most ``max_depth`` of them, so linear in size).
- ``MAX_DEPTH`` (64) is far above anything the two wire protocols or a ``memory_maintenance_v2``
  decision need (about 8) and far below the recursion limit of any code that walks the result.
"""

from __future__ import annotations

import json
import re

MAX_DEPTH = 64

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_PAIR = re.compile(r"\[\]|\{\}")


class JsonRejected(ValueError):
    """Provider JSON refused before or while parsing; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"provider JSON refused: {reason}")
        self.reason = reason


def nesting(text: str, max_depth: int) -> str:
    """``ok``, ``too_deep`` (more than ``max_depth`` levels) or ``invalid`` (brackets do not balance)."""
    if text.count("[") + text.count("{") <= max_depth:
        return "ok"
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if re.search(r"[\[{]{" + str(max_depth + 1) + "}", brackets):
        return "too_deep"  # the usual attack, a long run of openers, needs no passes
    for _ in range(max_depth):
        if not brackets:
            return "ok"
        brackets, removed = _PAIR.subn("", brackets)
        if not removed:
            return "invalid"  # unbalanced or mismatched: not JSON, never parsed
    return "ok" if not brackets else "too_deep"


def loads(data: str | bytes, max_bytes: int, max_depth: int = MAX_DEPTH) -> object:
    """Parse ``data`` within the bounds (see module contract)."""
    if isinstance(data, (bytes, bytearray)):
        if len(data) > max_bytes:
            raise JsonRejected("too_large")
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise JsonRejected("invalid") from None
    else:
        # A str has at most 4 UTF-8 bytes per character: skip the encode when that fits.
        if len(data) * 4 > max_bytes and len(data.encode("utf-8", "surrogatepass")) > max_bytes:
            raise JsonRejected("too_large")
        text = data
    verdict = nesting(text, max_depth)
    if verdict != "ok":
        raise JsonRejected(verdict)
    try:
        return json.loads(text)
    except RecursionError:  # unreachable after the depth check; kept as a last line of defence
        raise JsonRejected("too_deep") from None
    except ValueError:
        raise JsonRejected("invalid") from None
