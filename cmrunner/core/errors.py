"""Domain errors with stable UPPER_SNAKE codes.

Contract: every failure that reaches a user or a host carries a stable ``code`` and a one-line
``message`` that says what to do next. Messages never contain keys, tokens, proxy credentials,
provider bodies or user text; callers pass only field names, paths they own and counts.
Only the CLI (or the hook entry) turns a ``CmError`` into output and an exit code.
Stdlib only: this module is imported on every hook path.
"""

from __future__ import annotations


class CmError(Exception):
    """A controlled failure: ``code`` is stable for scripts, ``message`` is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def line(self) -> str:
        """The single stderr line shown to users and hosts."""
        return f"cm: {self.code}: {self.message}"


class ConfigError(CmError):
    """The configuration file or private .env is invalid."""


class StoreError(CmError):
    """The runtime database could not be opened, migrated or written."""


class InputError(CmError):
    """A host event or command argument was rejected before anything was written."""
