"""``cm session-refresh --home <abs> --client codex|chatgpt-work [--thread <id>]``.

The ``/memory-refresh`` skill runs this inside a Codex (or Work) session. It re-reads authorized
memory and replaces the frozen snapshot of exactly one active activation, marking it pending; the
next PostToolUse or UserPromptSubmit hook of that session delivers it.

Contract: the activation is chosen by (client, host process instance, thread) — the thread from
``--thread`` or ``CODEX_THREAD_ID``. Without a thread, the one active activation of that host
process is used; none is ``SESSION_REFRESH_ACTIVATION_REQUIRED``, several is
``SESSION_REFRESH_IDENTITY_REQUIRED``. The working directory alone never selects a session.

The tables ``host_activations`` and ``host_snapshots`` belong to ``cmrunner.capture.activations``;
this command and the Codex hook (``cmrunner.hooks.codex``: open and close activations, freeze,
deliver and drop snapshots, inside its one transaction) call it. Stdlib only.
"""

from __future__ import annotations

import os

from cmrunner.capture import activations, admission as capture, waiting
from cmrunner.core import config as config_mod, identity, projects, store
from cmrunner.core.errors import CmError, InputError
from cmrunner.core.home import DataPaths, resolve_home
from cmrunner.hooks import runner
from cmrunner.reading import reader

USAGE = "cm session-refresh --home <absolute path> --client codex|chatgpt-work [--thread <id>]"


def _args(argv: list[str]) -> tuple[str, str, str | None]:
    home = client = thread = None
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg in ("--home", "--client", "--thread") and rest:
            value = rest.pop(0)
            if arg == "--home":
                home = value
            elif arg == "--client":
                client = value
            else:
                thread = value
        else:
            raise InputError("INVALID_ARGUMENTS", f"usage: {USAGE}")
    if client not in ("codex", "chatgpt-work"):
        raise InputError("INVALID_ARGUMENTS", f"--client must be codex or chatgpt-work; usage: {USAGE}")
    return resolve_home(home), client, thread or os.environ.get("CODEX_THREAD_ID") or None


def refresh(home: str, client: str, thread: str | None) -> dict:
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    instance = identity.host_instance()
    conn = store.open_store(paths, store.HOOK_BUSY_MS)
    try:
        rows = activations.active(conn, client, instance, thread)
        if not rows:
            raise CmError("SESSION_REFRESH_ACTIVATION_REQUIRED",
                          "no active cm session belongs to this host process; start a new session instead")
        if len(rows) > 1:
            raise CmError("SESSION_REFRESH_IDENTITY_REQUIRED",
                          "several sessions of this host process are active; pass --thread or set CODEX_THREAD_ID")
        session_id, cwd, _thread = rows[0]
        scope = projects.scope_for(paths, cwd)
        contexts = reader.authorized_contexts(cfg.allowed_scopes, scope if scope != "global" else None)
        block, warning = reader.render_block(reader.read_memory(paths, contexts, home),
                                             waiting=waiting.turns(conn, scope), refresh=reader.REFRESH_COMMAND)
        with store.immediate(conn, store.HOOK_BUSY_MS):
            activations.replace_snapshot(conn, session_id, block, capture.canonical_json(contexts), capture.now_ms())
    finally:
        conn.close()
    result = {"refreshed": True, "deliveredWith": "the next tool result or prompt"}
    if warning:
        result["warning"] = warning
    return result


def main(argv: list[str]) -> int:
    def body() -> dict:
        home, client, thread = _args(argv)
        return refresh(home, client, thread)

    return runner.run(body)

