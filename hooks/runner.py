"""The boundary of every hook and capture process: arguments, one output line, exit codes.

Contract:
- Success prints exactly one JSON line on stdout and exits 0.
- Any failure prints one controlled line ``cm: CODE: message`` on stderr and exits 1. Exit 2 is
  never used: for Codex it would block the user's prompt, and cm must never stand between the
  user and their agent. Unexpected exceptions become ``INTERNAL_ERROR`` without a traceback or any
  event text, so user words never reach the host's logs through cm.
- Because every write happens in one transaction, a failure leaves no half-written row.
Stdlib only.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable

from cmrunner.core import jsonfast
from cmrunner.core.errors import CmError, InputError
from cmrunner.core.home import resolve_home


def parse_home(args: list[str], usage: str) -> str:
    """``--home <abs>`` (required to be absolute when given); else the environment's home."""
    home: str | None = None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--home" and rest:
            home = rest.pop(0)
        elif arg.startswith("--home="):
            home = arg.split("=", 1)[1]
        else:
            raise InputError("INVALID_ARGUMENTS", f"unexpected argument {arg!r}; usage: {usage}")
    return resolve_home(home)


def emit(result: dict) -> None:
    data = (jsonfast.dumps(result, separators=(",", ":")) + "\n").encode("utf-8")
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def run(body: Callable[[], dict]) -> int:
    """Run one hook body under the contract above; returns the exit code."""
    try:
        emit(body())
        return 0
    except CmError as exc:
        message = exc.line()
    except sqlite3.Error:
        message = "cm: STORE_UNAVAILABLE: the runtime database failed; run `cm status` to check it"
    except MemoryError:
        message = "cm: INTERNAL_ERROR: out of memory while handling the event"
    except Exception as exc:
        message = f"cm: INTERNAL_ERROR: unexpected {type(exc).__name__}; please report it"
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except OSError:
        pass
    return 1
