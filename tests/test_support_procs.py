"""The tests' own drain finder: ``wait_no_drain`` returns only when no drain is alive, and says so
when one outlives its timeout instead of returning as if it had finished."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support.procs import drain_pids, wait_no_drain


def test_wait_no_drain_raises_while_a_drain_lives_and_returns_once_it_is_gone(home):
    # A stand-in whose command line names a drain of this home, as the real one's does.
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "session-drain", home])
    try:
        # Popen returns once exec has closed the close-on-exec pipe, which the kernel does before it
        # sets the new command line; under load /proc/<pid>/cmdline can still read empty just after.
        deadline = time.monotonic() + 10
        while drain_pids(home) != [stand_in.pid] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert drain_pids(home) == [stand_in.pid]
        with pytest.raises(TimeoutError, match=str(stand_in.pid)):
            wait_no_drain(home, timeout=0.2)
    finally:
        stand_in.kill()
        stand_in.wait()
    wait_no_drain(home, timeout=5)
    assert drain_pids(home) == []
