"""What cm spends: the disclosure ledger as ``cm usage``, ``cm status`` and the terminal UI show it.

Contract:
- Read-only: the store is opened read-only if it exists and never created or migrated; a store
  from before the ledger reads as empty.
- ``gather(home, since_ms)`` returns one dict (``cm usage --json`` prints it as is): ``today`` and
  ``month`` (UTC), ``total`` since ``since_ms`` (all kept rows without it), the same totals
  ``byDay``, ``byMonth``, ``byModel`` (host, model and protocol), ``byOutcome`` and ``byGrant``
  (what left this machine per scope and provenance class; a request counts under every scope and
  class of its grant), ``daily`` (tokens and requests of each of the last ``CHART_DAYS`` days,
  zero-filled, for the chart), ``caps`` (each cap with its window's use) and ``blocked`` (the
  reached cap, or ``None``).
- ``parse_since`` is the one grammar of ``--since``: ``YYYY-MM-DD``, ``YYYY-MM`` or ``<N>d``
  (the last N days); anything else is ``INVALID_SINCE``.
- Rendering (``lines``, ``status_line``, ``chart``, ``cache_text``) is plain text: names, counts and
  codes only; ``cm usage`` says how many input tokens the providers' prompt caches served, over
  everything it reports, where the providers report them (the ledger's ``cached_tokens``).
"""

from __future__ import annotations

import datetime
import re
import sqlite3
import time

from cmrunner.core import config as config_mod, ledger, spend, store
from cmrunner.core.errors import InputError
from cmrunner.core.home import DataPaths

CHART_DAYS = 30
DAY_MS = 86_400_000
_SINCE = re.compile(r"^(?:(\d{4})-(\d{2})(?:-(\d{2}))?|(\d{1,4})d)$")
_EMPTY = ledger.empty()


def parse_since(text: str, now: int | None = None) -> int:
    """``--since`` as ms since the epoch (UTC midnight of the day or month, or N days back)."""
    match = _SINCE.match(text.strip())
    if match is None:
        raise InputError("INVALID_SINCE", f"--since takes YYYY-MM-DD, YYYY-MM or <N>d (the last N days), not {text!r}")
    year, month, day, days = match.groups()
    if days is not None:
        return (int(time.time() * 1000) if now is None else now) - int(days) * DAY_MS
    try:
        moment = datetime.datetime(int(year), int(month), int(day or 1), tzinfo=datetime.UTC)
    except ValueError:
        raise InputError("INVALID_SINCE", f"--since {text!r} is not a real date; use YYYY-MM-DD") from None
    return int(moment.timestamp() * 1000)


def _daily(rows: list[tuple[str, dict]], now: int) -> list[dict]:
    found = dict(rows)
    series = []
    for back in range(CHART_DAYS - 1, -1, -1):
        day = datetime.datetime.fromtimestamp((now - back * DAY_MS) / 1000, datetime.UTC).strftime("%Y-%m-%d")
        totals = found.get(day, _EMPTY)
        series.append({"day": day, "tokens": totals["tokens"], "requests": totals["requests"]})
    return series


def _summary(conn: sqlite3.Connection, caps: spend.Caps, now: int) -> dict:
    block = spend.blocked(conn, caps, now)
    return {"today": ledger.totals(conn, spend.window("day", now)[0]),
            "month": ledger.totals(conn, spend.window("month", now)[0]),
            "caps": spend.standing(conn, caps, now), "blocked": block.describe() if block else None}


def _read(conn: sqlite3.Connection, caps: spend.Caps, since_ms: int | None, now: int) -> dict:
    found = ledger.breakdown(conn, since_ms)
    return {
        **_summary(conn, caps, now),
        "total": found["total"],
        "byDay": [{"day": k, **v} for k, v in found["byDay"]],
        "byMonth": [{"month": k, **v} for k, v in found["byMonth"]],
        "byModel": [{"model": k, **v} for k, v in found["byModel"]],
        "byOutcome": [{"outcome": k, **v} for k, v in found["byOutcome"]],
        "byGrant": [{"scope": s, "provenance": p, **v} for s, p, v in found["byGrant"]],
        "daily": _daily(ledger.breakdown(conn, now - CHART_DAYS * DAY_MS)["byDay"], now),
    }


def _empty(caps: spend.Caps, now: int) -> dict:
    return {"today": dict(_EMPTY), "month": dict(_EMPTY), "total": dict(_EMPTY), "byDay": [], "byMonth": [],
            "byModel": [], "byOutcome": [], "byGrant": [], "daily": _daily([], now),
            "caps": [{"cap": name, "limit": caps.limit(name), "used": 0, "windowStart": None, "windowEnd": None}
                     for name in spend.NAMES],
            "blocked": None}


def read(conn: sqlite3.Connection | None, cfg: config_mod.Config, since_ms: int | None = None,
         now: int | None = None, brief: bool = False) -> dict:
    """The report from an open (read-only) store, or an empty one (module contract); ``brief``:
    only ``today``, ``month``, ``caps`` and ``blocked`` (what ``cm status`` shows)."""
    now = int(time.time() * 1000) if now is None else now
    caps = spend.Caps.of(cfg.spend)
    report: dict
    try:
        if conn is None:
            raise sqlite3.OperationalError("no store")
        report = _summary(conn, caps, now) if brief else _read(conn, caps, since_ms, now)
    except sqlite3.OperationalError:  # no store yet, or one from before the ledger (status never migrates)
        report = _empty(caps, now)
    return {"since": since_ms, **report}


def gather(home: str, since_ms: int | None = None) -> dict:
    cfg = config_mod.load(home)
    conn = store.open_existing(DataPaths(cfg.data_root))
    try:
        return read(conn, cfg, since_ms)
    finally:
        if conn is not None:
            conn.close()


# -- text ------------------------------------------------------------------------------------

def _size(count: int) -> str:
    for unit, step in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= step:
            return f"{count / step:.1f} {unit}"
    return f"{count} B"


def _tokens(count: int) -> str:
    return f"{count / 1e6:.2f} M" if count >= 1_000_000 else f"{count:,}"


def totals_text(totals: dict) -> str:
    text = (f"{totals['requests']:,} request(s), {_tokens(totals['tokens'])} tokens "
            f"({_tokens(totals['inputTokens'])} in, {_tokens(totals['outputTokens'])} out), "
            f"{_size(totals['bytesSent'])} sent, {_size(totals['bytesReceived'])} received")
    if totals["failed"]:
        text += f", {totals['failed']:,} failed"
    if totals["estimatedRequests"]:
        text += f"; tokens of {totals['estimatedRequests']:,} estimated"
    return text


def cache_text(totals: dict) -> str:
    """What the providers' prompt caches served, where they report it: the cached input tokens,
    which providers bill at a fraction of the input price (a tenth at OpenAI, DeepSeek and
    Anthropic), or ``""`` when none was reported."""
    cached, inputs = totals["cachedTokens"], totals["inputTokens"]
    if not cached or not inputs:
        return ""
    return (f"{cached:,} of {inputs:,} input tokens ({100 * cached / inputs:.0f}%) came from the provider's "
            "prompt cache, billed at a fraction of the input price")


def _cap_text(cap: dict) -> str:
    words = {"requestsPerHour": "requests this hour", "tokensPerDay": "tokens today", "tokensPerMonth": "tokens this month"}
    if cap["limit"] is None:
        return f"{words[cap['cap']]}: {_tokens(cap['used'])} (no cap)"
    return f"{words[cap['cap']]}: {_tokens(cap['used'])} of {_tokens(cap['limit'])}"


def status_line(report: dict) -> str:
    """``cm status``'s one line: today's and this month's spend against the caps."""
    today, month = report["today"], report["month"]
    text = (f"today {_tokens(today['tokens'])} tokens in {today['requests']:,} request(s), "
            f"this month {_tokens(month['tokens'])} tokens")
    limits = {c["cap"]: c["limit"] for c in report["caps"]}
    shown = [f"{_tokens(limits[k])}{unit}" for k, unit in (("tokensPerDay", "/day"), ("tokensPerMonth", "/month"))
             if limits.get(k) is not None]
    if shown:
        text += f" (caps {', '.join(shown)})"
    if report["blocked"]:
        text += f"; WAITING: {report['blocked']['message']}"
        waiting = report.get("importParts") or 0
        if waiting:
            verb = "waits" if waiting == 1 else "wait"
            text += f" ({waiting} import part{'s' if waiting != 1 else ''} {verb} for it; those already processed are kept)"
    return text


_EIGHTHS = " ▁▂▃▄▅▆▇█"


def chart(daily: list[dict], height: int = 5) -> list[str]:
    """A small column chart of tokens per day, oldest left: ``height`` rows of eighth blocks scaled
    to the busiest day (a day with any use shows at least a sliver), then the first and last day."""
    top = max((d["tokens"] for d in daily), default=0)
    eighths = [0 if not top else max(round(d["tokens"] / top * height * 8), 1 if d["requests"] else 0)
               for d in daily]
    rows = []
    for level in range(height, 0, -1):
        cells = (_EIGHTHS[min(8, max(0, n - (level - 1) * 8))] for n in eighths)
        rows.append(" ".join(cells).rstrip())
    width = max(len(daily) * 2 - 1, 11)
    first, last = (daily[0]["day"][5:], daily[-1]["day"][5:]) if daily else ("", "")
    return [f"busiest day: {_tokens(top)} tokens"] + rows + [f"{first:<{width - len(last)}}{last}"]


def grant_label(row: dict) -> str:
    """A ``byGrant`` row's scope and class as the user reads them (an empty grant: the probe)."""
    if row["scope"] == "-" and row["provenance"] == "-":
        return "nothing of yours (cm network-test)"
    return f"{row['scope']} · {row['provenance']}"


def _table(title: str, key: str, rows: list[dict]) -> list[str]:
    if not rows:
        return []
    return [title] + [f"  {row[key]:<32} {totals_text(row)}" for row in rows]


def lines(report: dict) -> list[str]:
    """``cm usage`` as text."""
    out = [f"today (UTC):   {totals_text(report['today'])}",
           f"this month:    {totals_text(report['month'])}"]
    if report["since"] is not None:
        out.append(f"since {spend.clock(report['since'])}: {totals_text(report['total'])}")
    out.append("caps:          " + "; ".join(_cap_text(c) for c in report["caps"]))
    cached = cache_text(report["total"])
    if cached:
        out.append(f"cache:         {cached}")
    if report["blocked"]:
        out.append(f"WAITING:       {report['blocked']['message']}")
    out.append("")
    out += _table("by day (UTC)", "day", report["byDay"][-CHART_DAYS:])
    out += _table("by month (UTC)", "month", report["byMonth"])
    out += _table("by provider and model", "model", report["byModel"])
    out += _table("by outcome", "outcome", report["byOutcome"])
    if report["byGrant"]:
        out.append("what left this machine, by scope and provenance class (a request counts under each it carried)")
        out += [f"  {grant_label(row):<44} {totals_text(row)}" for row in report["byGrant"]]
    if not report["total"]["requests"]:
        out.append("no model request recorded" + (" in this period" if report["since"] is not None else " yet"))
    return out
