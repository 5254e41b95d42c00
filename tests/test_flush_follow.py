"""``cm flush`` that finds another drain holding the lease follows it, then finishes what it left.

A drain started before the flush was asked for (a capture's drain, spawned before a model was
configured, say) may end with work it would not do; the flush must not report that as done.
Real ``cm`` subprocesses, a real store, the loopback synthetic model.
"""

from __future__ import annotations

import subprocess
import time

from agent_support import configure_remote, policy
from conftest import CM, db_rows, hook_env
from test_poison import valid_pi_session

from cmrunner.core import config as config_mod, jobstore, store
from cmrunner.core.home import DataPaths
from cmrunner.synthetic import fakemodel


def _flush_requested(home: str) -> bool:
    conn = store.open_store(DataPaths(config_mod.load(home).data_root))
    try:
        return jobstore.flush_requested(conn)
    finally:
        conn.close()


def test_a_flush_that_followed_a_drain_runs_its_own_pass_over_what_it_left(home, tmp_path, quiet_drain):
    configure_remote(home, "http://127.0.0.1:9/v1")
    text = "After the outage I still use helix as my editor"
    valid_pi_session(home, "p1", text)  # admitted; the drain holding the lease never consumes it
    assert db_rows(home, "SELECT COUNT(*) FROM observations") == [(0,)]
    with fakemodel.running(str(tmp_path / "fm"), policy()) as fm:
        data = config_mod.load(home).data
        data["remote"]["baseUrl"] = fm.base_url
        config_mod.save(home, data)
        flush = subprocess.Popen([CM, "flush"], env=hook_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # The flush records its request in the transaction that finds the live holder.
            deadline = time.monotonic() + 60  # polled: only bounds a hang
            while not _flush_requested(home):
                assert time.monotonic() < deadline and flush.poll() is None, "the flush never asked"
                time.sleep(0.02)
            quiet_drain()  # the holder ends having done nothing with the session
            out, err = flush.communicate(timeout=120)
        finally:
            flush.kill()
            flush.wait()
    assert flush.returncode == 0, err + out
    assert b"followed it to the end" in out and b"committed" in out
    assert db_rows(home, "SELECT state FROM observations WHERE text = ?", (text,)) == [("processed",)]
