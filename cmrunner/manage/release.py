"""``cm release``: send quarantined observations back to the queue where their reason allows it.

Contract:
- One observation by id, or every quarantined observation with one code. The policy is
  ``reasons.releasable``: never secrets or sensitive content, unauthorized scope or provenance,
  forgotten or unclassifiable sources. A refusal is ``RELEASE_REFUSED`` and changes nothing.
- Only observations whose text is still kept are released (a pruned one has nothing to send).
- An observation that belongs to a quarantined job is revived with ``cm retry <job id>`` instead,
  so a job and its observations never disagree.
- The release, a flush request and the drain reservation share one ``BEGIN IMMEDIATE``
  transaction: a released observation is pending and a consumer is on its way. The Writer checks
  it again exactly like new work (scan, caps, authorization).
"""

from __future__ import annotations

import os

from cmrunner.capture import observations
from cmrunner.core import config as config_mod, drainlease, jobstore, reasons, store
from cmrunner.core.errors import CmError, InputError
from cmrunner.core.home import DataPaths


def _refuse(code: str | None) -> CmError:
    entry = reasons.explain(code)
    return CmError("RELEASE_REFUSED", f"{code} cannot be released: {entry.reason}; {entry.fix or 'it is final'}")


def release(home: str, observation_id: int | None, code: str | None) -> tuple[int, str]:
    """Release by id or by code (exactly one); returns (how many were released, their code)."""
    if (observation_id is None) == (code is None):
        raise InputError("INVALID_ARGUMENTS", "give one observation id or --code CODE (see `cm status`)")
    paths = DataPaths(config_mod.load(home).data_root)
    if not os.path.isfile(paths.db):
        raise CmError("NOTHING_TO_RELEASE", "nothing has been queued yet")
    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            rows = observations.quarantined(conn, observation_id, code)
            if observation_id is not None:
                if not rows:
                    raise CmError("UNKNOWN_OBSERVATION", f"no observation has id {observation_id}; see `cm status`")
                if rows[0][1] != "quarantined":
                    raise CmError("NOT_QUARANTINED", f"observation {observation_id} is {rows[0][1]}; only quarantined "
                                                     "observations can be released")
                code = rows[0][2]
            elif not rows:
                raise CmError("NOTHING_TO_RELEASE", f"no observation is quarantined with {code}; see `cm status`")
            if not reasons.releasable(code):
                raise _refuse(code)
            held = sorted({r[3] for r in rows if r[3] is not None})
            if held:
                raise CmError("RELEASE_REFUSED", f"these observations belong to job {held[0][:12]}; revive it with "
                                                 f"`cm retry {held[0][:12]}`")
            kept = [r[0] for r in rows if r[4]]
            if not kept:
                raise CmError("NOTHING_TO_RELEASE", "the text of these observations is no longer kept (pruned); "
                                                    "nothing can be sent again")
            count = observations.release(conn, kept)
            jobstore.request_flush(conn)
            drainlease.ensure_drain(conn, home)
    finally:
        conn.close()
    return count, str(code)
