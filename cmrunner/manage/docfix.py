"""``cm fix <document>``: a hand-edited memory file rewritten into a shape cm works with, on confirmation.

Contract:
- ``plan(home, document)`` reads the live file and says what ``cm fix`` would write, writing
  nothing: the problem that keeps cm from reading it (``sections.problem``: the line and rule;
  ``None`` when the file parses), the normalised text (``sections.normalise``: only what breaks a
  rule changes, and a title repeated by hand is numbered) and a unified diff. Text cm accepts as
  the user wrote it (before the first section, front matter, comments, a changed H1) is kept.
- ``apply(home, plan)`` writes that text through the Writer's own path (``usercommit``: the drain
  lease, recovery, the repository lock and a CAS against the exact bytes the plan read: a file
  changed since is ``STALE_REVISION`` and nothing is written) as the user's ``fix`` commit. The
  file as it was stays in section history: its sections as the user's edits, or, when cm could
  not parse it, the whole file as its untitled unit (``sections.salvage``). Then the dead jobs
  that waited for this document (``jobs.waiting_for``) are retried; the drain the lease's
  release starts processes them.
- What normalising cannot repair is refused before anything is written: a file that is not
  UTF-8 (``INVALID_DOCUMENT``: cm cannot guess its encoding) or over the hard budget
  (``DOCUMENT_TOO_LARGE``); a missing file is ``NOTHING_TO_FIX``.
"""

from __future__ import annotations

from cmrunner.core import config as config_mod, fsutil, history, sections, store
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc import jobs, usercommit

_ANY_SIZE = sections.Budgets(sections.MAX_HARD_BUDGET, sections.MAX_HARD_BUDGET)


class FixPlan:
    """What ``cm fix`` would write for one document (see the module contract)."""

    __slots__ = ("target", "path", "before", "after", "problem", "diff")

    def __init__(self, target: str, path: str, before: bytes, after: str, problem: CmError | None, diff: str) -> None:
        self.target = target
        self.path = path
        self.before = before
        self.after = after
        self.problem = problem
        self.diff = diff

    @property
    def changes(self) -> bool:
        return self.after.encode("utf-8") != self.before


class Fixed:
    __slots__ = ("receipt_id", "revived")

    def __init__(self, receipt_id: str, revived: list[str]) -> None:
        self.receipt_id = receipt_id
        self.revived = revived


def _paths(home: str) -> DataPaths:
    return DataPaths(config_mod.load(home).data_root)


def plan(home: str, document: str) -> FixPlan:
    target = document.strip()
    sections.target_title(target)  # INVALID_TARGET_REFERENCE for anything else
    paths = _paths(home)
    path = paths.document(target)
    raw = fsutil.read_regular_file(path, sections.MAX_HARD_BUDGET, f"memory document {target}")
    if raw is None:
        raise CmError("NOTHING_TO_FIX", f"{path} does not exist; cm creates it at the first commit that writes it")
    found = sections.problem(target, raw)
    after = sections.normalise(target, raw)
    diff = history.unified(raw.decode("utf-8"), after, f"{path} (now)", f"{path} (normalised)")
    return FixPlan(target, path, raw, after, found, diff)


def apply(home: str, planned: FixPlan) -> Fixed:
    paths = _paths(home)
    with usercommit.exclusive(paths, home) as session:
        raw = fsutil.read_regular_file(planned.path, sections.MAX_HARD_BUDGET, f"memory document {planned.target}")
        if raw != planned.before:
            raise CmError("STALE_REVISION", f"{planned.path} changed since cm fix read it; nothing was written: "
                                            f"run `cm fix {planned.target}` again")
        try:
            before = sections.parse(planned.target, raw, _ANY_SIZE)
        except CmError:
            before = sections.salvage(planned.target, raw)
        after = sections.parse(planned.target, planned.after)
        receipt_id = usercommit.commit_change(session, {planned.target: before}, {planned.target: after}, "fix")
        now = usercommit.now_ms()
        with store.immediate(session.conn):
            revived = [jobs.retry(session.conn, job_id, now) for job_id in jobs.waiting_for(session.conn, planned.target)]
    return Fixed(receipt_id, revived)
