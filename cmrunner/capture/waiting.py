"""How many of one scope's user turns are captured but not yet in memory: the freshness line's count.

A user turn travels: inbox row (admitted by a hook, not yet read by the drain) → session cache
(a ``buffered`` observation) → sealed (``pending``) → held by a job (``claimed``) → committed
(``processed``). Exactly one table holds it at each step, and the step that moves it deletes or
clears it in the table it leaves, in the same transaction; so summing each holder's share counts
every turn once:

- ``codex_candidates`` (Codex, ChatGPT Work): a UserPromptSubmit prompt until the consumer reads
  its delivery in the transcript (``text`` is cleared then, and dropped when its turn settled or
  its session ended without one, e.g. a prompt another hook blocked);
- ``pi_inbox``: a Pi user delivery with words, until the drain consumes it;
- ``hook_inbox`` (Claude Code, Gemini CLI): a typed prompt with words (never a command), until
  the drain consumes it;
- ``observations``: a captured turn in the session cache, sealed or held by a job (imports are
  not turns).

Each share is its owner's SQL (``WAITING_TURNS`` in ``observations``, ``codex_inbox``,
``pi_inbox``, ``hook_inbox``), a scalar subquery on a partial index by scope (m012, m013); this
module only adds them, in ONE statement, so a hook pays one query. An inbox row's scope was
frozen when it was admitted, as an observation's is. What can still over-count, briefly: an inbox
row that the drain will set aside (a Pi extension's input, a Gemini command's expansion, an image
turn) counts until it is consumed. Stdlib only (the hooks' reading SessionStart imports it).
"""

from __future__ import annotations

import sqlite3

from cmrunner.capture import codex_inbox, hook_inbox, observations, pi_inbox
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths

SHARES = (observations.WAITING_TURNS, codex_inbox.WAITING_TURNS, pi_inbox.WAITING_TURNS, hook_inbox.WAITING_TURNS)
STATEMENT = "SELECT " + " + ".join(SHARES)


def turns(conn: sqlite3.Connection, scope: str) -> int:
    """User turns of ``scope`` captured and not yet processed, wherever they are (see above)."""
    return int(conn.execute(STATEMENT, {"scope": scope}).fetchone()[0])


def turns_in(paths: DataPaths, scopes_: list[str]) -> int | None:
    """``turns`` summed over ``scopes_`` for a reader without a connection (Pi's read, MCP reads,
    ``cm show``): the store opened read-only, never created. ``None`` when there is none yet or it
    cannot be read (e.g. not yet migrated): the line then omits the count and the read goes on
    (``cm status`` reports the store)."""
    from cmrunner.core import store

    try:
        conn = store.open_existing(paths, store.HOOK_BUSY_MS)
    except (CmError, sqlite3.Error):
        return None
    if conn is None:
        return None
    try:
        return sum(turns(conn, scope) for scope in scopes_)
    except sqlite3.Error:
        return None
    finally:
        conn.close()
