"""What the user sees and does about secrets: findings in memory, the allow-list, the quarantine.

Contract
- ``gather(home)`` refreshes the findings cache (``withhold.refresh``, the deep scan) and
  returns every ``secret.*`` finding of the current memory documents as ``Row(target, unit,
  where, rule, fingerprint, allowed, preview)``: ``where`` is the section's heading, or its
  position when the heading takes part in the finding; ``preview`` (with ``previews=True``, for
  ``cm secrets list`` and the terminal UI only) is the matched span masked to its first and last
  characters and its length (``w…2 (38)``), so a user tells a false alarm at a glance; never a value. It also
  counts quarantined observations whose kept text failed the scan (SQLite, only if the database
  exists; never created here).
- ``allow(home, fingerprint)`` adds a fingerprint to the allow-list (``allowlist``), recording the
  rule when a current finding has it; ``disallow`` removes one.
- ``purge_quarantine(home)`` drops now the text of every quarantined observation that failed the
  sensitive-content scan (the rows and their issue codes stay); the 7-day retention does the same
  on its own (``observations.prune_quarantined``).
- ``line(row)`` is a finding's one-line form, shared by ``cm secrets list`` and the terminal UI.
The core never prints: ``cm secrets``, ``cm status``, ``cm doctor`` and the terminal UI do.
"""

from __future__ import annotations

import os
import sqlite3
from typing import NamedTuple

from cmrunner.core import config as config_mod
from cmrunner.core.home import DataPaths
from cmrunner.secrets import allowlist, safety, withhold


class Row(NamedTuple):
    target: str
    unit: int
    where: str
    rule: str
    fingerprint: str
    allowed: bool
    preview: str = "?"   # the matched span masked to its first and last characters (``safety.preview``)

    def as_dict(self) -> dict:
        return {"target": self.target, "section": self.where, "unit": self.unit, "rule": self.rule,
                "preview": self.preview, "fingerprint": self.fingerprint, "allowed": self.allowed}


class Report(NamedTuple):
    rows: list[Row]
    quarantined: int | None   # None when there is no database yet

    @property
    def withheld(self) -> list[Row]:
        return [row for row in self.rows if not row.allowed]


def _paths(home: str) -> DataPaths:
    return DataPaths(config_mod.load(home).data_root)


def rows_of(target: str, markdown: str, found: list[withhold.UnitFinding], allowed: frozenset[str]) -> list[Row]:
    parts = withhold.units(markdown)
    rows = []
    for finding in found:
        if finding.unit == 0:
            where = "text before the first section"
        elif finding.title_shown and finding.unit < len(parts):
            where = f"section '{parts[finding.unit].partition(chr(10))[0][3:].strip()}'"
        else:
            where = f"section {finding.unit} (heading withheld)"
        rows.append(Row(target, finding.unit, where, finding.rule, finding.fingerprint,
                        finding.fingerprint in allowed))
    return rows


def with_previews(rows: list[Row], markdown: str) -> list[Row]:
    """``rows`` of one document with the masked matched span of each (a deep scan of its section)."""
    parts = withhold.units(markdown)
    out = []
    for row in rows:
        text = parts[row.unit] if row.unit < len(parts) else markdown
        shown = safety.preview(text, row.fingerprint) or safety.preview(markdown, row.fingerprint) or "?"
        out.append(row._replace(preview=shown))
    return out


def gather(home: str, write: bool = True, previews: bool = False) -> Report:
    """Every finding of the current documents; ``previews`` adds each one's masked matched span
    (``cm secrets list`` and the terminal UI; ``cm status`` and ``cm doctor`` never show one)."""
    paths = _paths(home)
    allowed = allowlist.load(home)
    rows: list[Row] = []
    for target, markdown, found in withhold.refresh(paths, write):
        mine = rows_of(target, markdown, found, allowed)
        rows += with_previews(mine, markdown) if previews and mine else mine
    return Report(rows, _quarantined(paths))


def summary(home: str) -> dict:
    """For ``cm status --json`` and ``cm doctor``: withheld sections (no value), allow-list, scanner."""
    report = gather(home, write=False)
    return {"withheld": [{"target": r.target, "section": r.where, "rule": r.rule, "fingerprint": r.fingerprint}
                         for r in report.withheld],
            "allowed": len([r for r in report.rows if r.allowed]), "quarantinedSecrets": report.quarantined,
            "allowListProblem": allowlist.problem(home), "deepScanner": safety.deep_scanner_version()}


def line(row: Row) -> str:
    """One finding as ``cm secrets list`` and the terminal UI show it: the masked preview, never the value."""
    return (f"{row.target}  {row.where}  {row.rule}  {row.preview}  {'allowed' if row.allowed else 'withheld'}  "
            f"{row.fingerprint}")


def describe(item: dict) -> str:
    return f"{item['target']} {item['section']} ({item['rule']})"


def _quarantined(paths: DataPaths) -> int | None:
    from cmrunner.capture import observations
    from cmrunner.core import store

    conn = store.open_existing(paths)  # read-only use; never creates the database
    if conn is None:
        return None
    try:
        from cmrunner.core import migrations

        if migrations.check_readable(conn) < 1:
            return None
        return observations.count_sensitive_quarantined(conn)
    except sqlite3.Error:  # a drain is creating the database right now: nothing to count yet
        return None
    finally:
        conn.close()


def allow(home: str, fingerprint: str) -> bool:
    fingerprint = allowlist.check_fingerprint(fingerprint)
    paths = _paths(home)
    rule = None
    for _target, _markdown, found in withhold.refresh(paths):
        rule = next((f.rule for f in found if f.fingerprint == fingerprint), rule)
    return allowlist.add(home, fingerprint, rule)


def disallow(home: str, fingerprint: str) -> bool:
    return allowlist.remove(home, fingerprint)


def purge_quarantine(home: str) -> int:
    paths = _paths(home)
    if not os.path.exists(paths.db):
        return 0
    from cmrunner.capture import observations
    from cmrunner.core import store

    conn = store.open_store(paths)
    try:
        with store.immediate(conn):
            return observations.purge_sensitive_quarantined(conn)
    finally:
        conn.close()
