"""``cm import --from claude|codex|gemini|project``: the memory a user's agents already hold, planned
file by file and imported through the one document-import path.

Contract:
- ``plan(home, source, workspace)`` discovers the source's files (``memsources``) and plans each
  with ``importer.prepare_text`` under its source label (``claude:auto-memory/<name>``,
  ``codex:memory_summary``, ``project:AGENTS.md`` …), kind and target scope: parts, bytes and
  estimated tokens, the sensitive scan of every part. A file whose plan is refused (a secret:
  ``SENSITIVE_CONTENT_REJECTED``; a scope outside ``disclosure.allowedScopes``:
  ``UNAUTHORIZED_SCOPE``; a line too long for a part) is skipped with that code, nothing of it
  sent. Nothing is queued and nothing is written by planning.
- Each file keeps its kind (``cmrunner.core.importkinds``), carried in its parts' envelopes to
  the Writer; ``FilePlan.may_become`` states what it may become and ``instruction_lines`` how many
  of its lines read as instructions to an agent (``directives``), which may never reach profile.
  Checked-in project files and everything in a per-project memory folder (``memsources``, Scope)
  target the project's scope only; only the user's own files (``personal``) target ``global``.
- Identity is the importer's, per section within the file's source label and scope: a file
  imported before and unchanged is ``unchanged`` in the plan and queues nothing, but only when
  every part that carried it was processed (committed): a failed part (dead) makes the file
  ``failed — run `cm retry <job>` `` and one to import (importing retries that job), a queued one
  makes it one to import (the Writer loop runs), a cancelled or quarantined one is ``not kept``
  (final for that text); a changed file
  sends only its new or edited sections (``N of M sections changed``; bytes and tokens are those
  of what is sent); a section removed from the file is reported and never forgotten (the Writer's
  import guard keeps what the user said either way).
- ``needs_permission``: ``document_import`` is not in ``disclosure.allowedProvenance``. The
  caller asks once; ``grant`` records it through the typed config path (``configedit``).
- ``run`` queues every new file's parts and runs one Writer loop for them (``importer.run_many``);
  ``outcome`` says per file what that did (which sections were added, changed or removed, nothing
  kept, failed and how to retry) and ``destination`` where the text goes (the configured model or agent CLI).
- ``skipped_folder(plans, cwd)``: the folder cm runs in, when a plan skipped a file only because
  that folder is not a registered project (``NO_PROJECT``: Claude Code's memory of it) or its
  project's memory is not allowed (``UNAUTHORIZED_SCOPE``); registering it and allowing its memory
  (``projectaccess``) imports those files. `cm import --from` and the TUI's import screen offer it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cmrunner.core import config as config_mod, directives, importkinds, projects
from cmrunner.core.errors import CmError
from cmrunner.core.home import DataPaths
from cmrunner.manage import importer, importplan, memsources

if TYPE_CHECKING:
    from cmrunner.writer_proc.writer import Outcome


@dataclass(frozen=True, slots=True)
class FilePlan:
    found: memsources.Found
    plan: importplan.Plan
    imported: bool   # nothing to do: no section changed and nothing failed or waits, or every part is queued already

    @property
    def status(self) -> str:
        """``new``, ``unchanged`` or ``N of M sections changed`` (see ``importer`` identity)."""
        return status(self.plan, self.imported)

    @property
    def kind_label(self) -> str:
        return importkinds.label(self.found.kind)

    @property
    def may_become(self) -> str:
        """Where this file's content may go (``importkinds.describe``), as the plan states it."""
        return importkinds.describe(self.found.kind)

    @property
    def instruction_lines(self) -> int:
        """Lines that read as instructions to an agent (``directives``): never written to profile."""
        if importkinds.PROFILE not in importkinds.may_become(self.found.kind):
            return 0
        return len(directives.lines(self.found.text))


@dataclass
class SourcePlan:
    source: str
    cfg: config_mod.Config
    paths: DataPaths
    files: list[FilePlan] = field(default_factory=list)
    skipped: list[memsources.Skipped] = field(default_factory=list)

    @property
    def new(self) -> list[FilePlan]:
        return [f for f in self.files if not f.imported]

    @property
    def needs_permission(self) -> bool:
        return bool(self.new) and "document_import" not in self.cfg.disclosure.allowed_provenance

    @property
    def tokens(self) -> int:
        return sum(f.plan.tokens for f in self.new)

    @property
    def parts(self) -> int:
        """The parts importing this plan processes: new ones and failed ones retried."""
        return sum(f.plan.count + f.plan.retry_parts for f in self.new)

    @property
    def fixed_tokens(self) -> int:
        """The part of ``tokens`` that is the Memory Agent's fixed instructions (``Plan.fixed_tokens``)."""
        return sum(f.plan.fixed_tokens for f in self.new)


def plan(home: str, source: str, workspace_path: str | None, user_home: str | None = None,
         cwd: str | None = None) -> SourcePlan:
    """Discover and plan one source (see module contract); nothing is queued. ``cwd``: the folder
    cm runs in, which a skipped project's remedy can name."""
    if source not in memsources.SOURCES:
        raise CmError("INVALID_ARGUMENTS", "--from must be one of " + ", ".join(memsources.SOURCES))
    cfg = config_mod.load(home)
    paths = DataPaths(cfg.data_root)
    project = None
    if workspace_path is not None:
        found_project = importer.resolve_workspace(paths, workspace_path)
        project = (found_project.path, found_project.scope)
    registered = projects.load(paths)
    found, skipped = memsources.discover(source, user_home or os.path.expanduser("~"), project,
                                         registered if source in ("claude", "gemini") else [], cwd)
    result = SourcePlan(source, cfg, paths, skipped=list(skipped))
    by_scope = {p.scope: p for p in registered}
    for item in found:
        if item.scope not in cfg.allowed_scopes:
            result.skipped.append(memsources.Skipped(
                item.path, "UNAUTHORIZED_SCOPE", importer.unauthorized(item.scope, by_scope.get(item.scope))))
            continue
        try:
            file_plan = importer.prepare_text(cfg, item.text, os.path.basename(item.path), item.scope, item.author,
                                              item.label, item.kind, paths)
        except CmError as exc:
            result.skipped.append(memsources.Skipped(item.path, exc.code, exc.message))
            continue
        result.files.append(FilePlan(item, file_plan, _imported(paths, file_plan)))
    return result


def skipped_folder(plans: list[SourcePlan], cwd: str) -> str | None:
    """See module contract: that folder's real path (a registered project's path), or ``None``."""
    real = os.path.realpath(cwd)
    spelled = memsources.claude_project_dir(real)
    for planned in plans:
        registered = projects.match(projects.load(planned.paths), real)
        for skip in planned.skipped:
            if skip.code == "NO_PROJECT" and os.path.basename(os.path.dirname(skip.path)) == spelled:
                return real
            if skip.code == "UNAUTHORIZED_SCOPE" and registered is not None and \
                    skip.reason.startswith(f"{registered.scope} is not"):
                return registered.path
    return None


def _imported(paths: DataPaths, file_plan: importplan.Plan) -> bool:
    from cmrunner.capture import observations
    from cmrunner.core import store

    if file_plan.count == 0:  # no section changed since the source's last import: done unless its parts are not
        return not (file_plan.carried.failed or file_plan.carried.waiting)
    conn = store.open_existing(paths)
    if conn is None:
        return False
    try:
        return all(observations.exists(conn, file_plan.namespace, importer.part_entry(i))
                   for i in range(1, file_plan.count + 1))
    finally:
        conn.close()


def status(file_plan: importplan.Plan, imported: bool) -> str:
    """A plan's line for one file: ``new``, ``unchanged`` (only when every part that carried it
    was processed), ``N of M sections changed``, or what became of its last import when that did
    not commit (``failed — run `cm retry <job>` ``, queued, not kept), plus what was removed from
    the file (``removed, not forgotten``)."""
    delta = file_plan.delta
    if delta is None:
        return "unchanged" if imported else "new"
    said = last_import(file_plan.carried) if not delta.changes and not file_plan.carried.committed else \
        "unchanged" if not delta.changes else \
        f"{delta.edited + delta.added} of {delta.total} section{'s' if delta.total != 1 else ''} changed"
    if delta.changes and file_plan.carried.failed:
        said += f"; its last import {last_import(file_plan.carried)}"
    if delta.resent:
        said += f", {delta.resent} resent (their earlier part never reached memory)"
    if delta.removed:
        said += f", {len(delta.removed)} removed (not forgotten)"
    return said


def last_import(carried: importplan.Carried) -> str:
    """What became of a source's last import when it did not commit, in the user's words."""
    if carried.failed:
        job, issue = carried.failed[0]
        more = f" (and {len(carried.failed) - 1} more failed)" if len(carried.failed) > 1 else ""
        return f"failed — run `cm retry {job}`" + (f" ({issue})" if issue else "") + more + \
            "; importing again retries it"
    if carried.waiting:
        return "queued, not yet processed; importing again runs the Memory Agent on it"
    return "not kept: its part was cancelled or quarantined (final for this text; change the file to send it again)"


SECTIONS_SHOWN = 3  # an outcome names at most this many sections, then "and N more" (80×24 screens)


def outcome(home: str, report: importer.ImportReport) -> str:
    """What one file's import did, in the user's words: the sections its parts' commits added,
    changed or removed (``views.history.changes_of``, as ``cm flush`` says them; at most
    ``SECTIONS_SHOWN``, then "and N more"), the documents it was kept in when no section text
    changed, that it was processed and nothing was kept, or what stopped it and what to do
    (``cm retry``, ``cm status``)."""
    from cmrunner.views import history as history_view

    parts = report.parts
    failed = [p for p in parts if p["state"] == "dead"]
    waiting = [p for p in parts if p["state"] in ("pending", "claimed")]
    lost = [p for p in parts if p["state"] in ("quarantined", "cancelled")]
    kept = sorted({target for p in parts for target in p["retainedIn"]})
    said = []
    if failed:
        issue = failed[0]["issue"]
        said.append(f"failed — run `cm retry {failed[0]['jobId']}`" + (f" ({issue})" if issue else "")
                    + f"; see `cm status` ({len(failed)} of {len(parts)} part{'s' if len(parts) != 1 else ''})")
    if waiting:
        said.append(f"{len(waiting)} part{'s' if len(waiting) != 1 else ''} still queued (see `cm status`)")
    if lost:
        said.append(f"{len(lost)} part{'s' if len(lost) != 1 else ''} not kept ({lost[0]['state']}: final for "
                    "this text; change the file and its changed sections are sent again)")
    jobs = list(dict.fromkeys(p["jobId"] for p in parts if p["state"] == "processed" and p["jobId"]))
    changed = history_view.changes_of(home, jobs) if jobs else []
    if changed:
        more = len(changed) - SECTIONS_SHOWN
        said.append(", ".join(changed[:SECTIONS_SHOWN]) + (f" and {more} more (`cm history`)" if more > 0 else ""))
    elif kept:
        said.append("kept in " + ", ".join(kept) + " (no section text changed)")
    elif not parts:
        said.append("nothing was sent")
    elif not (failed or waiting or lost):
        said.append("processed; nothing was kept (the Memory Agent found nothing new worth keeping)")
    return "; ".join(said)


def destination(cfg: config_mod.Config) -> str:
    """Where an import's text goes: the configured model or agent CLI (as Adjust Memory says it)."""
    if cfg.remote is None:
        return "no model is configured yet: it waits queued until one is (`cm config init`)"
    return f"the Memory Agent's model, {config_mod.runtime_label(cfg.remote)}"


def grant(home: str) -> None:
    """Allow document imports (``disclosure.allowedProvenance +document_import``), as the user confirmed."""
    from cmrunner.manage import configedit

    configedit.set_value(home, "disclosure.allowedProvenance", "+document_import")


def run(home: str, source_plan: SourcePlan, wait: bool,
        progress: Callable[[Outcome], None]) -> list[importer.ImportReport]:
    """Queue the new files of a confirmed plan and (``wait``) process them; one report per file."""
    if "document_import" not in config_mod.load(home).disclosure.allowed_provenance and source_plan.new:
        raise CmError("IMPORT_DISABLED", "imports are disabled; confirm the plan's permission question or "
                                         "`cm config set disclosure.allowedProvenance +document_import`")
    cfg = config_mod.load(home)
    return importer.run_many(home, cfg, source_plan.paths, [f.plan for f in source_plan.new], wait, progress)
