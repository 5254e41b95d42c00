"""The user's list of findings that are not secrets, keyed by fingerprint (never by value).

Contract
- The file is ``<home>/secrets-allow.json`` (0600, written with ``fsutil.write_atomic``):
  ``{"version": 1, "fingerprints": {"<16 hex>": {"rule": "<rule id>", "addedAt": <ms>}}}``. A
  fingerprint is ``safety.fingerprint(rule, value)``: one-way, so the file never holds a value.
- ``load(home)`` returns the allowed fingerprints; a missing file is an empty list, and so is an
  unreadable or malformed one (a broken allow-list must never make cm deliver more than it would
  without one; ``cm doctor`` reports it through ``problem(home)``). Reading needs no SQLite, so the
  read path (SessionStart injection) honours the list too.
- ``add(home, fingerprint, rule)`` and ``remove(home, fingerprint)`` rewrite the file atomically;
  a fingerprint is exactly 16 lowercase hex digits (``INVALID_FINGERPRINT`` otherwise).
Stdlib only (read path).
"""

from __future__ import annotations

import json
import os
import re
import time

from cmrunner.core import fsutil
from cmrunner.core.errors import CmError

FILE_NAME = "secrets-allow.json"
_LIMIT = 1 << 20
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")


def path(home: str) -> str:
    return os.path.join(home, FILE_NAME)


def _read(home: str) -> dict:
    raw = fsutil.read_regular_file(path(home), _LIMIT, "the secrets allow-list")
    if raw is None:
        return {"version": 1, "fingerprints": {}}
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("fingerprints"), dict):
        raise ValueError("not a version 1 allow-list")
    return data


def load(home: str) -> frozenset[str]:
    try:
        data = _read(home)
    except (CmError, ValueError, UnicodeDecodeError):
        return frozenset()
    return frozenset(fp for fp in data["fingerprints"] if isinstance(fp, str) and _FINGERPRINT.fullmatch(fp))


def entries(home: str) -> dict[str, dict]:
    """Every allowed fingerprint with what was recorded about it (its rule, when it was added)."""
    try:
        data = _read(home)
    except (CmError, ValueError, UnicodeDecodeError):
        return {}
    return {fp: dict(info) if isinstance(info, dict) else {} for fp, info in data["fingerprints"].items()
            if isinstance(fp, str) and _FINGERPRINT.fullmatch(fp)}


def problem(home: str) -> str | None:
    """Why the allow-list cannot be used, or None when it is fine or absent."""
    try:
        _read(home)
    except CmError as exc:
        return exc.message
    except (ValueError, UnicodeDecodeError):
        return f"{path(home)} is not a valid allow-list; fix or delete it (it is ignored meanwhile)"
    return None


def check_fingerprint(fingerprint: str) -> str:
    value = fingerprint.strip().lower()
    if not _FINGERPRINT.fullmatch(value):
        raise CmError("INVALID_FINGERPRINT",
                      "a fingerprint is 16 hex digits as `cm secrets list` shows it; copy it from there")
    return value


def _write(home: str, data: dict) -> None:
    fsutil.ensure_private_dir(home, "the configuration home")
    fsutil.write_atomic(path(home), (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def _read_for_change(home: str) -> dict:
    """The allow-list about to be changed; a damaged one is refused rather than overwritten."""
    try:
        return _read(home)
    except (ValueError, UnicodeDecodeError):
        raise CmError("INVALID_ALLOWLIST", f"{path(home)} is not a valid allow-list; fix or delete it, then retry") \
            from None


def add(home: str, fingerprint: str, rule: str | None) -> bool:
    """Allow ``fingerprint``; False when it was already allowed."""
    fingerprint = check_fingerprint(fingerprint)
    data = _read_for_change(home)
    if fingerprint in data["fingerprints"]:
        return False
    data["fingerprints"][fingerprint] = {"rule": rule, "addedAt": int(time.time() * 1000)}
    _write(home, data)
    return True


def remove(home: str, fingerprint: str) -> bool:
    fingerprint = check_fingerprint(fingerprint)
    data = _read_for_change(home)
    if data["fingerprints"].pop(fingerprint, None) is None:
        return False
    _write(home, data)
    return True
