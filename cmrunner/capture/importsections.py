"""The repository of ``import_sections``: what each imported source held, section by section.

Contract:
- A source is ``(scope, source key)``; the key is stable per source (``cm import --label``, or the
  file's real path; a ``--from`` file's source label). Each row is one section's digest with its
  heading path; ``current`` marks the sections of the source's last recorded import and
  ``generation`` numbers those imports (1, 2, …; 0 = never recorded).
- ``known`` answers the planner (read only); ``record`` runs inside the caller's ``BEGIN IMMEDIATE``
  transaction, the one that admits the import's parts, so the rows and the queue never disagree.
- ``carrier`` is the import namespace (``observations``) whose parts last sent a section's text:
  the importer asks that owner whether those parts were cancelled or quarantined.
- Rows are never deleted: a section removed from the file stays a row with ``current = 0``;
  nothing here forgets memory (the Writer owns memory, and an import never forgets).
Stdlib only.
"""

from __future__ import annotations

import sqlite3


def known(conn: sqlite3.Connection, scope: str, source: str) -> tuple[int, list[tuple[str, str, bool, str]]]:
    """(generation, [(digest, heading JSON, current, carrier namespace)]) of one source; generation 0
    when unrecorded."""
    rows = conn.execute("SELECT digest, heading, current, carrier, generation FROM import_sections"
                        " WHERE scope = ? AND source = ? ORDER BY rowid", (scope, source)).fetchall()
    generation_ = max((int(r[4]) for r in rows), default=0)
    return generation_, [(r[0], r[1], bool(r[2]), r[3]) for r in rows]


def generation(conn: sqlite3.Connection, scope: str, source: str) -> int:
    """The source's last recorded import (0: none), read in the admitting transaction."""
    return int(conn.execute("SELECT COALESCE(MAX(generation), 0) FROM import_sections WHERE scope = ? AND source = ?",
                            (scope, source)).fetchone()[0])


def record(conn: sqlite3.Connection, scope: str, source: str, generation_: int,
           sections: list[tuple[str, str, bool]], carrier: str, now_ms: int) -> None:
    """Inside the caller's transaction: ``sections`` ((digest, heading JSON, sent now)) are the
    source's current sections as of import ``generation_``; those sent now were carried by the
    parts of namespace ``carrier``, the others keep theirs; every other row stops being current."""
    conn.execute("UPDATE import_sections SET current = 0 WHERE scope = ? AND source = ?", (scope, source))
    conn.executemany(
        "INSERT INTO import_sections(scope, source, digest, heading, generation, carrier, current, recorded_at)"
        " VALUES (?, ?, ?, ?, ?, ?, 1, ?) ON CONFLICT(scope, source, digest) DO UPDATE SET"
        " heading = excluded.heading, generation = excluded.generation, current = 1,"
        " carrier = CASE WHEN excluded.carrier != '' THEN excluded.carrier ELSE import_sections.carrier END,"
        " recorded_at = excluded.recorded_at",
        [(scope, source, digest, heading, generation_, carrier if sent else "", now_ms)
         for digest, heading, sent in sections])
