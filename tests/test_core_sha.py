"""cmrunner.core.sha gives the same digests as hashlib (stored keys and transcript digests depend on it)."""

from __future__ import annotations

import hashlib

from cmrunner.core.sha import sha256


def test_builtin_sha256_matches_hashlib():
    for data in (b"", b"x", b"session|" * 1000, bytes(range(256)) * 40):
        assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    h = sha256(b"ab")
    h.update(b"c")
    assert h.hexdigest() == hashlib.sha256(b"abc").hexdigest()
