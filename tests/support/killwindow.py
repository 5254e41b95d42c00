"""Kill windows measured on this machine now, and a bounded CPU load to test them under.

Why: a crash test that SIGKILLs a real process after a fixed delay only means something while
the delay is comparable to how long the process runs, and that time moves several-fold with
the machine's load (a fixed ``uniform(0.0, 0.4)`` is all kills on a busy 2-core box and mostly
completions on an idle one). So a test measures a few whole unkilled runs first and draws its
kill delays from twice their median (``Window``): about half the kills then land before the
process would have ended, at any load.

Contract:
- ``measure`` runs the caller's ``run`` (which must start a process, wait for it to end and
  assert its success) ``runs`` times and returns the median duration in seconds. Keep ``runs``
  small: calibration costs whole runs of the suite's time.
- ``Window.delay`` draws from the caller's seeded ``random.Random`` only, so a test's sequence of
  draws is reproducible; only the scale (the measured median) moves with the machine.
- ``record`` appends the test's kill outcome as one JSON line to the file ``CM_KILL_STATS`` names
  (nothing when unset); ``bench/kill_windows.py`` reads them to report kill fractions.
- ``busy_cores`` starts ``count`` CPU-bound child processes that stop by themselves after
  ``seconds`` and are also SIGKILLed by PID on leaving the block, so a crashed caller never
  leaves load behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

STATS_ENV = "CM_KILL_STATS"

# A CPU-bound loop that ends on its own after argv[1] seconds, whatever happens to its parent.
_SPIN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def measure(run: Callable[[], None], runs: int = 3) -> float:
    """Median wall time, in seconds, of ``runs`` calls of ``run`` (each a whole, unkilled run)."""
    took = []
    for _ in range(runs):
        began = time.monotonic()
        run()
        took.append(time.monotonic() - began)
    return statistics.median(took)


@dataclass(frozen=True)
class Window:
    """Kill delays scaled to a measured run: ``start`` seconds of lead-in the kill should pass
    (0 for none), then ``span`` seconds of the work the kills should land in."""

    span: float
    start: float = 0.0

    def delay(self, rng: random.Random) -> float:
        """A kill delay: uniform over the lead-in plus twice the span, so about half the kills
        land within the span (mid-work) and the rest after the run would have ended."""
        return self.start + rng.uniform(0.0, 2 * self.span)


def record(test: str, **outcome: object) -> None:
    """Append ``{"test": test, **outcome}`` to the ``CM_KILL_STATS`` file, if one is named."""
    path = os.environ.get(STATS_ENV)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"test": test, **outcome}) + "\n")


@contextmanager
def busy_cores(count: int, seconds: float) -> Iterator[list[int]]:
    """``count`` busy-looping processes for at most ``seconds``; yields their PIDs."""
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN, str(seconds)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
