"""Tests that fill the hourly request cap must not straddle the hour's end: the cap's window is a
UTC calendar hour, and a new hour resets the count midway through the case."""

from __future__ import annotations

import time

from cmrunner.core import spend

# A wall-clock margin, not a kill window: several times such a case's run, even under load.
MARGIN_MS = 90_000


def clear_of_the_hour_end() -> None:
    """Wait out the current hour if less than ``MARGIN_MS`` of it is left."""
    now = int(time.time() * 1000)
    left = spend.window("hour", now)[1] - now
    if left < MARGIN_MS:
        time.sleep(left / 1000 + 1)
