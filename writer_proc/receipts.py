"""Receipts: the permanent, content-free record of one commit.

Contract: a receipt is canonical JSON (sorted keys, ASCII, one line plus a newline) holding only
ids, hashes, kinds, counts and times — never Markdown, section titles, bodies, reasons, prompts or
model output. ``assert_receipt_safe`` enforces that shape before a receipt is staged, so no code
path can write user text into ``runtime/receipts``. The Writer builds receipts
(``writer_proc.apply.build_receipt``); commit and recovery replay them (``writer_proc.commit``).
"""

from __future__ import annotations

import json
import math
import re

from cmrunner.core.errors import CmError

# Long enough for "project:<128-char id>:<sha256>" (201 chars), far too short for prose.
RECEIPT_STRING_LIMIT = 256
FORBIDDEN_RECEIPT_KEYS = frozenset({
    "markdown", "title", "titles", "heading", "body", "bodies", "reason", "reasons", "rationale",
    "text", "content", "contents", "raw", "rawoutput", "output", "message", "messages", "notes",
    "workingnotes", "prompt", "summary",
})

_RECEIPT_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def canonical_json(value: object) -> bytes:
    """Sorted keys, no spaces, ASCII only, one line plus a newline."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii") + b"\n"


def assert_receipt_safe(receipt: object) -> None:
    """``UNSAFE_RECEIPT`` unless ``receipt`` holds only ids, hashes, kinds, counts and times."""
    if not isinstance(receipt, dict):
        raise CmError("UNSAFE_RECEIPT", "a receipt must be a JSON object")
    _check_receipt_value(receipt, "receipt", 0)


def _check_receipt_value(value: object, where: str, depth: int) -> None:
    if depth > 16:
        raise CmError("UNSAFE_RECEIPT", f"{where} is nested too deeply for a receipt")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or not _RECEIPT_KEY_RE.fullmatch(key):
                raise CmError("UNSAFE_RECEIPT", f"{where} has a key that is not a field name; "
                                                "receipts key data by field, never by content")
            if key.lower().replace("_", "") in FORBIDDEN_RECEIPT_KEYS:
                raise CmError("UNSAFE_RECEIPT", f"{where}.{key} would carry text; receipts hold ids and hashes only")
            _check_receipt_value(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_receipt_value(item, f"{where}[{index}]", depth + 1)
    elif isinstance(value, str):
        if len(value) > RECEIPT_STRING_LIMIT or "\n" in value or "\r" in value:
            raise CmError("UNSAFE_RECEIPT", f"{where} is a long or multi-line string; receipts hold ids and hashes only")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise CmError("UNSAFE_RECEIPT", f"{where} is not a finite number")
    elif value is not None and not isinstance(value, (bool, int)):
        raise CmError("UNSAFE_RECEIPT", f"{where} is not a JSON value")
