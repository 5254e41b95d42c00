"""Spend caps: how much the Memory Agent may send per hour, day and month, and whether it may now.

Contract:
- ``Caps`` is ``config.json``'s ``spend`` section with its defaults (``Config.spend``):
  ``tokensPerDay``, ``tokensPerMonth`` (input + output tokens as the ledger counts them) and
  ``requestsPerHour``; ``null`` means no cap, ``0`` turns the Memory Agent off.
- Windows are calendar periods in UTC (the clock hour, the day, the month), as providers bill;
  a cap is reached when what the ledger holds for its window is at or above it. A request is only
  ever refused before it is sent, so a cap can be passed by the request in flight, never by more.
- ``parse_cap`` is the one grammar of a cap as typed (CLI and terminal UI): ``INVALID_CAP`` else.
- ``blocked(conn, caps, now)`` returns the first reached cap as a ``Block`` (which cap, its limit,
  what was used, when its window ends) or ``None``. Work never dies of a cap: the Writer claims
  nothing while blocked and gives a job whose attempt met the cap back to wait (``SPEND_CAP_REACHED``),
  so raising the cap or the next window releases it.
Stdlib only.
"""

from __future__ import annotations

import datetime
import sqlite3
from dataclasses import dataclass

from cmrunner.core import ledger
from cmrunner.core.errors import CmError, InputError

CODE = "SPEND_CAP_REACHED"
# The caps in the order they are checked, with what they count and the window they reset on.
_CAPS = (("requestsPerHour", "requests", "hour"), ("tokensPerDay", "tokens", "day"),
         ("tokensPerMonth", "tokens", "month"))
_FLAGS = {"requestsPerHour": "--requests-per-hour", "tokensPerDay": "--tokens-per-day",
          "tokensPerMonth": "--tokens-per-month"}
_WORDS = {"requestsPerHour": "requests per hour", "tokensPerDay": "tokens per day", "tokensPerMonth": "tokens per month"}


NAMES = tuple(name for name, _counts, _period in _CAPS)


def parse_cap(name: str, text: str) -> int | None:
    """A cap as a user types it (``cm usage caps``, the terminal UI): a whole number (thousands
    separators allowed; 0 turns the Memory Agent off), or empty / ``off`` / ``none`` for no cap."""
    value = text.strip().replace(",", "").replace("_", "")
    if value.lower() in ("", "off", "none"):
        return None
    if not value.isdigit():
        raise InputError("INVALID_CAP", f"{name} takes a whole number (0 turns the Memory Agent off) or off "
                                        "(no cap)")
    return int(value)


@dataclass(frozen=True, slots=True)
class Caps:
    requests_per_hour: int | None
    tokens_per_day: int | None
    tokens_per_month: int | None

    @classmethod
    def of(cls, spend: dict) -> Caps:
        """From ``Config.spend`` (the section with its defaults filled in)."""
        return cls(spend["requestsPerHour"], spend["tokensPerDay"], spend["tokensPerMonth"])

    def limit(self, name: str) -> int | None:
        return {"requestsPerHour": self.requests_per_hour, "tokensPerDay": self.tokens_per_day,
                "tokensPerMonth": self.tokens_per_month}[name]


def _utc(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


def _ms(moment: datetime.datetime) -> int:
    return int(moment.timestamp() * 1000)


def window(period: str, now: int) -> tuple[int, int]:
    """The UTC calendar ``period`` (hour, day or month) holding ``now``: [start, end) in ms."""
    at = _utc(now)
    if period == "hour":
        start = at.replace(minute=0, second=0, microsecond=0)
        end = start + datetime.timedelta(hours=1)
    elif period == "day":
        start = at.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + datetime.timedelta(days=1)
    else:
        start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = start.replace(year=start.year + (start.month == 12), month=start.month % 12 + 1)
    return _ms(start), _ms(end)


def clock(ms: int) -> str:
    """A window's end as the user reads it: ``2026-12-03 00:00 UTC``."""
    return _utc(ms).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True, slots=True)
class Block:
    """A reached cap: which, its limit, what its window used, and when the window ends (ms)."""

    cap: str
    limit: int
    used: int
    until: int

    @property
    def message(self) -> str:
        flag = _FLAGS[self.cap]
        if self.limit == 0:
            return (f"spend.{self.cap} is 0, which turns the Memory Agent off; queued work waits until you raise "
                    f"it: `cm usage caps {flag} N`")
        return (f"the Memory Agent reached its cap of {self.limit:,} {_WORDS[self.cap]} ({self.used:,} used); queued "
                f"work waits until {clock(self.until)}, or raise it now: `cm usage caps {flag} N`")

    def error(self) -> CmError:
        return CmError(CODE, self.message)

    def describe(self) -> dict:
        return {"code": CODE, "cap": self.cap, "limit": self.limit, "used": self.used, "until": self.until,
                "message": self.message}


def standing(conn: sqlite3.Connection, caps: Caps, now: int) -> list[dict]:
    """Every cap, in checking order, with its window's use and bounds (one pass over the ledger)."""
    windows = [window(period, now) for _name, _counts, period in _CAPS]
    found = []
    for (name, counts, _period), (start, end), (tokens, requests) in zip(
            _CAPS, windows, ledger.used(conn, [start for start, _end in windows])):
        found.append({"cap": name, "limit": caps.limit(name), "used": requests if counts == "requests" else tokens,
                      "windowStart": start, "windowEnd": end})
    return found


def blocked(conn: sqlite3.Connection, caps: Caps, now: int) -> Block | None:
    """The first cap reached at ``now`` (see module contract), or ``None``."""
    if all(caps.limit(name) is None for name, _counts, _period in _CAPS):
        return None
    for cap in standing(conn, caps, now):
        if cap["limit"] is not None and cap["used"] >= cap["limit"]:
            return Block(cap["cap"], cap["limit"], cap["used"], cap["windowEnd"])
    return None
