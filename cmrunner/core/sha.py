"""SHA-256 for the hook path without loading OpenSSL.

Contract: ``sha256`` is the standard SHA-256 constructor (same digests as ``hashlib.sha256``).
``hashlib`` loads ``_hashlib`` (OpenSSL, ~2-3 ms per hook run); CPython's builtin ``_sha256``
(3.11) / ``_sha2`` (3.12+) gives identical digests for a fraction of that. Falls back to hashlib.
"""

from __future__ import annotations

try:
    from _sha256 import sha256
except ImportError:  # pragma: no cover - interpreter-dependent
    try:
        from _sha2 import sha256  # type: ignore[no-redef]
    except ImportError:
        from hashlib import sha256  # type: ignore[no-redef,assignment]

__all__ = ["sha256"]
