"""The boundary of every hook and capture process: arguments, one output line, exit codes.

Contract:
- Success prints exactly one JSON line on stdout and exits 0.
- Any failure prints one controlled line ``cm: CODE: message`` on stderr and exits 1. Exit 2 is
  never used: for Codex it would block the user's prompt, and cm must never stand between the
  user and their agent. Unexpected exceptions become ``INTERNAL_ERROR`` without a traceback or any
  event text, so user words never reach the host's logs through cm; input cm can classify never
  gets there (``hooks.stdin``, ``cmrunner.core.strictjson``). Each one is a cm bug and is recorded
  like a drain failure (``drainfailures``, process ``hook`` or ``capture``) for ``cm status``.
- Because every write happens in one transaction, a failure leaves no half-written row:
  ``admit_event`` is the set-up the Codex, Claude Code and Gemini CLI hooks share around it
  (configuration, the host instance, the scope of ``cwd``, a SessionStart's read of memory, one
  ``BEGIN IMMEDIATE``; the connection is closed on failure only, see ``cmrunner.core.db``).
Stdlib only; what ``admit_event`` needs every hook that imports this module already loads.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable

from cmrunner.core import config as config_mod, jsonfast, projects, store
from cmrunner.core.errors import CmError, InputError
from cmrunner.core.home import DataPaths, resolve_home

TYPE_CHECKING = False
if TYPE_CHECKING:  # the reader loads only where memory is read: per-turn events skip it (issue 35)
    from cmrunner.reading import reader

INTERNAL_CODE = "INTERNAL_ERROR"  # the same as ``drainfailures.INTERNAL_CODE`` (not imported: hook budget)


# The home this process works for, once known: an INTERNAL_ERROR is recorded there (``_record``).
_home: list[str] = []


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
    resolved = resolve_home(home)
    _home[:] = [resolved]
    return resolved


def emit(result: dict) -> None:
    data = (jsonfast.dumps(result, separators=(",", ":")) + "\n").encode("utf-8")
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def context_output(event_name: str, block: str, warning: str | None) -> dict:
    """The answer that puts ``block`` in the agent's context (Codex, Claude Code and Gemini CLI read
    the same shape) and shows ``warning``, if any, to the user."""
    out: dict = {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": block}}
    if warning:
        out["systemMessage"] = warning
    return out


Admit = Callable[[sqlite3.Connection, config_mod.Config, str, str, "reader.MemoryView | None"], dict]


def admit_event(home: str, cwd: str, reading: bool, instance: Callable[[], str], admit: Admit) -> dict:
    """Run ``admit(conn, cfg, instance, scope, fresh)`` in one ``BEGIN IMMEDIATE`` transaction, after
    loading the configuration, identifying the host process (``instance``), resolving the scope of
    ``cwd`` and, when ``reading``, reading the authorized memory (``fresh``, else ``None``) — in
    that order, so the first failure is the one reported."""
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    host = instance()
    scope = projects.scope_for(paths, cwd)
    fresh: reader.MemoryView | None = None
    if reading:
        from cmrunner.reading import reader

        contexts = reader.authorized_contexts(cfg.allowed_scopes, scope if scope != "global" else None)
        fresh = reader.read_memory(paths, contexts, home)
    conn = store.open_store(paths, store.HOOK_BUSY_MS)
    # Closed only on failure: after a commit it is left to the process exit (cmrunner.core.db, "hook connections").
    try:
        with store.immediate(conn, store.HOOK_BUSY_MS):
            return admit(conn, cfg, host, scope, fresh)
    except BaseException:
        conn.close()
        raise


def _record(exc: Exception, process: str) -> None:
    """Keep a cm bug where ``cm status`` shows it ("last drain failure": class and
    ``file:line:function`` only). Loaded only on this path."""
    if not _home:
        return
    try:
        from cmrunner.core import config as config_mod, drainfailures, store
        from cmrunner.core.home import DataPaths

        paths = DataPaths(config_mod.load(_home[0]).data_root)
    except Exception:  # no usable configuration: nowhere to record it
        return
    drainfailures.record_bug(paths, process, exc, store.HOOK_BUSY_MS)


def run(body: Callable[[], dict], process: str = "hook") -> int:
    """Run one hook body under the contract above; returns the exit code. ``process`` names it
    in the failure record."""
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
        message = f"cm: {INTERNAL_CODE}: unexpected {type(exc).__name__}; please report it (`cm status` shows where)"
        _record(exc, process)
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except OSError:
        pass
    return 1
