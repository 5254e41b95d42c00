"""Bring in what your agents already know: the memory files Claude Code, Codex CLI and Gemini CLI
keep, planned and imported through ``manage.memimport`` (the same path as ``cm import --from``).

Contract:
- Opened by the first run right after the agents step (from its result screen) and from Home
  (Agent Integration). It plans, in a worker thread, the sources of the agents the user chose
  first, then the other sources present on this machine (``SOURCES``); planning queues and writes
  nothing. A source whose plan fails shows its code and message in place; the others still show.
- The plan lists each file with its source label, kind, target scope, parts, bytes and estimated
  tokens of what is sent (``new``, ``unchanged`` only when every part that carried it was
  processed, ``N of M sections changed``: a changed file sends only its changed sections,
  ``manage.importer``; a file whose last import failed is ``failed — run `cm retry <job>` `` and is
  planned again: Import retries it) and what it may become (the kind's documents; lines read as
  instructions never reach the profile), every skipped file with its code and reason, and the
  total, whose estimate names its parts (the fixed instructions every request carries, and the
  files' text) and where the text goes (``memimport.destination``: the configured model or agent CLI). When a file needs ``document_import`` disclosure the screen
  says so, and that choosing Import grants it (``memimport.grant``, recorded in config.json)
  before anything is queued; Skip grants nothing.
- Layout (usable at 80×24): the per-file plan scrolls in its own box, PgUp/PgDn scroll it whatever
  has focus; the total and the permission line sit below the box and above the choices, so they
  are never below the fold; the result replaces the plan in that box, so no result line is cut.
- Import (Enter on the highlighted first choice) runs ``memimport.run`` per source in a worker
  thread with the Writer loop (``wait``): progress per processed job, then one line per file in
  the user's words (``memimport.outcome``: which sections were added, changed or removed, nothing kept,
  failed with its ``cm retry``; never a bare "processed"). A failure is shown as its code and one-line remedy; nothing but labels, paths,
  codes and counts is ever shown (no file text, no key).
- While the import runs, Esc only says to wait, and ``q`` warns once that cm exits only when the
  Writer loop has processed the queued parts (it runs in this process).
- When a file is skipped only because the folder cm runs in is not a registered project, or its
  project's memory is not allowed (``folder_offer``), a choice registers that folder under its own
  name and allows its memory in one step (``projectaccess.register``), then plans again.
- Skip (a visible choice, or Esc) imports nothing and writes nothing. When nothing is found the
  screen says so in one line; during the first run the flow then goes on to Home by itself with
  that line as Home's notice.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import OptionList

from cmrunner.core.errors import CmError
from cmrunner.manage import importplan, memimport, projectaccess
from cmrunner.tui.widgets import PRIORITY_PAGING, CmScreen, Menu, Text, error_text, option

if TYPE_CHECKING:
    from cmrunner.manage.importer import ImportReport
    from cmrunner.writer_proc.writer import Outcome

# Each importable source and the agent whose memory it is (agent ids as ``integrations.discovery``).
SOURCES = (("claude", "claude-code", "Claude Code"), ("codex", "codex", "Codex CLI"), ("gemini", "gemini", "Gemini CLI"))
NOTHING = "Nothing to bring in: no memory files of Claude Code, Codex CLI or Gemini CLI were found on this machine."


class Found:
    """What planning found: one ``SourcePlan`` (or the error that stopped it) per source, in order."""

    def __init__(self, plans: list[tuple[str, str, memimport.SourcePlan | CmError]]) -> None:
        self.plans = plans

    @property
    def ok(self) -> list[memimport.SourcePlan]:
        return [p for _s, _t, p in self.plans if isinstance(p, memimport.SourcePlan)]

    @property
    def new(self) -> int:
        return sum(len(p.new) for p in self.ok)

    @property
    def empty(self) -> bool:
        return not any(isinstance(p, CmError) or p.files or p.skipped for _s, _t, p in self.plans)

    @property
    def needs_permission(self) -> bool:
        return any(p.needs_permission for p in self.ok)


def plan_sources(home: str, chosen: list[str], user_home: str, cwd: str | None = None) -> Found:
    """Plan every source, the chosen agents' first (see module contract)."""
    order = sorted(SOURCES, key=lambda s: s[1] not in chosen)
    plans: list[tuple[str, str, memimport.SourcePlan | CmError]] = []
    for source, agent, title in order:
        heading = title + (" (chosen)" if agent in chosen else " (found on this machine)")
        try:
            plans.append((source, heading, memimport.plan(home, source, None, user_home, cwd)))
        except CmError as exc:
            plans.append((source, heading, exc))
    return Found(plans)


def folder_offer(found: Found, cwd: str) -> str | None:
    """The folder cm runs in, when a file was skipped only because that folder is not a registered
    project (``NO_PROJECT``: Claude Code's memory of it) or its project's memory is not allowed
    (``UNAUTHORIZED_SCOPE``): registering it and allowing its memory in one step imports it
    (``memimport.skipped_folder``, which `cm import --from` offers too)."""
    return memimport.skipped_folder(found.ok, cwd)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _short(path: str, user_home: str) -> str:
    """``path`` with the user's home written ``~`` (the folder names are what tell the files apart)."""
    root = user_home.rstrip(os.sep) + os.sep
    return "~" + os.sep + path[len(root):] if path.startswith(root) else path


def plan_lines(found: Found, user_home: str) -> list[str]:
    """The plan's details as the screen's scrolling box shows them: per source its files and skipped files."""
    lines: list[str] = []
    for _source, heading, planned in found.plans:
        if isinstance(planned, CmError):
            lines += [heading, f"  {error_text(planned, 'this source is left out')}"]
            continue
        if not planned.files and not planned.skipped:
            continue
        lines.append(heading)
        for f in planned.files:
            p = f.plan
            state = f.status if f.imported or (p.count == 0 and not p.retry_parts) else \
                f"{f.status}, {_count(p.retry_parts, 'part')} to retry, ~{p.text_tokens:,} tokens of text" if p.count == 0 \
                else f"{f.status}, {_count(p.count, 'part')}, {p.sent_bytes:,} of {p.file_bytes:,} bytes, " \
                f"~{p.text_tokens:,} tokens of text"
            lines.append(f"  {f.found.label} [{f.kind_label}] → {p.scope}: {state}")
            if not f.imported:
                instructions = f.instruction_lines
                lines.append(f"    may become: {f.may_become}" + (
                    f"; {_count(instructions, 'line')} read as instructions to an agent (never profile)"
                    if instructions else ""))
        for skip in planned.skipped:
            lines.append(f"  skipped {skip.code}: {_short(skip.path, user_home)} — {skip.reason}")
    return lines


def total_lines(found: Found) -> list[str]:
    """The plan's total and the permission it needs: shown below the scrolling box, never below the fold."""
    lines: list[str] = []
    tokens = sum(p.tokens for p in found.ok)
    fixed = sum(p.fixed_tokens for p in found.ok)
    lines.append(f"To import: {_count(found.new, 'file')}, {importplan.estimate_words(tokens, fixed)} "
                 "(estimate)." if found.new else
                 "Nothing new to import: every file found is unchanged since its import, or skipped.")
    if found.new:
        parts = sum(p.parts for p in found.ok)
        lines.append(f"Requests: {importplan.cap_words(parts, tokens, found.ok[0].cfg.spend)}.")
        lines.append(f"Sent to: {memimport.destination(found.ok[0].cfg)}.")
    if found.needs_permission:
        lines.append("Permission: document imports are off (disclosure.allowedProvenance lacks document_import). "
                     "Choosing Import grants it, saved in config.json; Skip leaves it off.")
    return lines


def result_lines(home: str, planned: memimport.SourcePlan, reports: list[ImportReport]) -> list[str]:
    """One line per imported file, in the user's words (``memimport.outcome``): the sections added,
    changed or removed, nothing kept, or failed with what to do."""
    lines = [f"{f.found.label} → {report.scope}: {memimport.outcome(home, report)}"
             for f, report in zip(planned.new, reports, strict=True)]
    if reports and reports[0].note:
        lines.append(reports[0].note)
    return lines


class ImportScreen(CmScreen):
    TITLE_TEXT = "Agent Integration · Bring in what your agents already know"
    HINT = "↑↓ move · PgUp/PgDn scroll · Enter choose · Esc skip"
    BINDINGS = PRIORITY_PAGING
    PAGE_TARGET = "#plan-box"

    def __init__(self, chosen: list[str], setup: bool = False) -> None:
        super().__init__()
        self.chosen = chosen
        self.setup = setup
        self.found: Found | None = None
        self.folder: str | None = None   # the folder cm runs in, when registering it would import skipped files
        self.running = False
        self.finished = False

    def body(self) -> ComposeResult:
        yield Text("cm can import the memory your agents already keep (their memory and instruction files). "
                   "Each file goes through the Memory Agent, which keeps what is worth keeping; nothing is sent "
                   "before you choose Import.")
        with VerticalScroll(id="plan-box"):  # a long plan (or result) scrolls here, with PgUp/PgDn
            yield Text("Looking for memory files …", id="plan")
        yield Text("", id="total")  # what choosing Import does: outside the box, so always in view
        yield Text("", id="progress")
        yield Menu([], id="choice")

    def on_mount(self) -> None:
        self.query_one("#choice", Menu).display = False
        self.query_one("#progress", Text).display = False
        self.query_one("#total", Text).display = False
        self.run_worker(self._discover, thread=True, exclusive=True)

    def _discover(self) -> None:
        app = self.app
        found = plan_sources(app.home, self.chosen, app.user_home, app.cwd)  # type: ignore[attr-defined]
        app.call_from_thread(self._shown, found)

    def _shown(self, found: Found) -> None:
        self.found = found
        if found.empty:
            self.query_one("#plan", Text).set(NOTHING)
            if self.setup:
                self.app.setup_complete(NOTHING)  # type: ignore[attr-defined]
                return
            self._done()
            return
        self.query_one("#plan", Text).set("\n".join(plan_lines(found, self.app.user_home)))  # type: ignore[attr-defined]
        self.query_one("#total", Text).set("\n".join(total_lines(found)))
        self.query_one("#total", Text).display = True
        menu = self.query_one("#choice", Menu)
        menu.clear_options()
        self.folder = folder_offer(found, self.app.cwd)  # type: ignore[attr-defined]
        register = [option("register", f"Register this folder ({os.path.basename(self.folder)}) as a project "
                                       "and allow its memory")] if self.folder else []
        if found.new:
            grant = " and allow document imports" if found.needs_permission else ""
            menu.add_options([option("import", f"Import {_count(found.new, 'file')}{grant}"), *register,
                              option("skip", "Skip: import nothing")])
        else:
            menu.add_options([*register, option("skip", "Continue")])
        menu.highlighted = 0
        menu.display = True
        menu.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_id == "import":
            self.start_import()
        elif event.option_id == "register":
            self.register_folder()
        else:
            self.leave()

    def register_folder(self) -> None:
        """Register the folder cm runs in and allow its memory (one confirmation: this choice), then plan again."""
        if self.folder is None or self.running:
            return
        try:
            done = projectaccess.register(self.app.home, self.folder, os.path.basename(self.folder), True)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        self.notice.show(f"Registered {done.project.name} as {done.project.scope} and allowed its memory "
                         "(saved in config.json). Planning again …")
        self.query_one("#choice", Menu).display = False
        self.query_one("#total", Text).display = False
        self.query_one("#plan", Text).set("Looking for memory files …")
        self.run_worker(self._discover, thread=True, exclusive=True)

    def start_import(self) -> None:
        if self.running or self.found is None:
            return
        self.running = True
        self.query_one("#choice", Menu).display = False
        progress = self.query_one("#progress", Text)
        progress.set("Importing … (the Memory Agent reads each part; this can take a while)")
        progress.display = True
        self.run_worker(self._import, thread=True, exclusive=True)

    def _import(self) -> None:
        app = self.app
        found = self.found
        assert found is not None
        lines: list[str] = []
        done = {"jobs": 0}

        def progress(outcome: Outcome) -> None:
            done["jobs"] += 1
            app.call_from_thread(self.query_one("#progress", Text).set,
                                 f"Importing … {_count(done['jobs'], 'part')} processed (last: {outcome.state})")

        try:
            if found.needs_permission:
                memimport.grant(app.home)  # type: ignore[attr-defined]
                lines.append("Granted: disclosure.allowedProvenance +document_import (saved in config.json).")
            for planned in found.ok:
                if planned.new:
                    lines += result_lines(app.home, planned, memimport.run(app.home, planned, True, progress))  # type: ignore[attr-defined]
        except CmError as exc:
            lines.append(error_text(exc, "the files listed above were imported; the others were not"))
        app.call_from_thread(self._imported, lines)

    def _imported(self, lines: list[str]) -> None:
        self.running = False
        # the result takes the plan's place in the scrolling box: however long, none of it is cut
        self.query_one("#progress", Text).display = False
        self.query_one("#total", Text).display = False
        self.query_one("#plan", Text).set("Result:\n" + "\n".join(lines))
        self.query_one("#plan-box", VerticalScroll).scroll_home(animate=False)
        self._done()

    def _done(self) -> None:
        self.finished = True
        self.set_hint("PgUp/PgDn scroll · Enter continue · Esc back")
        menu = self.query_one("#choice", Menu)
        menu.clear_options()
        menu.add_options([option("skip", "Continue")])
        menu.highlighted = 0
        menu.display = True
        menu.focus()

    def leaving_loses(self) -> str | None:
        if self.running:
            return ("The import is running: quitting now closes this screen, but cm exits only when the Memory "
                    "Agent has processed the queued parts. Press q again to quit anyway.")
        return None

    def leave(self) -> None:
        if self.running:
            return
        if self.setup:
            self.app.setup_complete()  # type: ignore[attr-defined]
        else:
            self.app.pop_screen()

    def action_back(self) -> None:
        if self.running:
            self.notice.show("The import is running; wait for its result (it is queued and keeps going).")
            return
        self.leave()
