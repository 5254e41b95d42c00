"""``cm usage caps``: change the Memory Agent's spend caps, and let waiting work go at once.

Contract: ``set_caps(home, changes)`` sets each named cap of ``config.json``'s ``spend`` section to
a count or ``None`` (no cap), validates and saves the file (``config.save``: atomic, durable), then,
when the store exists, reserves a drain in one transaction, so work a raised cap releases is
processed without waiting for the next host event. Returns the caps now in force (defaults filled).
"""

from __future__ import annotations

import copy
import os

from cmrunner.core import config as config_mod, drainlease, store
from cmrunner.core.home import DataPaths


def set_caps(home: str, changes: dict[str, int | None]) -> dict:
    cfg = config_mod.load(home)
    data = copy.deepcopy(cfg.data)
    data.setdefault("spend", {}).update(changes)
    config_mod.save(home, data)
    release_waiting(home)
    return config_mod.load(home).spend


def release_waiting(home: str) -> None:
    """Reserve a drain when the store exists, so work a raised cap releases goes now (also `cm config set spend.*`)."""
    paths = DataPaths(config_mod.load(home).data_root)
    if os.path.isfile(paths.db):
        conn = store.open_store(paths)
        try:
            with store.immediate(conn):
                drainlease.ensure_drain(conn, home)
        finally:
            conn.close()
