"""Memory Control: Search / View Memory, Adjust Memory and Processing Status.

Contract:
- Viewing and searching use ``browse`` only (authorized documents, read-only, no SQLite); empty
  memory and a search without matches have their own explicit messages.
- Adjust Memory shows where the request goes (scope, model, the disclosure) before Enter submits
  it through ``adjust.submit``; its status is then polled from the store. Leaving the screen does
  not withdraw a submitted request, and only ``processed`` is reported as finished — with the
  reminder that the Writer may have ignored it.
- Processing Status (from Home, or Ctrl+S in Adjust Memory) lists unfinished work from
  ``adjust.overview`` with the same grouped reasons and remedies as ``cm status`` (quarantined
  observations and failed jobs by code, the last drain failure); ``c`` asks for processing to
  continue, Enter on a failed job retries it.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input, OptionList

from cmrunner.core import config as config_mod
from cmrunner.core.errors import CmError
from cmrunner.manage import adjust
from cmrunner.tui.widgets import CmScreen, Menu, Text, error_text, option
from cmrunner.views import browse, history as history_view

HIT_CHARS = 80


def _hit_text(text: str) -> str:
    """A matching line as the result list shows it: whole, or cut on purpose with an ellipsis."""
    return text if len(text) <= HIT_CHARS else text[:HIT_CHARS - 1].rstrip() + "…"

class ViewMemoryScreen(CmScreen):
    TITLE_TEXT = "Memory Control · Search / View Memory"
    HINT = "↑↓ move · Enter open · Tab search field · Esc back"

    def __init__(self) -> None:
        super().__init__()
        self.docs: list[browse.Document] = []
        self.hits: list[browse.Hit] = []

    def body(self) -> ComposeResult:
        yield Text("", id="summary")
        yield Menu([], id="documents")
        yield Input(placeholder="search words (local text match)", id="query")
        yield Text("", id="results-title")
        yield Menu([], id="results")

    def on_mount(self) -> None:
        try:
            self.docs = browse.documents(self.app.home)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        menu = self.query_one("#documents", Menu)
        menu.add_options([option(f"doc:{i}", f"{d.title}" + ("  (empty)" if d.empty else
                                                              f"  ({len(d.lines)} lines)"))
                          for i, d in enumerate(self.docs)])
        if not self.docs:
            self.query_one("#summary", Text).set("No document is authorized for reading (disclosure.allowedScopes).")
        elif all(d.empty for d in self.docs):
            self.query_one("#summary", Text).set("No memory is stored yet. It appears here once the Writer has "
                                                 "processed your conversations or an Adjust Memory request.")
        else:
            self.query_one("#summary", Text).set("Authorized documents (read-only):")
        self.query_one("#results", Menu).display = False
        menu.highlighted = 0 if self.docs else None
        menu.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.hits = browse.search(self.docs, event.value)
        results = self.query_one("#results", Menu)
        results.clear_options()
        title = self.query_one("#results-title", Text)
        if not event.value.strip():
            title.set("Type words to search for.")
            results.display = False
            return
        if not self.hits:
            title.set(f"No matches for “{event.value.strip()}”.")
            results.display = False
            return
        names = {d.target: d.title for d in self.docs}
        title.set(f"{len(self.hits)} matching line{'' if len(self.hits) == 1 else 's'}:")
        results.add_options([option(f"hit:{i}", f"{names[h.target]}, line {h.line + 1}: {_hit_text(h.text)}")
                             for i, h in enumerate(self.hits)])
        results.display = True
        results.highlighted = 0
        results.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        kind, index = str(event.option_id).split(":", 1)
        if kind == "doc":
            self.app.push_screen(DocumentScreen(self.docs[int(index)], 0))
        else:
            hit = self.hits[int(index)]
            doc = next(d for d in self.docs if d.target == hit.target)
            self.app.push_screen(DocumentScreen(doc, hit.line // browse.PAGE_LINES))


class DocumentScreen(CmScreen):
    HINT = "PgDn/→ next page · PgUp/← previous page · Esc back"
    BINDINGS = [Binding("pagedown,right,n", "page(1)", show=False), Binding("pageup,left,p", "page(-1)", show=False)]

    def __init__(self, document: browse.Document, number: int) -> None:
        super().__init__()
        self.document = document
        self.number = number
        self.TITLE_TEXT = f"Memory · {document.title}"

    def body(self) -> ComposeResult:
        yield Text("", id="page-info")
        yield Text("", id="page")

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        self.number, lines = browse.page(self.document, self.number)
        total = browse.page_count(self.document)
        info = f"page {self.number + 1}/{total} · read-only"
        if self.document.empty:
            info += " · this document is empty"
        self.query_one("#page-info", Text).set(info)
        self.query_one("#page", Text).set("\n".join(lines))

    def action_page(self, step: int) -> None:
        self.number += step
        self.show()


class AdjustScreen(CmScreen):
    TITLE_TEXT = "Memory Control · Adjust Memory"
    HINT = "Enter submit · Tab switch field · Ctrl+S Processing Status · Esc back"
    BINDINGS = [Binding("ctrl+s", "status", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.choices: list[adjust.ScopeChoice] = []
        self.scope: str | None = None
        self.entry_id: str | None = None

    def body(self) -> ComposeResult:
        yield Text("Describe a correction, something to forget, or a change such as “make my preference for "
                   "tabs global”. Choose where it applies:")
        yield Menu([], id="scopes")
        yield Text("", id="disclosure")
        # no select-all on focus: a letter typed on the scope list moves here and must not be replaced by the next
        yield Input(placeholder="your request, in your own words", id="request", select_on_focus=False)
        yield Text("", id="request-status")

    def on_mount(self) -> None:
        home = self.app.home  # type: ignore[attr-defined]
        try:
            self.choices = adjust.scopes(home)
            remote = config_mod.load(home).remote
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        menu = self.query_one("#scopes", Menu)
        menu.add_options([option(c.scope, c.label) for c in self.choices])
        if not self.choices:
            self.notice.show("No memory is authorized for reading and writing (disclosure.allowedScopes and "
                             "writableScopes); nothing can be adjusted.")
            self.query_one("#request", Input).disabled = True
            return
        model = config_mod.runtime_label(remote) if remote else "the model (not configured yet: the " \
                                                                            "request waits until one is)"
        self.query_one("#disclosure", Text).set(
            f"Notice: your words are stored locally and sent, as your own request, to {model}. The Writer "
            "decides how to apply them and may change nothing. Submitted requests are kept even if you leave.")
        self.scope = self.choices[0].scope
        menu.highlighted = 0
        self.query_one("#request", Input).focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.scope = str(event.option_id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.scope = str(event.option_id)
        self.query_one("#request", Input).focus()

    def on_key(self, event: events.Key) -> None:
        """Typing while the scope list has focus types into the request (the list has no use for letters)."""
        request = self.query_one("#request", Input)
        if event.is_printable and event.character and not request.disabled \
                and self.focused is self.query_one("#scopes", Menu):
            event.stop()
            event.prevent_default()
            request.focus()
            request.insert_text_at_cursor(event.character)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._warned = False  # a changed request is warned about afresh

    def leaving_loses(self) -> str | None:
        if self.query_one("#request", Input).value.strip():
            return "Your request is not sent yet: Enter sends it; Esc again leaves without it."
        return None

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.scope is None:
            return
        try:
            submitted = adjust.submit(self.app.home, self.scope, event.value)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc, "nothing was submitted"))
            return
        self.entry_id = submitted.entry_id
        event.input.value = ""
        # task_id counts every task in the store, not this user's requests: "Request 3" for a first one.
        self.notice.show(f"Your request was submitted for {self.scope}.", "ok")
        self.poll()
        self.set_interval(0.5, self.poll)

    def poll(self) -> None:
        if self.entry_id is None:
            return
        try:
            found = adjust.request_status(self.app.home, self.entry_id)  # type: ignore[attr-defined]
        except CmError as exc:
            self.query_one("#request-status", Text).set(f"status unavailable: {exc.code}")
            return
        self.query_one("#request-status", Text).set(describe_request(found))

    def action_status(self) -> None:
        self.app.push_screen(StatusScreen())


def outcome_text(changes: list[dict] | None) -> str:
    """What a processed request did to the memory, section by section, in the user's terms."""
    if changes is None:
        return "Open Search / View Memory to see the memory as it is now."
    if not changes:
        return "Nothing was changed: the Writer kept nothing from this request."
    done = [f"{c['target']} / {c['section'] or '(untitled)'} {history_view.CHANGE_WORDS.get(c['kind'], c['kind'])}" for c in changes]
    return "Changed: " + "; ".join(done) + "."


def describe_request(found: dict | None) -> str:
    if found is None:
        return "Status: unknown (the request is not in the store)."
    state = found["state"]
    if state == "processed":
        return "Status: processed. " + outcome_text(found.get("changes"))
    parts = [f"Status: {state}"]
    if found.get("jobState") == "retry" and found.get("retryAt"):
        parts.append("waiting to retry after a failure")
    elif found.get("jobState") == "running":
        parts.append("the Writer is working on it")
    if found.get("issue"):
        parts.append(f"issue {found['issue']}")
    if found.get("attempts"):
        parts.append(f"{found['attempts']} attempt(s)")
    if state in ("dead", "quarantined"):
        parts.append("not applied: see Processing Status to retry")
    return " · ".join(parts) + "."


class StatusScreen(CmScreen):
    TITLE_TEXT = "Memory Control · Processing Status"
    HINT = "c continue processing · Enter retry the highlighted failed job · x cancel it · Esc back"
    BINDINGS = [Binding("c", "continue", show=False), Binding("x", "cancel_job", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[adjust.JobRow] = []

    def body(self) -> ComposeResult:
        yield Text("", id="summary")
        yield Text("", id="problems")
        yield Menu([], id="jobs")
        yield Text("", id="requests")

    def on_mount(self) -> None:
        self.refresh_view()
        self.set_interval(1.0, self.refresh_view)

    def refresh_view(self) -> None:
        try:
            view = adjust.overview(self.app.home)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        explained = problem_lines(view)
        problems = self.query_one("#problems", Text)
        problems.set("\n".join(explained))
        problems.display = bool(explained)
        if not view.exists:
            self.query_one("#summary", Text).set("Nothing has been queued yet.")
            self.query_one("#jobs", Menu).display = False
            return
        counts = ", ".join(f"{k} {v}" for k, v in view.observations.items()) or "none"
        self.query_one("#summary", Text).set(
            f"Observations: {counts}\nWriter: {'running' if view.drain_alive else 'not running'}\n"
            + ("Unfinished jobs:" if view.jobs else "No unfinished job."))
        menu = self.query_one("#jobs", Menu)
        keep = menu.highlighted
        self.jobs = view.jobs
        menu.clear_options()
        menu.add_options([option(f"job:{i}", job_line(j)) for i, j in enumerate(view.jobs)])
        menu.display = bool(view.jobs)
        if not view.jobs and self.focused is menu:
            self.set_focus(None)
        if view.jobs:
            menu.highlighted = min(keep or 0, len(view.jobs) - 1)
        if view.jobs and self.focused is not menu:
            menu.focus()
        lines = [f"#{r['taskId']} {r['scope']}: {describe_request(r)}" for r in view.requests[:8]]
        self.query_one("#requests", Text).set("Your recent Adjust Memory requests:\n" + "\n".join(lines)
                                              if lines else "")

    def action_continue(self) -> None:
        try:
            started = adjust.continue_processing(self.app.home)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        self.notice.show("Processing continues in the background." if started else "Nothing is queued.", "ok")
        self.refresh_view()

    def action_cancel_job(self) -> None:
        """Cancel the highlighted job (``cm cancel``): its text is deleted and it is never sent."""
        menu = self.query_one("#jobs", Menu)
        if not self.jobs or menu.highlighted is None:
            self.notice.show("No job to cancel.")
            return
        job = self.jobs[min(menu.highlighted, len(self.jobs) - 1)]
        try:
            done = adjust.cancel(self.app.home, job.id)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        self.notice.show(f"job {job.id[:12]} cancelled: {len(done.observation_ids)} item(s) deleted, never sent.",
                         "ok")
        self.refresh_view()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        job = self.jobs[int(str(event.option_id).split(":", 1)[1])]
        if not job.retryable_by_user:
            self.notice.show(f"job {job.id[:12]} is {job.state}; only failed jobs can be retried")
            return
        try:
            adjust.retry(self.app.home, job.id)  # type: ignore[attr-defined]
        except CmError as exc:
            self.notice.show(error_text(exc))
            return
        self.notice.show(f"job {job.id[:12]} queued for another attempt.", "ok")
        self.refresh_view()


def job_line(job: adjust.JobRow) -> str:
    what = {"running": "in progress" if job.lease_live else "lease expired, will be resumed",
            "retry": "waiting for its retry", "dead": "failed (Enter to retry)",
            "quarantined": "quarantined (Enter to retry)", "paused": "paused (Enter to retry)"}[job.state]
    issue = f" · {job.cause or job.issue}" if job.issue else ""
    return f"{job.id[:12]} {job.kind} {job.scope}: {what} · {job.attempts} attempt(s){issue}"


def problem_lines(view: adjust.Overview) -> list[str]:
    """The grouped reasons and remedies of ``cm status``, for the screen."""
    from cmrunner.views import status

    lines: list[str] = []
    problems = view.problems or {}
    for group in problems.get("quarantined", []):
        lines.append(f"Quarantined {group['count']} × {group['code']}: {group['reason']}.")
        lines.append(f"  Remedy: {group['remedy']}.")
    for group in problems.get("dead", []):
        lines.append(f"Failed {group['count']} job(s) × {group['cause']}: {group['reason']}.")
        lines.append(f"  Remedy: {group['remedy']} (or Enter on the job below).")
    for group in problems.get("isolated", []):
        lines.append(f"Set aside {group['count']} session(s) × {group['issue']}: {group['reason']}.")
        lines.append(f"  Remedy: {group['remedy']}.")
    if view.waiting:
        lines.append(f"Waiting: {view.waiting['message']}.")
    if view.last_failure:
        lines.append(f"Last drain failure: {status.failure_line(view.last_failure)}")
    return lines
