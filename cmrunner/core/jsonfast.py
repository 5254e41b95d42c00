"""JSON for the hook path without importing the ``json`` package.

Why: importing ``json`` loads ``re`` and compiles six patterns (about 1.8 ms of CPU a hook, measured
with paired runs), although parsing and encoding are done by its C accelerator ``_json``. This
module drives that same accelerator directly, the way ``json.loads`` / ``json.dumps`` do.

Contract:
- ``loads(text)`` returns what ``json.loads(text)`` returns for a ``str`` (strict, ``NaN`` and
  ``Infinity`` accepted, the last duplicate key wins) and raises what it raises: a malformed
  document is handed to ``json.loads`` itself, so only the error path imports the package.
- ``dumps(value, sort_keys=…, separators=…)`` returns exactly
  ``json.dumps(value, ensure_ascii=False, sort_keys=…, separators=…)``.
- Where ``_json`` is missing (not CPython), both fall back to the ``json`` package.
Stdlib only (hook path). Indented output (``indent=``) is not offered: it is never on the hook
path, so those writers use ``json`` itself.
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

_WHITESPACE = " \t\n\r"


class _Strict:
    """The decoder settings ``json.loads`` uses by default, as the C scanner reads them."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


# typeshed types make_scanner's context as a scanner; any object with the attributes above is what it reads.
_scan: Callable[[str, int], tuple[Any, int]] | None = (
    _accelerator.make_scanner(_Strict()) if _accelerator is not None else None  # type: ignore[arg-type]
)


def _package_loads(text: str) -> Any:
    import json

    return json.loads(text)


def loads(text: str) -> Any:
    """Parse one JSON document held in ``text`` (see module contract)."""
    if _scan is None or text.startswith("\ufeff"):  # not CPython, or a BOM the package refuses
        return _package_loads(text)
    end = len(text)
    start = 0
    while start < end and text[start] in _WHITESPACE:
        start += 1
    try:
        value, stop = _scan(text, start)
    except RecursionError:
        raise
    except Exception:
        # Malformed: the scanner reports errors through json.decoder, which it does not import
        # itself (a SystemError when nobody has). The package raises exactly what json.loads does.
        return _package_loads(text)
    while stop < end and text[stop] in _WHITESPACE:
        stop += 1
    if stop != end:
        return _package_loads(text)  # extra data: the package's own error
    return value


def _unsupported(value: object) -> object:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps(value: object, *, sort_keys: bool = False, separators: tuple[str, str] = (", ", ": ")) -> str:
    """``json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=separators)``."""
    if _accelerator is None:  # pragma: no cover - not CPython
        import json

        return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=separators)
    item_separator, key_separator = separators
    encode = _accelerator.make_encoder({}, _unsupported, _accelerator.encode_basestring, None, key_separator,
                                       item_separator, sort_keys, False, True)
    return "".join(encode(value, 0))
