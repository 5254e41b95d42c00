"""Strict JSON for host input: what a hook, ``cm capture`` or an MCP call may hand cm.

Why: ``json`` (and ``jsonfast``) accept more than JSON — ``NaN``, ``Infinity``, numbers that
overflow to infinity, duplicate keys (the last wins), lone surrogate escapes (``"\\udbff"``, a
string that cannot be stored as UTF-8) and nesting deep enough to exhaust the stack of whatever
walks the value later. Each of those once passed admission and failed later, where no one could
say what was wrong. This module refuses them at the door, naming where they were found.

Contract:
- ``loads(text)`` parses one document with CPython's C scanner (the accelerator ``jsonfast`` uses;
  the ``json`` package is never imported, so the hook's import budget holds) and then ``check``s it.
  ``scan(text)`` is that parse alone (only ``syntax`` and ``depth`` raised), for a caller that
  must look at a document ``check`` refuses (``cm mcp`` reads the request id to answer it).
- ``check(value)`` walks an already-parsed value without recursion and raises ``Rejected`` for the
  first of: a non-finite float (``number``), a duplicate key (``duplicate``, only detectable when
  ``loads`` parsed it), nesting deeper than ``MAX_DEPTH`` (``depth``), a NUL character
  (``nul``, unless ``allow_nul``: NUL is strict JSON, refused as text by policy, and an entry
  may leave that to a later check that names the field), a lone surrogate in a string or key
  (``text``). A malformed document is ``syntax``.
- ``Rejected.field`` is where it was found as a dotted path of at most two keys (``payload.timestamp``),
  ``""`` for the document itself; keys that are not short ASCII identifiers are shown as ``?``, so a
  message built from it never carries user text.
- Callers map a ``Rejected`` to their entry's code (``code_for``): ``INVALID_TEXT`` for ``text``,
  ``INPUT_TOO_DEEP`` for ``depth``, their own ``INVALID_…_INPUT`` for the rest.
Stdlib only (hook path).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds at import; annotations here are never evaluated
    from collections.abc import Callable
    from typing import Any

try:
    import _json as _accelerator
except ImportError:  # pragma: no cover - not CPython
    _accelerator = None  # type: ignore[assignment]

# Real host events nest a handful of levels (a tool's input object, an MCP result); a hundred is
# far beyond any of them and far below the interpreter's recursion limit, which every later walk
# of the value (digest, canonical JSON, SQLite binding) shares.
MAX_DEPTH = 100
TEXT_CODE = "INVALID_TEXT"
DEPTH_CODE = "INPUT_TOO_DEEP"
_WHITESPACE = " \t\n\r"
_INF = float("inf")


class _Duplicate:
    """The key a parsed object gets when the document repeated one of its keys (never a ``str``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<duplicate key>"


DUPLICATE = _Duplicate()


class Rejected(ValueError):
    """Host input that is not strict JSON; ``kind`` says why and ``field`` where (module contract)."""

    def __init__(self, kind: str, field: str) -> None:
        super().__init__(f"{kind} at {field or 'top level'}")
        self.kind = kind
        self.field = field

    def what(self) -> str:
        """A short phrase for a one-line message (no user text)."""
        where = f"field '{self.field}'" if self.field else "the input"
        return {
            "syntax": "the input is not valid JSON",
            "number": f"{where} holds NaN, Infinity or a number too large to hold",
            "duplicate": f"{where} repeats a key",
            "depth": f"{where} is nested more than {MAX_DEPTH} levels deep",
            "nul": f"{where} contains a NUL character",
            "text": f"{where} holds a lone surrogate escape, which is not text",
        }.get(self.kind, f"{where} is invalid")


def code_for(rejected: Rejected, invalid_code: str) -> str:
    """The stable code of a rejection at an entry whose general code is ``invalid_code``."""
    if rejected.kind == "text":
        return TEXT_CODE
    if rejected.kind == "depth":
        return DEPTH_CODE
    return invalid_code


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    found = dict(pairs)
    if len(found) != len(pairs):
        found[DUPLICATE] = None  # type: ignore[index]
    return found


class _Settings:
    """The decoder settings the C scanner reads: strict strings, pairs kept to see duplicates."""

    strict = True
    object_hook = None
    object_pairs_hook = staticmethod(_pairs)
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": -_INF, "Infinity": _INF, "NaN": float("nan")}.__getitem__


_scan: Callable[[str, int], tuple[Any, int]] | None = (
    _accelerator.make_scanner(_Settings()) if _accelerator is not None else None  # type: ignore[arg-type]
)


def _package_scan(text: str) -> Any:  # pragma: no cover - not CPython
    import json

    return json.loads(text, object_pairs_hook=_pairs)


def loads(text: str) -> Any:
    """Parse and ``check`` one JSON document (see module contract)."""
    value = scan(text)
    check(value)
    return value


def scan(text: str) -> Any:
    """Parse one JSON document without ``check`` (see module contract)."""
    if text.startswith("\ufeff"):
        raise Rejected("syntax", "")
    try:
        if _scan is None:  # pragma: no cover - not CPython
            value = _package_scan(text)
        else:
            end = len(text)
            start = 0
            while start < end and text[start] in _WHITESPACE:
                start += 1
            value, stop = _scan(text, start)
            while stop < end and text[stop] in _WHITESPACE:
                stop += 1
            if stop != end:
                raise Rejected("syntax", "")
    except Rejected:
        raise
    except RecursionError:
        raise Rejected("depth", "") from None
    except Exception:  # the scanner's errors (StopIteration, ValueError, SystemError): all malformed
        raise Rejected("syntax", "") from None
    return value


def _label(key: object) -> str:
    if isinstance(key, str) and 0 < len(key) <= 40 and key.isascii() and key.replace("_", "").isalnum():
        return key
    return "?"


def _bad_text(value: str, allow_nul: bool = False) -> str | None:
    if not allow_nul and "\x00" in value:
        return "nul"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "text"
    return None


def check(value: Any, allow_nul: bool = False) -> None:
    """Walk ``value`` (iteratively) and raise ``Rejected`` for the first problem (module contract)."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            problem = _bad_text(item, allow_nul)
            if problem:
                raise Rejected(problem, where)
        elif isinstance(item, float):
            if item != item or item in (_INF, -_INF):
                raise Rejected("number", where)
        elif isinstance(item, dict):
            if depth >= MAX_DEPTH:
                raise Rejected("depth", where)
            for key, child in item.items():
                path = where if where.count(".") >= 1 else (f"{where}.{_label(key)}" if where else _label(key))
                if key is DUPLICATE:
                    raise Rejected("duplicate", where)
                if isinstance(key, str):
                    problem = _bad_text(key, allow_nul)
                    if problem:
                        raise Rejected(problem, where)
                stack.append((child, depth + 1, path))
        elif isinstance(item, list):
            if depth >= MAX_DEPTH:
                raise Rejected("depth", where)
            stack.extend((child, depth + 1, where) for child in item)
